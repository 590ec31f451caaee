//! `cuzk worker --queue postgres://…`: claims proof jobs from a PostgreSQL queue
//! and proves them on the same engine `cuzk bench` would run (the same
//! `cuzk.toml`, backend and plugins), until SIGTERM or SIGINT (then it claims
//! nothing more, finishes or releases the jobs it holds as `[queue] on_stop`
//! says, and exits 0) or, with `--drain`, until the queue is empty.
//!
//! A worker runs for months, so it keeps nothing per job once the job is written
//! back: its TIMELINE recorder keeps no events (the engine's per-job state is
//! dropped when a job ends), and each job's log line says how much is held.

use std::{
    path::PathBuf,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::Instant,
};

use anyhow::{bail, Result};
use clap::Args;
use cuzk_config::QueueSection;
use cuzk_queue::{Completion, JobRunner, OnStop, QueueConfig, Worker, WorkerEvent, WorkerOptions};
use cuzk_scheduler::{PipelineEngine, Priority};
use cuzk_timeline::Recorder;

use crate::{
    porep_job::PorepRunner,
    prove::default_cache_dir,
    runtime::{load_policies, RunArgs},
    synthetic_job::SyntheticRunner,
};

/// Flags of the queue's knobs; each overrides the same key of `[queue]`.
#[derive(Args, Debug, Clone, Default)]
pub struct QueueArgs {
    /// Lease of a claimed job, in seconds (renewed at a third of it).
    #[arg(long)]
    pub lease_secs: Option<f64>,
    /// How long an idle worker waits before looking again, in ms.
    #[arg(long)]
    pub poll_ms: Option<u64>,
    /// Jobs this worker holds at once.
    #[arg(long)]
    pub jobs_in_flight: Option<usize>,
    /// Attempts a submitted job gets before it is marked failed.
    #[arg(long)]
    pub max_attempts: Option<u32>,
    /// On SIGTERM/SIGINT: `finish` the jobs held and write them back, or
    /// `release` them to the queue for another worker.
    #[arg(long)]
    pub on_stop: Option<String>,
}

impl QueueArgs {
    /// Sets these flags over `section` (the `[queue]` table), then the unset
    /// knobs take their defaults.
    pub fn resolve(&self, section: &mut QueueSection) -> Result<QueueConfig> {
        let s = section;
        s.lease_secs = self.lease_secs.or(s.lease_secs);
        s.poll_ms = self.poll_ms.or(s.poll_ms);
        s.jobs_in_flight = self.jobs_in_flight.or(s.jobs_in_flight);
        s.max_attempts = self.max_attempts.or(s.max_attempts);
        s.on_stop = self.on_stop.clone().or(s.on_stop.take());
        let d = QueueConfig::default();
        let q = QueueConfig {
            lease_secs: s.lease_secs.unwrap_or(d.lease_secs),
            poll_ms: s.poll_ms.unwrap_or(d.poll_ms),
            jobs_in_flight: s.jobs_in_flight.unwrap_or(d.jobs_in_flight),
            max_attempts: s.max_attempts.unwrap_or(d.max_attempts),
            on_stop: match &s.on_stop {
                Some(name) => OnStop::parse(name).map_err(anyhow::Error::msg)?,
                None => d.on_stop,
            },
        };
        q.check().map_err(anyhow::Error::msg)?;
        Ok(q)
    }
}

#[derive(Args, Debug)]
pub struct WorkerArgs {
    /// The queue: a PostgreSQL URL (`postgres://user@host:port/db`). The schema
    /// is created (or brought up to date) on first connection.
    #[arg(long)]
    pub queue: String,
    #[command(flatten)]
    pub run: RunArgs,
    #[command(flatten)]
    pub knobs: QueueArgs,
    /// This worker's name in the queue (default: host:pid).
    #[arg(long)]
    pub id: Option<String>,
    /// Exit once nothing is left to claim (for benchmarks and scripts).
    #[arg(long)]
    pub drain: bool,
    /// Cache folder for synthetic jobs' generated parameters.
    #[arg(long, default_value_os_t = default_cache_dir())]
    pub cache_dir: PathBuf,
}

