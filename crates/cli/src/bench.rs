//! `cuzk bench` and `cuzk ab`: workloads through the pipelined engine, with a
//! manifest that says exactly what ran.

use std::{
    fs,
    io::Write,
    path::{Path, PathBuf},
    sync::Arc,
    time::{Instant, SystemTime, UNIX_EPOCH},
};

use anyhow::{bail, Context, Result};
use bellpepper_core::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::{Bls12, Scalar};
use clap::{Args, ValueEnum};
use cuzk::pipeline::{job, BellpersonVerifier, PartitionInput};
use cuzk::{Parameters, R1cs, Srs};
use cuzk_circuits::{AnyCircuit, Builtin, PorepLike};
use cuzk_scheduler::PipelineEngine;
use cuzk_timeline::{analyse, Analysis, Recorder};
use sha2::{Digest, Sha256};

use crate::{
    progress,
    prove::{blinding, default_cache_dir},
    runtime::{RunArgs, RunConfig},
    CircuitArgs,
};

/// The circuits a workload can be made of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum WorkloadCircuit {
    /// SHA-256 chain (boolean witness).
    Sha256,
    /// Multiplication chain (random witness).
    Mul,
    /// A synthetic partition with the R1CS shape of a 32 GiB PoRep partition.
    Porep,
}

#[derive(Args, Debug, Clone)]
pub struct WorkloadArgs {
    /// The circuit of every partition.
    #[arg(long, value_enum, default_value = "sha256")]
    pub circuit: WorkloadCircuit,
    /// Size as log2 of the constraint count, 10 to 24.
    #[arg(long = "log", default_value_t = 16, value_parser = clap::value_parser!(u32).range(10..=24))]
    pub log: u32,
    /// Jobs (proofs), all submitted at once.
    #[arg(long, default_value_t = 4)]
    pub jobs: usize,
    /// Partitions per job (PoRep: 10).
    #[arg(long, default_value_t = 2)]
    pub partitions: usize,
    /// Use random points of the right sizes instead of real parameters: fast to
    /// make at any size, but proofs do not verify (verification is switched off
    /// and results are labelled timing-only).
    #[arg(long)]
    pub timing_only: bool,
    /// A `.params` file for the circuit (instead of generated, cached ones).
    #[arg(long)]
    pub params: Option<PathBuf>,
    /// Cache folder for generated parameters.
    #[arg(long, default_value_os_t = default_cache_dir())]
    pub cache_dir: PathBuf,
    /// Where runs write their timeline, waterfall and manifest.
    #[arg(long, default_value = "cuzk-runs")]
    pub out: PathBuf,
    /// Filecoin PoRep C2 instead of a built-in circuit: every job is a sector of this
    /// C1 output or envelope (real, or shape-only from `cuzk c1 --shape-only`),
    /// proven through cuzk-filecoin (`--jobs` sectors; `--circuit`, `--log` and
    /// `--partitions` do not apply).
    #[arg(long)]
    pub c1: Option<PathBuf>,
    #[command(flatten)]
    pub filecoin: crate::filecoin::BenchC1Args,
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(flatten)]
    pub run: RunArgs,
    #[command(flatten)]
    pub workload: WorkloadArgs,
    #[command(flatten)]
    pub mix: crate::bench_mix::MixArgs,
    /// Print every TIMELINE line to stderr as it happens.
    #[arg(long)]
    pub timeline_stderr: bool,
}

#[derive(Args, Debug)]
pub struct AbArgs {
    /// Configuration A (`cuzk.toml`).
    pub a: PathBuf,
    /// Configuration B.
    pub b: PathBuf,
    /// Rounds; each runs A then B (A B A B ...).
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
    #[command(flatten)]
    pub workload: WorkloadArgs,
}

/// A built-in circuit of any kind, for partitions.
#[derive(Clone, Debug)]
enum WorkCircuit {
    Builtin(AnyCircuit),
    Porep(PorepLike),
}

impl Circuit<Scalar> for WorkCircuit {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        match self {
            WorkCircuit::Builtin(c) => c.synthesize(cs),
            WorkCircuit::Porep(c) => c.synthesize(cs),
        }
    }
}

