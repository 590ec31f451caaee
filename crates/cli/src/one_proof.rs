//! `cuzk c2`, `cuzk snap` and `cuzk post window|winning` prove one request the
//! way `cuzk serve` and `cuzk worker` prove theirs: the request is the service's
//! typed one (`ProofKind`, `ProofRequest`), checked by the service's own check
//! (`cuzk_service::check_request`, through `queue_runner::check_request`), then
//! proved by a `cuzk_service::Service` over the kinds they register
//! (`serve::service_kinds`), started by the function they start theirs with
//! (`serve::start_service`). A command line adds only what a person at a
//! terminal wants: the circuit compiled and its parameters loaded before the
//! service starts (timed, and so that the planner sees the one shape this
//! process proves), a line per partition proven, each run's line and stage
//! table, and the proof file.

use std::{
    fs,
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::{bail, Context, Result};
use cuzk_filecoin::{
    service_kind,
    service_kinds::{post_circuit_id, update_circuit_id},
    CircuitKind, FilecoinProver, LoadedParams, PorepKind, PostKind, UpdateKind, ALL_POST,
    ALL_UPDATE,
};
use cuzk_service::{JobResult, JobStatus, ProofKind, ProofRequest, ServiceConfig, ShutdownMode};
use cuzk_timeline::{Event, EventKind, Subscriber};

use crate::{
    progress,
    runtime::{RunArgs, RunConfig},
    serve::{service_kinds, start_service, KindsSetup, Planning, ServiceKinds, Started},
    table,
};

/// The Filecoin circuit a request is proved with, as the command line compiles
/// it and loads its parameters before the service starts.
pub enum Circuit {
    Porep(PorepKind),
    Update(UpdateKind),
    Post(PostKind),
}

impl Circuit {
    /// The PoRep circuit of a checked request: the circuit id the service's
    /// check named (`porep-2k`, ..., or a registered proof's name).
    pub fn porep(circuit_id: &str) -> Result<Circuit> {
        let proof = service_kind::registered_proof(circuit_id)
            .with_context(|| format!("`{circuit_id}` is not a PoRep circuit id"))?;
        Ok(Circuit::Porep(PorepKind::new(proof)?))
    }

    /// The circuit of a SnapDeals or PoSt request: its registered proof, as
    /// Filecoin's Go enum numbers it.
    pub fn of_request(kind: ProofKind, request: &ProofRequest) -> Result<Circuit> {
        let n = usize::try_from(request.registered_proof).unwrap_or(usize::MAX);
        let none = || format!("{kind}: no registered proof {}", request.registered_proof);
        Ok(match kind {
            ProofKind::SnapDealsUpdate => {
                Circuit::Update(UpdateKind::new(*ALL_UPDATE.get(n).with_context(none)?)?)
            }
            ProofKind::WindowPostPartition | ProofKind::WinningPost => {
                Circuit::Post(PostKind::new(*ALL_POST.get(n).with_context(none)?)?)
            }
            ProofKind::PorepSealCommit
            | ProofKind::NiPorepSealCommit
            | ProofKind::SealAggregate
            | ProofKind::Synthetic => {
                bail!("{kind} requests name their circuit inside the request")
            }
        })
    }

    /// Its circuit id: the name of its parameter set in the service.
    pub fn id(&self) -> String {
        match self {
            Circuit::Porep(k) => service_kind::circuit_id(k.registered),
            Circuit::Update(k) => update_circuit_id(k.registered),
            Circuit::Post(k) => post_circuit_id(k.registered),
        }
    }

    fn name(&self) -> &str {
        match self {
            Circuit::Porep(k) => &k.name,
            Circuit::Update(k) => &k.name,
            Circuit::Post(k) => &k.name,
        }
    }

    /// Partitions of one proof.
    fn partitions(&self) -> usize {
        match self {
            Circuit::Porep(k) => k.partitions(),
            Circuit::Update(k) => k.partitions(),
            Circuit::Post(_) => 1,
        }
    }

    /// Compiles the circuit and loads its parameters on `prover`
    /// ([`compile_and_load`]); the planner's counts of the shape.
    fn ready(&self, prover: &FilecoinProver) -> Result<cuzk_plan::Counts> {
        let n = self.partitions();
        let (r1cs, params) = match self {
            Circuit::Porep(k) => compile_and_load(prover, k, n)?,
            Circuit::Update(k) => compile_and_load(prover, k, n)?,
            Circuit::Post(k) => compile_and_load(prover, k, n)?,
        };
        Ok(crate::plan::counts_of(&r1cs, &params.srs, n))
    }
}

/// Compiles `k`'s circuit and loads its parameters (or, on a timing-only prover,
/// makes them) on `prover`, printing what each cost: what a proving command and
/// `cuzk bench --c1` do before anything is proved.
pub fn compile_and_load<K: CircuitKind>(
    prover: &FilecoinProver,
    k: &K,
    partitions: usize,
) -> Result<(Arc<cuzk::R1cs>, Arc<LoadedParams>)> {
    const GIB: f64 = (1u64 << 30) as f64;
    let pb = progress::spinner(format!("compiling the {} circuit", k.name()));
    let t = Instant::now();
    let r1cs = prover.r1cs(k)?;
    pb.finish_and_clear();
    println!(
        "{}: {} constraints per partition, {partitions} partitions; R1CS compiled once in {:.2} s ({:.2} GiB)",
        k.name(),
        r1cs.num_constraints(),
        t.elapsed().as_secs_f64(),
        r1cs.heap_size() as f64 / GIB
    );
    let pb = progress::spinner(if prover.is_timing_only() {
        "making timing-only parameters (random points)".to_string()
    } else {
        format!("loading {}", k.params_file())
    });
    let params = prover.params(k)?;
    pb.finish_and_clear();
    println!(
        "parameters {} ready in {:.2} s ({:.2} GiB of points)",
        params.path.display(),
        params.load_time.as_secs_f64(),
        params.bytes as f64 / GIB
    );
    Ok((r1cs, params))
}

/// A run configuration for proving through the service: the file with the flags
/// over it. `--no-verify` is refused: the service verifies every proof made with
/// real parameters (`--timing-only` is the way to time without them).
pub fn run_config(args: &RunArgs) -> Result<RunConfig> {
    if args.no_verify {
        bail!("the proving service verifies every proof made with real parameters (drop --no-verify; --timing-only times a proof without them)");
    }
    args.resolve()
}

/// How a command proves its request.
pub struct Setup<'a> {
    /// Who asks, for warnings (`cuzk c2`).
    pub who: &'a str,
    /// Filecoin's parameter directory.
    pub param_dir: &'a Path,
    /// Check each parameter file against Filecoin's parameters.json digest.
    pub check_digest: bool,
    /// Parameters memory-mapped from points files here (`--points-dir`).
    pub points_dir: Option<&'a Path>,
    /// Print every TIMELINE line to stderr as it happens.
    pub timeline_stderr: bool,
    pub run: RunConfig,
}