/// The engine's priority of a queue priority (the queue stores the engine's
/// levels as numbers: low -1, normal 0, high 1, critical 2).
pub fn engine_priority(queue: i32) -> Priority {
    match queue {
        i32::MIN..=-1 => Priority::Low,
        0 => Priority::Normal,
        1 => Priority::High,
        _ => Priority::Critical,
    }
}

/// A priority's name (`low`, `normal`, `high`, `critical`) as the number the
/// queue stores.
pub fn parse_priority(name: &str) -> Result<i32, String> {
    match name {
        "low" => Ok(-1),
        "normal" => Ok(0),
        "high" => Ok(1),
        "critical" => Ok(2),
        _ => Err(format!(
            "unknown priority `{name}`: low, normal, high or critical"
        )),
    }
}

/// This host's name, for worker ids.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

pub fn worker(args: WorkerArgs) -> Result<()> {
    if args.run.no_verify {
        bail!("a worker always verifies: the queue stores only verified proofs (drop --no-verify)");
    }
    let mut run = args.run.resolve()?;
    let config = args
        .knobs
        .resolve(run.config.queue.get_or_insert_with(Default::default))?;
    run.engine.verify = true;
    let needs = run.config.backend_needs(None);
    let cuzk_config::Built { policies, sources } = load_policies(&run, &needs)?;
    // No events kept in memory: nothing reads them back, and a worker's life is
    // unbounded (the engine still emits them to `tracing`).
    let recorder = Arc::new(Recorder::new(Instant::now()).with_retention(false));
    let engine = Arc::new(PipelineEngine::start(
        run.engine.clone(),
        policies,
        recorder.clone(),
    )?);
    // Filecoin's parameters are where filecoin-proofs' own verifier looks for its
    // keys (FIL_PROOFS_PARAMETER_CACHE); every proof is verified before it is
    // written to the queue.
    let prover = cuzk_filecoin::ProverConfig {
        verify: true,
        ..Default::default()
    };
    let runners: Vec<Arc<dyn JobRunner>> = vec![
        Arc::new(SyntheticRunner::new(engine.clone(), args.cache_dir.clone())),
        Arc::new(PorepRunner::new(
            engine.clone(),
            cuzk_filecoin::FilecoinProver::new(prover),
        )),
    ];
    let kinds: Vec<&str> = runners.iter().map(|r| r.kind()).collect();
    let id = args
        .id
        .clone()
        .unwrap_or_else(|| format!("{}:{}", hostname(), std::process::id()));
    eprintln!(
        "worker {id}: kinds {}, lease {}s, {} job(s) in flight, on stop {}, {}",
        kinds.join(","),
        config.lease_secs,
        config.jobs_in_flight,
        config.on_stop.name(),
        sources
            .iter()
            .map(|s| format!("{}={}", s.slot, s.name))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let who = id.clone();
    let name = id.clone();
    let held = Held {
        recorder,
        engine: engine.clone(),
    };
    let worker = Worker::new(
        &args.queue,
        WorkerOptions {
            id,
            config,
            drain: args.drain,
        },
        runners,
        move |e| log_event(&who, e, &held),
    )?;
    let stop = Arc::new(AtomicBool::new(false));
    stop_on_signal(stop.clone())?;
    let start = Instant::now();
    let stats = worker.run(&stop);
    let jobs = (stats.done + stats.failed + stats.late).max(1) as f64;
    eprintln!(
        "worker {name}: {} done, {} failed attempts, {} late writes discarded, {} released; \
         {:.3} s: proving {:.3} s, queue statements {:.3} s ({:.2} ms per job)",
        stats.done,
        stats.failed,
        stats.late,
        stats.released,
        start.elapsed().as_secs_f64(),
        stats.run_seconds,
        stats.queue_seconds,
        stats.queue_seconds * 1e3 / jobs
    );
    Ok(())
}

/// Sets `stop` on the first SIGTERM or SIGINT; a second one exits at once
/// (status 1), leaving held jobs to their leases as a kill would. A thread of
/// its own waits for them (the worker's threads are not async).
fn stop_on_signal(stop: Arc<AtomicBool>) -> Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    // Installed here, before the worker claims anything, so a signal never finds
    // the default action (death) in place.
    let (mut term, mut int) = runtime.block_on(async {
        Ok::<_, std::io::Error>((
            signal(SignalKind::terminate())?,
            signal(SignalKind::interrupt())?,
        ))
    })?;
    std::thread::Builder::new()
        .name("cuzk-signals".into())
        .spawn(move || {
            runtime.block_on(async {
                tokio::select! {
                    _ = term.recv() => eprintln!("worker: SIGTERM"),
                    _ = int.recv() => eprintln!("worker: SIGINT"),
                }
                stop.store(true, Ordering::SeqCst);
                tokio::select! {
                    _ = term.recv() => {}
                    _ = int.recv() => {}
                }
                eprintln!("worker: second signal: exiting now; held jobs return to the queue when their leases expire");
                std::process::exit(1);
            })
        })?;
    Ok(())
}

