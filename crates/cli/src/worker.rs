//! `cuzk worker --queue postgres://…`: claims proof jobs from a PostgreSQL queue
//! and proves them through a `cuzk_service::Service`, started as `cuzk serve`
//! starts it (the same `cuzk.toml`, backend, plugins and kinds), until SIGTERM or
//! SIGINT (then it claims nothing more, finishes or releases the jobs it holds as
//! `[queue] on_stop` says, and exits 0) or, with `--drain`, until the queue is
//! empty. It claims only the kinds its service serves: every Filecoin kind, and
//! the synthetic one.
//!
//! A worker runs for months, so it keeps nothing per job once the job is written
//! back: the service's recorder keeps no events and hands each result over once,
//! and each job's log line says how much is held.

use std::{
    path::PathBuf,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use anyhow::{bail, Result};
use clap::Args;
use cuzk_config::{Age, QueueSection};
use cuzk_queue::{
    Completion, Database, JobRunner, OnStop, QueueConfig, Worker, WorkerEvent, WorkerOptions,
};
use cuzk_service::{Service, ServiceConfig, ShutdownMode};

use crate::{
    queue_runner::ServiceRunner,
    runtime::RunArgs,
    serve::{
        log_plan, service_kinds, start_service, KindsSetup, Planning, Started, SyntheticSetup,
    },
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
    /// Delete done and failed jobs finished longer ago than this (`7d`, `12h`),
    /// once an hour.
    #[arg(long)]
    pub keep_done: Option<Age>,
    /// A PEM file of CA certificates for the queue's TLS (beside Mozilla's roots).
    #[arg(long)]
    pub ca_file: Option<PathBuf>,
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
        s.keep_done = self.keep_done.or(s.keep_done);
        s.ca_file = self.ca_file.clone().or(s.ca_file.take());
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
            keep_done: s.keep_done.map(|a| a.0),
        };
        q.check().map_err(anyhow::Error::msg)?;
        Ok(q)
    }
}

#[derive(Args, Debug)]
pub struct WorkerArgs {
    /// The queue: a PostgreSQL URL (`postgres://user@host:port/db`, with
    /// `?sslmode=require` for TLS). Its schema must be this build's: `cuzk queue
    /// migrate` first.
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
    /// Filecoin's parameter directory (and the synthetic kind's cache); default
    /// FIL_PROOFS_PARAMETER_CACHE, else filecoin-proofs' own default.
    #[arg(long)]
    pub param_cache: Option<PathBuf>,
    /// Memory-map the parameters from decoded points files kept here (see
    /// `cuzk c2 --points-dir`).
    #[arg(long)]
    pub points_dir: Option<PathBuf>,
    /// The largest synthetic circuit served, as log2 of its constraints.
    #[arg(long, default_value_t = cuzk_service::synthetic::MAX_LOG)]
    pub synthetic_max_log: u32,
}

/// This host's name, for worker ids.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// The parameter directory: the flag, else FIL_PROOFS_PARAMETER_CACHE, else
/// filecoin-proofs' default.
pub fn param_cache(flag: Option<&PathBuf>) -> PathBuf {
    flag.cloned()
        .or_else(|| std::env::var_os(cuzk_filecoin::PARAMETER_CACHE_VAR).map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from(cuzk_daemon::config::DEFAULT_PARAM_CACHE))
}

