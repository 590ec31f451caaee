//! `cuzk bench --mix porep:10,winning:1`: a mixed stream of Filecoin kinds on one
//! engine, submitted in the order given (so `porep:10,winning:1` queues ten PoRep
//! sectors, then a WinningPoSt behind them), each at its kind's default priority,
//! and the latency of every job from its submission to its verified proof, per
//! kind. This is how the WinningPoSt latency under a PoRep queue is measured.
//!
//! Inputs: PoRep from `--c1` (else a 2 KiB sector sealed here); the other kinds from
//! input files (`--snap-input`, `--window-input`, `--winning-input`, as `cuzk <kind>
//! inputs` writes them; shape-only ones with `--timing-only`), else 2 KiB ones made
//! here by filecoin-proofs.
//!
//! `--submit-on-gpu winning` holds that kind's jobs back until the first partition
//! of an earlier job is on the GPU (the TIMELINE's first GPU_START), so a
//! WinningPoSt arrives behind a full queue with the GPU busy, and `--stop-after
//! winning` ends the run once every job of that kind has returned, cancelling the
//! rest (a queue of 32 GiB sectors would otherwise take ~80 s each to drain).

use std::{
    fs,
    path::PathBuf,
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::{bail, Context, Result};
use clap::Args;
use cuzk_filecoin::{
    parse_c1, parse_prover_id, post_test_inputs, read_c1, seal_test_sector, snap_test_inputs,
    Blinding, CircuitKind, FilecoinProver, PorepKind, PorepRequest, PostKind, Priority,
    ProverConfig, RegisteredPoStProof, RegisteredSealProof, RegisteredUpdateProof, UpdateKind,
    WindowPostRequest, WinningPostRequest,
};
use cuzk_scheduler::PipelineEngine;
use cuzk_timeline::Recorder;

use crate::kinds::{Request, RequestArgs, Which};
use crate::runtime::{load_policies, RunConfig};

#[derive(Args, Debug, Clone, Default)]
pub struct MixArgs {
    /// A mixed stream of Filecoin kinds instead of one workload, submitted in this
    /// order: `porep:10,winning:1` (kinds porep, snap, window, winning; `:N` jobs
    /// each). Reports each kind's latency from submission to verified proof.
    #[arg(long)]
    pub mix: Option<String>,
    /// With `--mix`: the SnapDeals input file (default: 2 KiB, made here).
    #[arg(long)]
    pub snap_input: Option<PathBuf>,
    /// With `--mix`: the WindowPoSt input file (default: 2 KiB, made here).
    #[arg(long)]
    pub window_input: Option<PathBuf>,
    /// With `--mix`: the WinningPoSt input file (default: 2 KiB, made here).
    #[arg(long)]
    pub winning_input: Option<PathBuf>,
    /// With `--mix`: submit this kind's jobs only once a partition of an earlier
    /// job is on the GPU: `winning` at the first GPU_START of the TIMELINE,
    /// `winning:2` at the second (the first one on a cold GPU loads its kernels
    /// and bases).
    #[arg(long)]
    pub submit_on_gpu: Option<String>,
    /// With `--mix`: once every job of this kind has returned, cancel the others
    /// and end the run (they are reported as cancelled).
    #[arg(long)]
    pub stop_after: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Porep,
    Snap,
    Window,
    Winning,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Porep => "porep",
            Kind::Snap => "snap",
            Kind::Window => "window",
            Kind::Winning => "winning",
        }
    }
}

fn parse_kind(name: &str, flag: &str) -> Result<Kind> {
    Ok(match name {
        "porep" => Kind::Porep,
        "snap" => Kind::Snap,
        "window" => Kind::Window,
        "winning" => Kind::Winning,
        _ => bail!("`{name}` in {flag} is not a kind: porep, snap, window or winning"),
    })
}