impl Setup<'_> {
    /// The kinds `cuzk serve` and `cuzk worker` register, without the synthetic
    /// one; `timing_only` names the circuit proved with timing-only parameters
    /// (`--timing-only`), as a benchmark daemon's `timing_only_circuits` does.
    pub fn kinds(&self, timing_only: Option<String>) -> Result<ServiceKinds> {
        let timing_only: Vec<String> = timing_only.into_iter().collect();
        service_kinds(&KindsSetup {
            who: self.who,
            param_cache_key: "--param-cache",
            param_cache: self.param_dir,
            timing_only_circuits: &timing_only,
            synthetic: None,
            check_digest: self.check_digest,
            points_dir: self.points_dir,
        })
    }

    /// Compiles `circuit` and loads its parameters on the prover the service will
    /// use, then starts the service for it (planned for its shape).
    pub fn start(mut self, kinds: ServiceKinds, circuit: &Circuit) -> Result<OneService> {
        let counts = circuit.ready(kinds.filecoin.for_circuit(&circuit.id()))?;
        let watch = Arc::new(Watch {
            partitions: circuit.partitions(),
            timeline_stderr: self.timeline_stderr,
        });
        let started = start_service(
            &mut self.run,
            ServiceConfig {
                max_running_jobs: 1,
                ..ServiceConfig::default()
            },
            kinds.kinds,
            Planning::Shape(&counts),
            vec![watch],
        )?;
        Ok(OneService {
            started,
            name: circuit.name().to_string(),
        })
    }
}