pub fn worker(args: WorkerArgs) -> Result<()> {
    if args.run.no_verify {
        bail!("a worker always verifies: the queue stores only verified proofs (drop --no-verify)");
    }
    let mut run = args.run.resolve()?;
    let section = run.config.queue.get_or_insert_with(Default::default);
    let config = args.knobs.resolve(section)?;
    let db = Database::new(&args.queue).with_ca_file(section.ca_file.clone());
    let id = args
        .id
        .clone()
        .unwrap_or_else(|| format!("{}:{}", hostname(), std::process::id()));
    let param_cache = param_cache(args.param_cache.as_ref());
    let who = format!("worker {id}");
    // The kinds `cuzk serve` registers, from the same function; never
    // timing-only (the queue stores verified proofs only).
    let kinds = service_kinds(&KindsSetup {
        who: &who,
        param_cache_key: "--param-cache",
        param_cache: &param_cache,
        timing_only_circuits: &[],
        synthetic: Some(SyntheticSetup {
            max_log: args.synthetic_max_log,
            timing_only: false,
        }),
        check_digest: false,
        points_dir: args.points_dir.as_deref(),
    })?;
    // As many service slots as the worker holds jobs: each claimed job is
    // admitted at once, and the queue, not the service, decides what waits.
    let Started {
        service,
        sources,
        plan,
        ..
    } = start_service(
        &mut run,
        ServiceConfig {
            max_running_jobs: config.jobs_in_flight,
            ..ServiceConfig::default()
        },
        kinds.kinds,
        Planning::Served {
            mapped: args.points_dir.is_some(),
        },
        Vec::new(),
    )?;
    if let Some(plan) = &plan {
        log_plan(&who, plan);
    }
    let runners: Vec<Arc<dyn JobRunner>> = ServiceRunner::all(&service)
        .into_iter()
        .map(|r| Arc::new(r) as Arc<dyn JobRunner>)
        .collect();
    let kind_names: Vec<&str> = runners.iter().map(|r| r.kind()).collect();
    eprintln!(
        "worker {id}: kinds {}, parameters from {}, lease {}s, {} job(s) in flight, on stop {}, keep done {}, {}",
        kind_names.join(","),
        param_cache.display(),
        config.lease_secs,
        config.jobs_in_flight,
        config.on_stop.name(),
        config
            .keep_done
            .map(|d| String::from(Age(d)))
            .unwrap_or_else(|| "for ever".into()),
        sources
            .iter()
            .map(|s| format!("{}={}", s.slot, s.name))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let who = id.clone();
    let name = id.clone();
    let held = Held {
        service: service.clone(),
    };
    let worker = Worker::new(
        db,
        WorkerOptions {
            id,
            host: hostname(),
            config,
            drain: args.drain,
        },
        runners,
        move |e| log_event(&who, e, &held),
    )?;
    let stop = Arc::new(AtomicBool::new(false));
    stop_on_signal(stop.clone())?;
    let start = Instant::now();
    let stats = worker.run(&stop)?;
    // Every job was written back or released: nothing is left to finish.
    service.shutdown(ShutdownMode::Cancel, Duration::from_secs(10));
    let jobs = (stats.done + stats.failed + stats.late + stats.refused).max(1) as f64;
    eprintln!(
        "worker {name}: {} done, {} failed attempts, {} late writes discarded, {} writes refused (lease lost), {} leases lost, {} released; \
         {:.3} s: proving {:.3} s, queue statements {:.3} s ({:.2} ms per job)",
        stats.done,
        stats.failed,
        stats.late,
        stats.refused,
        stats.leases_lost,
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
/// service's jobs (queued, running, or finished and not yet handed over). It
/// stays bounded (at most the jobs in flight; none after a write-back), which
/// each job's log line shows; the service's TIMELINE keeps no events.
struct Held {
    service: Service,
}

impl Held {
    fn line(&self) -> String {
        let s = self.service.status();
        let jobs: u32 = s.queues.iter().map(|q| q.pending + q.in_progress).sum();
        format!(
            "held: {jobs} service jobs, {} results waiting",
            s.results_waiting
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
            Completion::NotHolder => eprintln!(
                "worker {who}: job {job}: write refused, this worker no longer holds it (lease lost); this proof discarded"
            ),
        },
        WorkerEvent::Failed { job, error, state } => {
            eprintln!("worker {who}: job {job} failed ({}): {error}", state.name())
        }
        WorkerEvent::LeaseLost { job } => eprintln!(
            "worker {who}: lost the lease on job {job} (another worker has it); cancelling it here"
        ),
        WorkerEvent::Registered { id } => eprintln!("worker {who}: registered as live worker {id}"),
        WorkerEvent::HeartbeatLost => eprintln!(
            "worker {who}: its row in cuzk_workers was gone or taken over; registering again"
        ),
        WorkerEvent::Pruned { pruned } => eprintln!(
            "worker {who}: pruned {} done and {} failed jobs past keep_done",
            pruned.done, pruned.failed
        ),
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