impl WorkCircuit {
    fn new(kind: WorkloadCircuit, log: u32, seed: Option<u64>) -> Result<Self> {
        Ok(match kind {
            WorkloadCircuit::Sha256 => {
                WorkCircuit::Builtin(AnyCircuit::new(Builtin::Sha256Chain, log, seed)?)
            }
            WorkloadCircuit::Mul => {
                WorkCircuit::Builtin(AnyCircuit::new(Builtin::MulChain, log, seed)?)
            }
            WorkloadCircuit::Porep => WorkCircuit::Porep(PorepLike::new(log, seed)?),
        })
    }

    fn public_inputs(&self) -> Result<Vec<Scalar>> {
        Ok(match self {
            WorkCircuit::Builtin(c) => c.public_inputs()?,
            WorkCircuit::Porep(c) => c.public_inputs()?,
        })
    }

    fn name(kind: WorkloadCircuit) -> &'static str {
        match kind {
            WorkloadCircuit::Sha256 => "sha256",
            WorkloadCircuit::Mul => "mul",
            WorkloadCircuit::Porep => "porep",
        }
    }
}

/// What every run of a workload shares: the compiled shape and the parameters.
pub struct Prepared {
    r1cs: Arc<R1cs>,
    srs: Arc<Srs>,
    params: Option<Arc<Parameters<Bls12>>>,
    timing_only: bool,
    w: WorkloadArgs,
    /// Filecoin sectors (`--c1`) instead of built-in circuits.
    filecoin: Option<crate::filecoin::BenchC1>,
}

/// Compiles the workload's shape and gets its parameters (generated and cached,
/// read from `--params`, or timing-only).
pub fn prepare(w: &WorkloadArgs) -> Result<Prepared> {
    if let Some(c1) = &w.c1 {
        let fc = crate::filecoin::bench_prepare(c1, &w.filecoin, w.timing_only)?;
        return Ok(Prepared {
            r1cs: fc.r1cs.clone(),
            srs: fc.srs.clone(),
            params: None,
            timing_only: fc.timing_only,
            w: w.clone(),
            filecoin: Some(fc),
        });
    }
    let pb = progress::spinner(format!(
        "compiling the {} circuit at 2^{}",
        WorkCircuit::name(w.circuit),
        w.log
    ));
    let probe = WorkCircuit::new(w.circuit, w.log, Some(0))?;
    let compiled = cuzk_synth::compile(probe)?;
    let r1cs = Arc::new(compiled.r1cs);
    pb.finish_and_clear();

    let params = if w.timing_only {
        let shape = cuzk_service::synthetic::timing_shape(&r1cs);
        let pb = progress::spinner("making timing-only parameters (random points)");
        let p = cuzk_params::timing::timing_only_params(&shape, 7)?;
        pb.finish_and_clear();
        p.into_params()
    } else if let Some(path) = &w.params {
        cuzk_params::read_params(path, cuzk_params::Validation::None)?
    } else {
        match w.circuit {
            WorkloadCircuit::Porep => {
                fs::create_dir_all(&w.cache_dir)?;
                let path = w.cache_dir.join(format!("cuzk-porep-2^{}.params", w.log));
                let pb = progress::spinner(format!(
                    "parameters for porep at 2^{} (generated once, cached in {})",
                    w.log,
                    path.display()
                ));
                let p = cuzk_params::load_or_generate(&path, PorepLike::new(w.log, None)?, 0)?;
                pb.finish_and_clear();
                p
            }
            kind => {
                let builtin = if kind == WorkloadCircuit::Sha256 {
                    Builtin::Sha256Chain
                } else {
                    Builtin::MulChain
                };
                crate::prove::load_params(
                    None,
                    &w.cache_dir,
                    &CircuitArgs {
                        circuit: builtin,
                        log: w.log,
                    },
                )?
            }
        }
    };
    let srs = Arc::new(cuzk::srs_from_source(&&params, &r1cs)?);
    Ok(Prepared {
        r1cs,
        srs,
        params: Some(Arc::new(params)),
        timing_only: w.timing_only,
        w: w.clone(),
        filecoin: None,
    })
}

