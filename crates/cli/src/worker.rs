//! `cuzk worker --queue postgres://…`: claims proof jobs from a PostgreSQL queue
//! and proves them on the same engine `cuzk bench` would run (the same
//! `cuzk.toml`, backend and plugins), until killed.

use std::{
    path::PathBuf,
    sync::{atomic::AtomicBool, Arc},
    time::Instant,
};

use anyhow::{bail, Result};
use clap::Args;
use cuzk_config::QueueSection;
use cuzk_queue::{Completion, JobRunner, QueueConfig, Worker, WorkerEvent, WorkerOptions};
use cuzk_scheduler::PipelineEngine;
use cuzk_timeline::Recorder;

use crate::{
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
        let d = QueueConfig::default();
        let q = QueueConfig {
            lease_secs: s.lease_secs.unwrap_or(d.lease_secs),
            poll_ms: s.poll_ms.unwrap_or(d.poll_ms),
            jobs_in_flight: s.jobs_in_flight.unwrap_or(d.jobs_in_flight),
            max_attempts: s.max_attempts.unwrap_or(d.max_attempts),
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
    let engine = Arc::new(PipelineEngine::start(
        run.engine.clone(),
        policies,
        Arc::new(Recorder::new(Instant::now())),
    )?);
    let runners: Vec<Arc<dyn JobRunner>> = vec![Arc::new(SyntheticRunner::new(
        engine.clone(),
        args.cache_dir.clone(),
    ))];
    let kinds: Vec<&str> = runners.iter().map(|r| r.kind()).collect();
    let id = args
        .id
        .clone()
        .unwrap_or_else(|| format!("{}:{}", hostname(), std::process::id()));
    eprintln!(
        "worker {id}: kinds {}, lease {}s, {} job(s) in flight, {}",
        kinds.join(","),
        config.lease_secs,
        config.jobs_in_flight,
        sources
            .iter()
            .map(|s| format!("{}={}", s.slot, s.name))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let who = id.clone();
    let name = id.clone();
    let worker = Worker::new(
        &args.queue,
        WorkerOptions {
            id,
            config,
            drain: args.drain,
        },
        runners,
        move |e| log_event(&who, e),
    )?;
    let start = Instant::now();
    let stats = worker.run(&AtomicBool::new(false));
    let jobs = (stats.done + stats.failed + stats.late).max(1) as f64;
    eprintln!(
        "worker {name}: {} done, {} failed attempts, {} late writes discarded; \
         {:.3} s: proving {:.3} s, queue statements {:.3} s ({:.2} ms per job)",
        stats.done,
        stats.failed,
        stats.late,
        start.elapsed().as_secs_f64(),
        stats.run_seconds,
        stats.queue_seconds,
        stats.queue_seconds * 1e3 / jobs
    );
    Ok(())
}

/// One line on stderr per event: what a person watching a worker wants to see.
fn log_event(who: &str, e: &WorkerEvent) {
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
            Completion::Written => eprintln!("worker {who}: job {job} done in {seconds:.2} s"),
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
    }
}