/// What a worker holds in memory that could grow with the jobs it proves: the
/// TIMELINE's kept events and the engine's open jobs. Both stay bounded (none
/// kept; at most the jobs in flight), which each job's log line shows.
struct Held {
    recorder: Arc<Recorder>,
    engine: Arc<PipelineEngine>,
}

impl Held {
    fn line(&self) -> String {
        format!(
            "held: {} timeline events, {} engine jobs",
            self.recorder.len(),
            self.engine.open_jobs()
        )
    }
}

/// One line on stderr per event: what a person watching a worker wants to see.
fn log_event(who: &str, e: &WorkerEvent, held: &Held) {
    match e {
        WorkerEvent::Connected { reconnect, failed } => eprintln!(
            "worker {who}: {} to the queue ({failed} failed tries)",
            if *reconnect { "reconnected" } else { "connected" }
        ),
        WorkerEvent::ConnectionLost { error } => eprintln!("worker {who}: database: {error}"),
        WorkerEvent::Claimed { job, kind, attempt } => {
            eprintln!("worker {who}: claimed job {job} ({kind}, attempt {attempt})")
        }
        WorkerEvent::Done {
            job,
            completion,
            seconds,
        } => match completion {
            Completion::Written => eprintln!(
                "worker {who}: job {job} done in {seconds:.2} s ({})",
                held.line()
            ),
            Completion::AlreadyDone { same } => eprintln!(
                "worker {who}: job {job} was already done by another worker ({}); this proof discarded",
                if *same { "same bytes" } else { "different bytes, the first kept" }
            ),
            Completion::AlreadyFailed => {
                eprintln!("worker {who}: job {job} had been marked failed; this proof discarded")
            }
        },
        WorkerEvent::Failed { job, error, state } => {
            eprintln!("worker {who}: job {job} failed ({}): {error}", state.name())
        }
        WorkerEvent::LeaseLost { job } => {
            eprintln!("worker {who}: lost the lease on job {job}; finishing it anyway")
        }
        WorkerEvent::ExpiredFailed { jobs } => {
            eprintln!("worker {who}: {jobs} job(s) whose last lease expired marked failed")
        }
        WorkerEvent::Stopping { held, on_stop } => eprintln!(
            "worker {who}: stopping: claiming nothing more; {held} job(s) held, on stop {}",
            on_stop.name()
        ),
        WorkerEvent::Released { job, held: true } => {
            eprintln!("worker {who}: job {job} released to the queue unfinished")
        }
        WorkerEvent::Released { job, held: false } => eprintln!(
            "worker {who}: job {job} cancelled; another worker had it already (lease lost)"
        ),
    }
}