/// The figures of one run.
#[derive(Clone, Debug)]
pub struct RunResult {
    pub wall_s: f64,
    pub s_per_proof: f64,
    pub proofs_per_hour: f64,
    pub peak_rss_bytes: Option<u64>,
    pub analysis: Analysis,
    pub dir: PathBuf,
    pub verified: bool,
    /// Whether the backend evaluated `a, b, c` from the witness.
    pub abc_on_backend: bool,
    /// `--c1` runs: each sector's partitions and aggregation (empty otherwise).
    pub sectors: Vec<crate::filecoin::SectorTiming>,
}

fn peak_rss() -> Option<u64> {
    let s = fs::read_to_string("/proc/self/status").ok()?;
    let kb: u64 = s
        .lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(kb * 1024)
}

fn run_dir(out: &Path, label: &str) -> Result<PathBuf> {
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    let dir = out.join(format!("{t}-{label}"));
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

/// Runs the workload once with `cfg`, writing timeline, waterfall and manifest to
/// a new folder under `--out`.
pub fn run_once(
    prep: &Prepared,
    cfg: &RunConfig,
    label: &str,
    timeline_stderr: bool,
    show_progress: bool,
) -> Result<RunResult> {
    let w = &prep.w;
    let mut cfg = cfg.clone();
    if prep.timing_only {
        cfg.engine.verify = false;
    }
    let needs = cfg.config.backend_needs(Some(
        prep.r1cs
            .num_constraints()
            .next_power_of_two()
            .trailing_zeros(),
    ));
    // The planner's settings for the knobs the configuration left unset, on the
    // devices the backend found.
    let built = crate::plan::load_planned(&mut cfg, &needs, &plan_counts(prep))?;
    let cuzk_config::Built { policies, sources } = built;
    let dir = run_dir(&w.out, label)?;
    let timeline_path = dir.join("timeline.jsonl");
    let recorder = Arc::new(
        Recorder::new(Instant::now())
            .with_jsonl(&timeline_path)?
            .with_timeline_stderr(timeline_stderr),
    );
    let backend_caps = policies.backend.capabilities();
    let engine = PipelineEngine::start(cfg.engine.clone(), policies, recorder.clone())?;

    if let Some(fc) = &prep.filecoin {
        let run = crate::filecoin::bench_run(
            fc,
            &engine,
            cfg.engine.verify,
            w.jobs,
            show_progress,
            label,
        )?;
        let verified = run.sectors.iter().all(|s| s.verified);
        return finish_run(
            prep,
            &cfg,
            engine,
            recorder,
            (run.wall, run.sectors),
            verified,
            &dir,
            &sources,
            &backend_caps,
            &timeline_path,
        );
    }
    let verifier = prep
        .params
        .as_ref()
        .filter(|_| !prep.timing_only)
        .map(|p| Arc::new(BellpersonVerifier::new(&p.vk)));
    // Partition witnesses are built up front so the run measures proving only.
    let mut jobs = Vec::with_capacity(w.jobs);
    for j in 0..w.jobs {
        let mut parts = Vec::with_capacity(w.partitions);
        for p in 0..w.partitions {
            let seed = (j * 1000 + p + 1) as u64;
            let circuit = WorkCircuit::new(w.circuit, w.log, Some(seed))?;
            let public_inputs = if prep.timing_only {
                Vec::new()
            } else {
                circuit.public_inputs()?
            };
            let (r, s) = blinding(seed);
            parts.push(PartitionInput {
                circuit,
                r,
                s,
                public_inputs,
            });
        }
        jobs.push(job(
            prep.r1cs.clone(),
            prep.srs.clone(),
            parts,
            verifier.clone(),
        ));
    }

    let pb = show_progress.then(|| progress::bar(w.jobs as u64, format!("{label}: proofs")));
    let start = Instant::now();
    let handles: Vec<_> = jobs.into_iter().map(|j| engine.submit(j)).collect();
    let mut verified = true;
    for h in handles {
        let id = h.id();
        let out = h
            .wait()
            .with_context(|| format!("job {id} of the {label} run failed"))?;
        verified &= out.verified;
        if let Some(pb) = &pb {
            pb.inc(1);
        }
    }
    let wall = start.elapsed().as_secs_f64();
    if let Some(pb) = pb {
        pb.finish_and_clear();
    }
    finish_run(
        prep,
        &cfg,
        engine,
        recorder,
        (wall, Vec::new()),
        verified,
        &dir,
        &sources,
        &backend_caps,
        &timeline_path,
    )
}

/// After the jobs: the analysis, waterfall pictures and manifest of a run.
#[allow(clippy::too_many_arguments)]
fn finish_run(
    prep: &Prepared,
    cfg: &RunConfig,
    engine: PipelineEngine,
    recorder: Arc<Recorder>,
    (wall, sectors): (f64, Vec<crate::filecoin::SectorTiming>),
    verified: bool,
    dir: &Path,
    sources: &[cuzk_config::PolicySource],
    backend_caps: &cuzk_gpu_backend::Capabilities,
    timeline_path: &Path,
) -> Result<RunResult> {
    let w = &prep.w;
    let abc_on_backend = engine.abc_on_backend();
    drop(engine);
    recorder.flush()?;
    let events = recorder.events();
    let analysis = analyse(&events);
    fs::write(
        dir.join("waterfall.svg"),
        cuzk_timeline::render_svg(&events),
    )?;
    fs::write(
        dir.join("waterfall.html"),
        cuzk_timeline::render_html(&events),
    )?;
    let s_per_proof = wall / w.jobs.max(1) as f64;
    let result = RunResult {
        wall_s: wall,
        s_per_proof,
        proofs_per_hour: 3600.0 / s_per_proof,
        peak_rss_bytes: peak_rss(),
        analysis,
        dir: dir.to_path_buf(),
        verified: verified && !prep.timing_only && cfg.engine.verify,
        abc_on_backend,
        sectors,
    };
    write_manifest(
        dir,
        prep,
        cfg,
        sources,
        backend_caps,
        &result,
        timeline_path,
    )?;
    Ok(result)
}

fn file_sha256(path: &Path) -> Option<String> {
    let bytes = fs::read(path).ok()?;
    Some(hex::encode(Sha256::digest(&bytes)))
}

fn git_revision() -> String {
    std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown (not run from a git checkout)".into())
}

/// The revision this binary was built from (see build.rs).
const BUILD_REVISION: &str = env!("CUZK_BUILD_REVISION");

fn cpu_model() -> String {
    fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

pub(crate) fn mem_total() -> Option<u64> {
    let s = fs::read_to_string("/proc/meminfo").ok()?;
    let kb: u64 = s
        .lines()
        .find(|l| l.starts_with("MemTotal:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// The manifest's record of each slot's strategy: its plugin (file, digest), the
/// parameters given, and every parameter the plugin declares with the value the run
/// used (the given one, else the plugin's default).
pub(crate) fn plugins_json(sources: &[cuzk_config::PolicySource]) -> Vec<serde_json::Value> {
    sources
        .iter()
        .map(|s| {
            serde_json::json!({
                "slot": s.slot,
                "plugin": s.name,
                "in_process": s.in_process,
                "path": s.path.as_ref().map(|p| p.display().to_string()),
                "sha256": s.path.as_ref().and_then(|p| file_sha256(p)),
                "params": s.params,
                "params_resolved": s.path.as_ref().and_then(|p| resolved_params(p, &s.params)),
            })
        })
        .collect()
}

/// A plugin's declared parameters with the given values over its defaults; `None`
/// where the library cannot be read (the manifest still names it and its digest).
fn resolved_params(
    path: &Path,
    given: &std::collections::BTreeMap<String, String>,
) -> Option<std::collections::BTreeMap<String, String>> {
    let declared = cuzk_plugin_host::declared_params(path).ok()?;
    Some(
        declared
            .into_iter()
            .map(|d| {
                let value = given.get(&d.name).cloned().unwrap_or(d.default);
                (d.name, value)
            })
            .collect(),
    )
}

#[allow(clippy::too_many_arguments)]
fn write_manifest(
    dir: &Path,
    prep: &Prepared,
    cfg: &RunConfig,
    sources: &[cuzk_config::PolicySource],
    caps: &cuzk_gpu_backend::Capabilities,
    r: &RunResult,
    timeline: &Path,
) -> Result<()> {
    let w = &prep.w;
    let plugins = plugins_json(sources);
    let e = &cfg.engine;
    let manifest = serde_json::json!({
        "git_revision": git_revision(),
        "build_revision": BUILD_REVISION,
        "cuzk_version": env!("CARGO_PKG_VERSION"),
        "config_file": cfg.source.as_ref().map(|p| p.display().to_string()),
        // The whole cuzk.toml with the flags applied: every knob of the run.
        "config": &cfg.config,
        "engine": {
            "synth_jobs": e.synth_jobs, "synth_threads": e.synth_threads,
            "gpu_workers_per_device": e.gpu_workers_per_device, "gpu_threads": e.gpu_threads,
            "memory_budget": e.memory_budget, "verify": e.verify,
            "check_witness": e.check_witness, "b_g2_on_backend": e.b_g2_on_backend,
            "critical_reserve": e.critical_reserve, "critical_synth_slots": e.critical_synth_slots,
            "critical_lane": e.critical_lane,
            "b_g2_on_backend_resolved": cuzk_scheduler::b_g2_on_backend(e.b_g2_on_backend, caps),
            "abc_on_backend": e.abc_on_backend, "abc_on_backend_resolved": r.abc_on_backend,
        },
        "plugins": plugins,
        "workload": {
            "circuit": prep.filecoin.as_ref().map(|f| f.label()).unwrap_or_else(|| WorkCircuit::name(w.circuit).to_string()),
            "log_constraints": prep.r1cs.num_constraints().next_power_of_two().trailing_zeros(),
            "constraints": prep.r1cs.num_constraints(), "jobs": w.jobs,
            "partitions": prep.filecoin.as_ref().map(|f| f.partitions).unwrap_or(w.partitions),
            "c1": w.c1.as_ref().map(|p| p.display().to_string()),
            "points_dir": w.filecoin.params.points_dir.as_ref().map(|p| p.display().to_string()),
            "parameters": if prep.timing_only { cuzk_params::timing::TIMING_ONLY_LABEL } else { "real (proofs verify)" },
        },
        "machine": {
            "cpu": cpu_model(),
            "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            "ram_bytes": mem_total(),
            "backend": caps.name,
            "gpus": caps.devices.iter().map(|d| serde_json::json!({"name": d.name, "total_memory": d.total_memory})).collect::<Vec<_>>(),
        },
        "results": {
            "wall_s": r.wall_s, "s_per_proof": r.s_per_proof,
            "proofs_per_hour": r.proofs_per_hour, "peak_rss_bytes": r.peak_rss_bytes,
            "gpu_busy_pct": r.analysis.gpu_busy.iter().map(|d| d.busy_pct).collect::<Vec<_>>(),
            "gpu_idle_ready_ms": r.analysis.gpu_busy.iter().map(|d| d.idle_ready_ms).collect::<Vec<_>>(),
            "gpu_starved_ms": r.analysis.gpu_busy.iter().map(|d| d.starved_ms).collect::<Vec<_>>(),
            "verified": r.verified,
            // `--c1`: per sector, the engine's time for its partitions and (NI-PoRep)
            // the SnarkPack aggregation's, which overlaps the next sector's partitions.
            "sectors": &r.sectors,
            "aggregation": aggregation_summary(&r.sectors),
        },
        "timeline": timeline.display().to_string(),
        // What the planner makes of this run's shape on this machine: which knobs
        // the configuration gave, which the run took from the plan (applied), and
        // which the plan has but the run left to the engine's own defaults.
        "plan": plan_json(prep, cfg, caps),
    });
    let mut f = fs::File::create(dir.join("manifest.json"))?;
    f.write_all(serde_json::to_string_pretty(&manifest)?.as_bytes())?;
    Ok(())
}

/// The counts the planner reads of the run's shape.
fn plan_counts(prep: &Prepared) -> cuzk_plan::Counts {
    let partitions = prep
        .filecoin
        .as_ref()
        .map_or(prep.w.partitions, |f| f.partitions);
    crate::plan::counts_of(&prep.r1cs, &prep.srs, partitions)
}

/// The manifest's `plan`: [`crate::plan::manifest_plan`] for the run's shape.
fn plan_json(
    prep: &Prepared,
    cfg: &RunConfig,
    caps: &cuzk_gpu_backend::Capabilities,
) -> serde_json::Value {
    crate::plan::manifest_plan(cfg, &plan_counts(prep), &caps.devices)
}

/// The aggregation's share of a non-interactive PoRep stream: the mean aggregate
/// against the mean engine time per sector (`None` when nothing was aggregated).
fn aggregation_summary(sectors: &[crate::filecoin::SectorTiming]) -> Option<serde_json::Value> {
    let aggregates: Vec<f64> = sectors.iter().filter_map(|s| s.aggregate_s).collect();
    if aggregates.is_empty() {
        return None;
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let partitions: Vec<f64> = sectors.iter().map(|s| s.partitions_s).collect();
    let (aggregate, engine) = (mean(&aggregates), mean(&partitions));
    // The last sector's aggregation is the only one the engine does not hide.
    let tail = sectors.iter().map(|s| s.done_s).fold(0.0, f64::max)
        - sectors.iter().map(|s| s.proofs_s).fold(0.0, f64::max);
    Some(serde_json::json!({
        "aggregate_mean_s": aggregate,
        "aggregate_min_s": aggregates.iter().copied().fold(f64::INFINITY, f64::min),
        "aggregate_max_s": aggregates.iter().copied().fold(0.0, f64::max),
        "partitions_mean_s": engine,
        "aggregate_over_partitions": aggregate / engine,
        "tail_after_last_partition_s": tail,
        "timing_only_srs": sectors.iter().any(|s| s.timing_only_aggregate),
    }))
}

fn gib(b: u64) -> String {
    format!("{:.2} GiB", b as f64 / (1u64 << 30) as f64)
}

fn print_result(label: &str, prep: &Prepared, r: &RunResult) {
    let w = &prep.w;
    let (what, partitions, log) = match &prep.filecoin {
        Some(f) => (
            f.label(),
            f.partitions,
            prep.r1cs
                .num_constraints()
                .next_power_of_two()
                .trailing_zeros(),
        ),
        None => (
            WorkCircuit::name(w.circuit).to_string(),
            w.partitions,
            w.log,
        ),
    };
    println!(
        "{label}: {} jobs x {} partitions of {} at 2^{}{}",
        w.jobs,
        partitions,
        what,
        log,
        if prep.timing_only {
            format!(" [{}]", cuzk_params::timing::TIMING_ONLY_LABEL)
        } else {
            String::new()
        }
    );
    println!(
        "  {:.3} s/proof, {:.1} proofs/hour, wall {:.2} s, peak RSS {}, proofs {}",
        r.s_per_proof,
        r.proofs_per_hour,
        r.wall_s,
        r.peak_rss_bytes.map(gib).unwrap_or_else(|| "?".into()),
        if r.verified {
            "verified"
        } else {
            "NOT verified"
        }
    );
    println!(
        "  a, b, c evaluated {}",
        if r.abc_on_backend {
            "by the backend from the witness (no spmv stage)"
        } else {
            "by the engine's spmv stage"
        }
    );
    for d in &r.analysis.gpu_busy {
        let span = r.analysis.span_ms;
        println!(
            "  GPU {} busy {:.1}% (idle {:.1}% with work ready, {:.1}% starved)",
            d.device
                .map(|d| d.to_string())
                .unwrap_or_else(|| "-".into()),
            d.busy_pct,
            cuzk_timeline::DeviceBusy::pct(d.idle_ready_ms, span),
            cuzk_timeline::DeviceBusy::pct(d.starved_ms, span),
        );
    }
    for s in &r.sectors {
        println!(
            "  sector {}: partitions {:.2} s (last proof at {:.2} s){}, output {} bytes at {:.2} s{}",
            s.index,
            s.partitions_s,
            s.proofs_s,
            s.aggregate_s
                .map(|a| format!(", aggregate {a:.2} s"))
                .unwrap_or_default(),
            s.proof_bytes,
            s.done_s,
            if s.timing_only_aggregate {
                " (timing-only SRS: does not verify)"
            } else {
                ""
            }
        );
    }
    if let Some(a) = aggregation_summary(&r.sectors) {
        println!(
            "  aggregation: {:.2} s a sector against {:.2} s of partitions ({:.1}%), hidden behind the next sector's partitions but for the last ({:.2} s tail)",
            a["aggregate_mean_s"].as_f64().unwrap_or(f64::NAN),
            a["partitions_mean_s"].as_f64().unwrap_or(f64::NAN),
            100.0 * a["aggregate_over_partitions"].as_f64().unwrap_or(f64::NAN),
            a["tail_after_last_partition_s"].as_f64().unwrap_or(f64::NAN),
        );
    }
    print!("{}", r.analysis);
    println!("  timeline, waterfall and manifest: {}", r.dir.display());
}

pub fn bench(args: BenchArgs) -> Result<()> {
    let cfg = args.run.resolve()?;
    if args.mix.mix.is_some() {
        return crate::bench_mix::run(&args.mix, &args.workload, &cfg);
    }
    let prep = prepare(&args.workload)?;
    let r = run_once(&prep, &cfg, "bench", args.timeline_stderr, true)?;
    print_result("bench", &prep, &r);
    Ok(())
}

/// Median and 95% confidence interval of ratios (t-interval on their logs, so
/// A/B and B/A are symmetric).
pub fn ratio_stats(ratios: &[f64]) -> (f64, f64, f64) {
    let mut v = ratios.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    if n < 2 {
        return (median, f64::NAN, f64::NAN);
    }
    let logs: Vec<f64> = v.iter().map(|r| r.ln()).collect();
    let mean = logs.iter().sum::<f64>() / n as f64;
    let var = logs.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let half = t975(n - 1) * (var / n as f64).sqrt();
    (median, (mean - half).exp(), (mean + half).exp())
}

/// The 97.5% quantile of Student's t with `df` degrees of freedom.
fn t975(df: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    if df == 0 {
        f64::INFINITY
    } else if df <= 30 {
        T[df - 1]
    } else {
        1.96
    }
}

pub fn ab(args: AbArgs) -> Result<()> {
    if args.rounds < 2 {
        bail!("an A/B comparison needs at least 2 rounds for a confidence interval");
    }
    let mk = |path: &Path| {
        RunArgs {
            config: Some(path.to_path_buf()),
            ..RunArgs::default()
        }
        .resolve()
    };
    let (cfg_a, cfg_b) = (mk(&args.a)?, mk(&args.b)?);
    let prep = prepare(&args.workload)?;
    let pb = progress::bar(2 * args.rounds as u64, "A/B runs");
    let mut ratios = Vec::new();
    let mut rows = Vec::new();
    for round in 0..args.rounds {
        let a = run_once(&prep, &cfg_a, &format!("r{round}-A"), false, false)?;
        pb.inc(1);
        let b = run_once(&prep, &cfg_b, &format!("r{round}-B"), false, false)?;
        pb.inc(1);
        ratios.push(b.s_per_proof / a.s_per_proof);
        rows.push((round, a.s_per_proof, b.s_per_proof));
    }
    pb.finish_and_clear();
    println!("A = {}\nB = {}", args.a.display(), args.b.display());
    println!(
        "{:>6} {:>12} {:>12} {:>8}",
        "round", "A s/proof", "B s/proof", "B/A"
    );
    for ((round, a, b), r) in rows.iter().zip(&ratios) {
        println!("{round:>6} {a:>12.4} {b:>12.4} {r:>8.4}");
    }
    let (median, lo, hi) = ratio_stats(&ratios);
    println!(
        "B/A median {median:.4}, 95% CI [{lo:.4}, {hi:.4}] over {} rounds",
        ratios.len()
    );
    if lo > 1.0 {
        println!("=> B is slower than A: the difference is distinguishable from noise.");
    } else if hi < 1.0 {
        println!("=> B is faster than A: the difference is distinguishable from noise.");
    } else {
        println!("=> no difference distinguishable from noise at this many rounds.");
    }
    println!("runs under {}", args.workload.out.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratio_ci_contains_the_truth_and_excludes_one_when_clear() {
        let (m, lo, hi) = ratio_stats(&[1.10, 1.12, 1.09, 1.11, 1.10]);
        assert!((m - 1.10).abs() < 1e-9);
        assert!(lo > 1.0 && hi < 1.2 && lo < m && m < hi);
        let (_, lo, hi) = ratio_stats(&[0.9, 1.1, 1.0, 0.95, 1.05]);
        assert!(lo < 1.0 && hi > 1.0);
    }
}