/// Prints a line per partition proven and, with `--timeline-stderr`, every
/// TIMELINE line, from the service's engine's events as they are recorded.
struct Watch {
    partitions: usize,
    timeline_stderr: bool,
}

impl Subscriber for Watch {
    fn event(&self, e: &Event) {
        if self.timeline_stderr {
            eprintln!("{}", e.timeline_line());
        }
        if e.event == EventKind::AssemblyEnd {
            println!(
                "partition {}/{} proven at {:.2} s",
                e.partition + 1,
                self.partitions,
                e.ms / 1e3
            );
        }
    }
}

/// The service a command proves its request on.
pub struct OneService {
    started: Started,
    name: String,
}

impl OneService {
    /// Proves `request` and waits for it: a completed job's result and how long
    /// it took, or the service's error.
    pub fn prove(&self, kind: ProofKind, request: ProofRequest) -> Result<(JobResult, Duration)> {
        let service = &self.started.service;
        let t = Instant::now();
        let submitted = service.submit(kind, request)?;
        let result = service
            .wait_blocking(&submitted.job_id, None)?
            .context("internal: a wait without a timeout timed out")?;
        let took = t.elapsed();
        match result.status {
            JobStatus::Completed => Ok((result, took)),
            JobStatus::Failed => bail!("the {kind} proof failed: {}", result.error),
            JobStatus::Cancelled => bail!("the {kind} proof was cancelled: {}", result.error),
        }
    }

    /// Proves `request` `repeat` times, one after the other, with a line and a
    /// stage table for each (`verifier` says who checked a proof); with
    /// `settle`, lets the backend settle after the first, so later runs are warm
    /// ones. Returns the last run.
    pub fn prove_runs(
        &self,
        kind: ProofKind,
        request: &ProofRequest,
        repeat: u32,
        settle: bool,
        verifier: &str,
    ) -> Result<(JobResult, Duration)> {
        let priority = request.priority.unwrap_or(kind.default_priority());
        let mut last = None;
        for run in 1..=repeat {
            let (result, took) = self.prove(kind, request.clone())?;
            let of = if repeat > 1 {
                format!(" (run {run} of {repeat})")
            } else {
                String::new()
            };
            println!(
                "{}: job {} ({priority}), {} bytes in {:.2} s{}{of}",
                self.name,
                result.job_id,
                result.proof.len(),
                took.as_secs_f64(),
                if result.timing_only {
                    " (TIMING-ONLY parameters: NOT a valid proof)".to_string()
                } else {
                    format!(", verified by {verifier}")
                },
            );
            print!("{}", table::timings_table(&result.timings));
            if run == 1 && settle {
                self.settle();
            }
            last = Some((result, took));
        }
        last.context("no run: --repeat must be at least 1")
    }

    /// Waits for what the backend prepares in the background after a first proof
    /// (the CPU backend's fixed-base tables), so later runs are warm ones and
    /// nothing of ours runs beside a peer; says how long that took.
    pub fn settle(&self) {
        let t = Instant::now();
        self.started.backend.settle();
        let took = t.elapsed().as_secs_f64();
        if took >= 0.1 {
            println!("backend settled in {took:.2} s (fixed-base tables made after the first run)");
        }
    }

    /// Stops the service (nothing is left running: every proof was awaited).
    pub fn shutdown(self) {
        self.started
            .service
            .shutdown(ShutdownMode::Cancel, Duration::from_secs(10));
    }
}

/// Writes a proof to `out`, if given.
pub fn write_proof(out: Option<&PathBuf>, proof: &[u8]) -> Result<()> {
    if let Some(path) = out {
        fs::write(path, proof).with_context(|| format!("writing {}", path.display()))?;
        println!("proof: {}", path.display());
    }
    Ok(())
}