/// Parses `porep:10,winning:1`.
fn parse_mix(text: &str) -> Result<Vec<(Kind, usize)>> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, n) = part.split_once(':').unwrap_or((part, "1"));
        let kind = parse_kind(name, "--mix")?;
        let n: usize = n
            .parse()
            .with_context(|| format!("`{part}` in --mix: the count is not a number"))?;
        out.push((kind, n));
    }
    if out.is_empty() {
        bail!("--mix is empty: give e.g. porep:10,winning:1");
    }
    Ok(out)
}

/// One kind's request (cloned per job) and its engine settings.
struct Source {
    request: Option<Request>,
    porep: Option<PorepRequest>,
    priority: Priority,
    constraints: usize,
}

fn ready<K: CircuitKind>(prover: &FilecoinProver, k: &K, timing_only: bool) -> Result<usize> {
    let t = Instant::now();
    let r1cs = prover.r1cs(k)?;
    let params = if timing_only {
        prover.use_timing_only_params_for(k, 7)?
    } else {
        prover.params(k)?
    };
    println!(
        "{}: {} constraints, compiled and parameters ready in {:.2} s ({})",
        k.name(),
        r1cs.num_constraints(),
        t.elapsed().as_secs_f64(),
        params.path.display()
    );
    Ok(r1cs.num_constraints())
}

fn source(
    kind: Kind,
    args: &MixArgs,
    w: &crate::bench::WorkloadArgs,
    prover: &FilecoinProver,
    work: &std::path::Path,
) -> Result<Source> {
    let timing_only = w.timing_only;
    let from_file = |path: &Option<PathBuf>, which: Which| -> Result<Option<Request>> {
        path.as_ref()
            .map(|p| {
                RequestArgs {
                    input: Some(p.clone()),
                    ..RequestArgs::default()
                }
                .read(which)
            })
            .transpose()
    };
    let miner = 1000;
    let post = |proof: RegisteredPoStProof, sectors, seed, dir: &str| {
        post_test_inputs(proof, miner, sectors, seed, &work.join(dir))
    };
    Ok(match kind {
        Kind::Porep => {
            let prover_id = parse_prover_id(&w.filecoin.miner_id)?;
            let (input, sector) = match &w.c1 {
                Some(path) => {
                    let input =
                        read_c1(path).with_context(|| format!("reading {}", path.display()))?;
                    let sector = input.sector_num.unwrap_or(1);
                    (input, sector)
                }
                None => {
                    let s = seal_test_sector(
                        RegisteredSealProof::StackedDrg2KiBV1_1,
                        prover_id,
                        1,
                        11,
                        &work.join("porep"),
                    )?;
                    (parse_c1(&s.c1_json)?, s.sector)
                }
            };
            if cuzk_filecoin::is_shape_only(&input.c1) && !timing_only {
                bail!("the PoRep C1 is shape-only: run the mix with --timing-only");
            }
            let k = PorepKind::new(input.c1.registered_proof)?;
            let constraints = ready(prover, &k, timing_only)?;
            Source {
                request: None,
                porep: Some(PorepRequest {
                    input,
                    prover_id,
                    sector: Some(sector),
                    blinding: Blinding::Random,
                }),
                priority: Priority::Normal,
                constraints,
            }
        }
        Kind::Snap => {
            let r = match from_file(&args.snap_input, Which::Snap)? {
                Some(r) => r,
                None => Request::Snap(snap_test_inputs(
                    RegisteredUpdateProof::StackedDrg2KiBV1,
                    miner,
                    1,
                    &work.join("snap"),
                )?),
            };
            let Request::Snap(s) = &r else { unreachable!() };
            let constraints = ready(prover, &UpdateKind::new(s.proof)?, timing_only)?;
            Source {
                request: Some(r),
                porep: None,
                priority: Priority::Normal,
                constraints,
            }
        }
        Kind::Window | Kind::Winning => {
            let which = if kind == Kind::Window {
                Which::Window
            } else {
                Which::Winning
            };
            let path = if kind == Kind::Window {
                &args.window_input
            } else {
                &args.winning_input
            };
            let r = match from_file(path, which)? {
                Some(r) => r,
                None if kind == Kind::Window => {
                    let p = post(
                        RegisteredPoStProof::StackedDrgWindow2KiBV1_2,
                        2,
                        2,
                        "window",
                    )?;
                    Request::Window(WindowPostRequest {
                        proof: p.proof,
                        randomness: p.randomness.to_vec(),
                        prover_id: p.prover_id,
                        partition_index: 0,
                        vanilla_proofs: p.vanilla_proofs,
                        blinding: Blinding::Random,
                    })
                }
                None => {
                    let p = post(
                        RegisteredPoStProof::StackedDrgWinning2KiBV1,
                        1,
                        3,
                        "winning",
                    )?;
                    Request::Winning(WinningPostRequest {
                        proof: p.proof,
                        randomness: p.randomness.to_vec(),
                        prover_id: p.prover_id,
                        vanilla_proofs: p.vanilla_proofs,
                        blinding: Blinding::Random,
                    })
                }
            };
            let proof = match &r {
                Request::Window(r) => r.proof,
                Request::Winning(r) => r.proof,
                Request::Snap(_) => unreachable!(),
            };
            let k = PostKind::new(proof)?;
            let constraints = ready(prover, &k, timing_only)?;
            Source {
                request: Some(r),
                porep: None,
                priority: k.default_priority(),
                constraints,
            }
        }
    })
}

/// Runs the mix; prints per-kind latencies and writes `mix.json` under `--out`.
pub fn run(args: &MixArgs, w: &crate::bench::WorkloadArgs, cfg: &RunConfig) -> Result<()> {
    let mix = parse_mix(args.mix.as_deref().unwrap_or_default())?;
    let (late, gpu_starts) = match args.submit_on_gpu.as_deref() {
        None => (None, 0),
        Some(text) => {
            let (k, n) = text.split_once(':').unwrap_or((text, "1"));
            let n: usize = n.parse().ok().filter(|n| *n > 0).with_context(|| {
                format!("--submit-on-gpu {text}: the count is not a number from 1")
            })?;
            (Some(parse_kind(k, "--submit-on-gpu")?), n)
        }
    };
    let stop_after = args
        .stop_after
        .as_deref()
        .map(|k| parse_kind(k, "--stop-after"))
        .transpose()?;
    for (flag, k) in [("--submit-on-gpu", late), ("--stop-after", stop_after)] {
        if let Some(k) = k {
            if !mix.iter().any(|(m, n)| *m == k && *n > 0) {
                bail!("{flag} {}: the mix has no job of that kind", k.name());
            }
        }
    }
    if let Some(k) = late {
        if mix
            .iter()
            .take_while(|(m, _)| *m != k)
            .all(|(_, n)| *n == 0)
        {
            bail!(
                "--submit-on-gpu {}: no job comes before it in the mix to reach the GPU",
                k.name()
            );
        }
    }
    let dir = w.filecoin.params.apply();
    let prover = FilecoinProver::new(ProverConfig {
        parameter_dir: dir,
        verify: cfg.engine.verify && !w.timing_only,
        check_digest: false,
    });
    let work = tempfile::tempdir().context("creating a work directory")?;
    let mut kinds: Vec<Kind> = mix.iter().map(|(k, _)| *k).collect();
    kinds.sort();
    kinds.dedup();
    let mut sources = std::collections::BTreeMap::new();
    for k in kinds {
        sources.insert(k, source(k, args, w, &prover, work.path())?);
    }
    let log = sources
        .values()
        .map(|s| s.constraints.next_power_of_two().trailing_zeros())
        .max()
        .unwrap_or(10);
    let mut cfg = cfg.clone();
    if w.timing_only {
        cfg.engine.verify = false;
    }
    let built = load_policies(&cfg, &cfg.config.backend_needs(Some(log)))?;
    let plugins = crate::bench::plugins_json(&built.sources);
    // The run's TIMELINE beside its manifest, as `bench` writes its own: where a
    // latency goes (the queue, the budget, synthesis, the GPU lock) is in it.
    fs::create_dir_all(&w.out).with_context(|| format!("creating {}", w.out.display()))?;
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    let timeline = w.out.join(format!("mix-{stamp}.timeline.jsonl"));
    let engine = PipelineEngine::start(
        cfg.engine.clone(),
        built.policies,
        Arc::new(Recorder::new(Instant::now()).with_jsonl(&timeline)?),
    )?;

    // PoRep jobs are built (circuits from the vanilla proofs) before the clock
    // starts, as `bench --c1` does; the other kinds build theirs at submission.
    let mut pending = Vec::new();
    for (kind, n) in &mix {
        let s = &sources[kind];
        for _ in 0..*n {
            let p = match &s.porep {
                Some(r) => Some(prover.prepare_porep(r.clone())?),
                None => None,
            };
            pending.push((*kind, p));
        }
    }
    let recorder = engine.recorder().clone();
    let start = Instant::now();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let mut jobs = Vec::new();
    let mut held_back = false;
    for (kind, prepared) in pending {
        if Some(kind) == late && !held_back {
            held_back = true;
            // The queue is full and the GPU busy from the first GPU_START on.
            let started = || {
                recorder
                    .events()
                    .iter()
                    .filter(|e| e.event == cuzk_timeline::EventKind::GpuStart)
                    .count()
            };
            // (Or once no earlier job is left to get there.)
            while started() < gpu_starts && engine.open_jobs() > 0 {
                std::thread::sleep(Duration::from_millis(5));
            }
            println!(
                "{} jobs submitted {:.2} s into the run, at GPU_START number {gpu_starts}",
                kind.name(),
                start.elapsed().as_secs_f64()
            );
        }
        let s = &sources[&kind];
        let submitted = Instant::now();
        let (id, waiter): (u64, Box<dyn FnOnce() -> Result<()> + Send>) = match prepared {
            Some(p) => {
                let job = p.submit(&engine, s.priority);
                (
                    job.id(),
                    Box::new(move || job.wait().map(|_| ()).map_err(Into::into)),
                )
            }
            None => {
                let r = s.request.clone().context("no request")?;
                let job = submit(&prover, &engine, r, s.priority)?;
                (
                    job.id(),
                    Box::new(move || job.wait().map(|_| ()).map_err(Into::into)),
                )
            }
        };
        jobs.push((id, kind));
        let tx = done_tx.clone();
        std::thread::spawn(move || {
            let r = waiter();
            let _ = tx.send((id, kind, submitted, Instant::now(), r));
        });
    }
    drop(done_tx);
    let mut lat: std::collections::BTreeMap<Kind, Vec<Duration>> = Default::default();
    let mut cancelled: std::collections::BTreeMap<Kind, usize> = Default::default();
    let mut open: std::collections::HashMap<u64, Kind> = jobs.iter().copied().collect();
    let mut stopping = false;
    for (id, kind, submitted, done, r) in done_rx {
        open.remove(&id);
        // As each finishes (a run cut short still shows the jobs that landed).
        let status = match &r {
            Ok(()) => "",
            Err(_) if stopping => " (cancelled: --stop-after)",
            Err(_) => " (FAILED)",
        };
        println!(
            "{} job {id} done {:.2} s after its submission{status}",
            kind.name(),
            (done - submitted).as_secs_f64(),
        );
        match r {
            Ok(()) => lat.entry(kind).or_default().push(done - submitted),
            Err(_) if stopping => *cancelled.entry(kind).or_default() += 1,
            Err(e) => return Err(e.context(format!("a {} job of the mix failed", kind.name()))),
        }
        if let Some(k) = stop_after {
            if !stopping && !open.values().any(|&o| o == k) {
                stopping = true;
                println!(
                    "every {} job returned: cancelling the {} others",
                    k.name(),
                    open.len()
                );
                for &other in open.keys() {
                    engine.cancel(other);
                }
            }
        }
    }
    let wall = start.elapsed();
    let reserve_at_end = engine.budget().reserve();
    let critical_lanes = engine.critical_lanes();
    drop(engine);

    let load = fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "mix {}: wall {:.2} s{}, load average {}",
        args.mix.as_deref().unwrap_or_default(),
        wall.as_secs_f64(),
        if w.timing_only {
            " [TIMING-ONLY parameters: proofs not valid]"
        } else if cfg.engine.verify {
            ", every proof verified by filecoin-proofs"
        } else {
            ", NOT verified"
        },
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!(
        "mix critical reserve: {} ({:.2} GiB held back at the end), {} critical synthesis slot(s), {} critical lane(s)",
        match cfg.engine.critical_reserve {
            None => "learned".to_string(),
            Some(0) => "off".to_string(),
            Some(b) => format!("{:.2} GiB", b as f64 / (1u64 << 30) as f64),
        },
        reserve_at_end as f64 / (1u64 << 30) as f64,
        cfg.engine.critical_synth_slots,
        critical_lanes
    );
    println!(
        "{:>8} {:>5} {:>10} {:>10} {:>10}  (submission to verified proof)",
        "kind", "jobs", "min s", "mean s", "max s"
    );
    let mut rows = Vec::new();
    for (kind, n) in &cancelled {
        println!("{:>8} {n:>5} cancelled (--stop-after)", kind.name());
        rows.push(serde_json::json!({ "kind": kind.name(), "cancelled": n }));
    }
    for (kind, v) in &lat {
        let secs: Vec<f64> = v.iter().map(Duration::as_secs_f64).collect();
        let min = secs.iter().copied().fold(f64::INFINITY, f64::min);
        let max = secs.iter().copied().fold(0.0, f64::max);
        let mean = secs.iter().sum::<f64>() / secs.len() as f64;
        println!(
            "{:>8} {:>5} {min:>10.2} {mean:>10.2} {max:>10.2}",
            kind.name(),
            secs.len()
        );
        rows.push(serde_json::json!({
            "kind": kind.name(), "jobs": secs.len(), "latency_s": secs,
            "min_s": min, "mean_s": mean, "max_s": max,
        }));
    }
    let path = w.out.join(format!("mix-{stamp}.json"));
    let manifest = serde_json::json!({
        "mix": args.mix, "timing_only": w.timing_only, "c1": w.c1, "timeline": timeline,
        "submit_on_gpu": args.submit_on_gpu, "stop_after": args.stop_after,
        "engine": {
            "critical_reserve": cfg.engine.critical_reserve,
            "critical_synth_slots": cfg.engine.critical_synth_slots,
            "critical_lane": cfg.engine.critical_lane,
            "critical_lanes": critical_lanes,
            "critical_reserve_at_end": reserve_at_end,
        },
        "inputs": { "snap": args.snap_input, "window": args.window_input, "winning": args.winning_input },
        "config": &cfg.config, "plugins": plugins,
        "wall_s": wall.as_secs_f64(), "load_average": load.trim(),
        "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        "kinds": rows,
    });
    fs::write(&path, serde_json::to_vec_pretty(&manifest)?)
        .with_context(|| format!("writing {}", path.display()))?;
    println!("manifest: {}", path.display());
    println!("timeline: {}", timeline.display());
    Ok(())
}

/// Submits a request of one of the other kinds to `engine` (a mix drives the
/// engine itself, to measure it under several kinds at once).
fn submit(
    prover: &FilecoinProver,
    engine: &PipelineEngine,
    request: Request,
    priority: Priority,
) -> Result<cuzk_filecoin::KindJob> {
    Ok(match request {
        Request::Snap(r) => prover.submit_snap(engine, r, priority)?,
        Request::Window(r) => prover.submit_window_post(engine, r, priority)?,
        Request::Winning(r) => prover.submit_winning_post(engine, r, priority)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixes_parse_in_order_and_bad_ones_are_refused() {
        let m = parse_mix("porep:10, winning:1,snap").unwrap();
        assert_eq!(
            m,
            vec![(Kind::Porep, 10), (Kind::Winning, 1), (Kind::Snap, 1)]
        );
        assert!(parse_mix("porep:x").is_err());
        assert!(parse_mix("c2:1").is_err());
        assert!(parse_mix("").is_err());
    }
}
