//! The worker loop: claim, prove (through a [`JobRunner`]), write back, repeat;
//! leases renewed on a thread of their own; connections re-made after the
//! database restarts.

use std::{
    collections::{HashMap, HashSet},
    panic::{catch_unwind, AssertUnwindSafe},
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc, Condvar, Mutex,
    },
    time::{Duration, Instant},
};

use thiserror::Error;

use crate::{
    ClaimedJob, Completion, Database, JobId, JobState, OnStop, Pruned, Queue, QueueConfig,
    QueueError, PRUNE_EVERY,
};

/// Proves the jobs of one kind: the plug between the queue and an engine.
///
/// The queue hands over the job's input bytes; the runner returns the proof
/// bytes, **already verified** (the queue stores what it is given as the job's
/// proof). The same runner is called from several threads at once (one per job
/// in flight), so it shares one engine between them.
pub trait JobRunner: Send + Sync {
    /// The job kind this runner proves, as submitted (cuzk's runners use the service
    /// kinds' names: `POREP_SEAL_COMMIT`, `SYNTHETIC`, ...).
    fn kind(&self) -> &str;
    /// Proves `job`. An error is recorded with the attempt and the job retried
    /// until it runs out of attempts; a panic is caught and treated the same.
    ///
    /// `cancel` fires when the worker stops with [`OnStop::Release`], and when it
    /// loses the job's lease (another worker has it now): the runner registers how
    /// to stop its work ([`Cancel::on_cancel`], e.g. cancelling the service or
    /// engine job) and returns an error soon after; the attempt then counts as no
    /// failure (a released job goes back to the queue; a lost one is the new
    /// holder's).
    fn run(&self, job: &ClaimedJob, cancel: &Cancel) -> Result<Vec<u8>, RunError>;
}

type Hook = Box<dyn FnOnce() + Send>;

/// Asks a runner to give up a job (the worker is stopping and releases it, or
/// lost its lease).
#[derive(Default)]
pub struct Cancel {
    cancelled: AtomicBool,
    hooks: Mutex<Vec<Hook>>,
}

impl std::fmt::Debug for Cancel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cancel")
            .field("cancelled", &self.is_cancelled())
            .finish_non_exhaustive()
    }
}

impl Cancel {
    /// Whether the job was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }

    /// Runs `hook` when the job is cancelled (at once if it already is). Hooks
    /// run on the worker's thread that cancels, so they must be quick.
    pub fn on_cancel(&self, hook: impl FnOnce() + Send + 'static) {
        let mut hooks = self.hooks.lock().unwrap_or_else(|e| e.into_inner());
        if self.is_cancelled() {
            drop(hooks);
            hook();
        } else {
            hooks.push(Box::new(hook));
        }
    }

    /// Cancels the job: runs every hook registered so far, once.
    pub fn cancel(&self) {
        let hooks = {
            let mut hooks = self.hooks.lock().unwrap_or_else(|e| e.into_inner());
            self.cancelled.store(true, Ordering::SeqCst);
            std::mem::take(&mut *hooks)
        };
        for hook in hooks {
            // A panicking hook must not take the worker down; the job's own
            // wait still ends when the runner returns.
            let _ = catch_unwind(AssertUnwindSafe(hook));
        }
    }
}

/// Why a runner could not prove a job (the text goes into the job's errors).
#[derive(Debug, Error)]
#[error("{0}")]
pub struct RunError(pub String);

impl RunError {
    /// An error and its causes, joined by ": ".
    pub fn from_error(e: &dyn std::error::Error) -> Self {
        RunError(crate::error::with_causes(e))
    }
}

/// How a worker runs.
#[derive(Clone, Debug)]
pub struct WorkerOptions {
    /// This worker's name in the queue (`host:pid` is a good one): it appears in
    /// the jobs it holds, finishes and fails. Unique among live workers.
    pub id: String,
    /// The host it runs on (recorded with its id in `cuzk_workers`).
    pub host: String,
    pub config: QueueConfig,
    /// Exit once nothing is left to claim, instead of waiting for more work.
    pub drain: bool,
}

/// What a worker did and saw, for its log.
#[derive(Clone, Debug)]
pub enum WorkerEvent {
    /// Connected to the queue: the first time, or again after losing it
    /// (`reconnect`), after `failed` unsuccessful tries.
    Connected { reconnect: bool, failed: u32 },
    /// A statement or connection failed; the worker will reconnect.
    ConnectionLost { error: String },
    Claimed {
        job: JobId,
        kind: String,
        attempt: i32,
    },
    /// The proof was written (or, after a lost lease, found already written).
    Done {
        job: JobId,
        completion: Completion,
        seconds: f64,
    },
    /// The attempt failed; `state` is the job's afterwards (queued again, or failed).
    Failed {
        job: JobId,
        error: String,
        state: JobState,
    },
    /// The lease could not be renewed: another worker has the job now (or it was
    /// finished); its work here was cancelled.
    LeaseLost { job: JobId },
    /// Registered as a live worker in `cuzk_workers`.
    Registered { id: String },
    /// The worker's row was gone or taken over when its heartbeat was renewed
    /// (the database lost it, or this worker stalled past its staleness).
    HeartbeatLost,
    /// Finished jobs older than `keep_done` were deleted.
    Pruned { pruned: Pruned },
    /// Jobs whose lease expired on their last attempt were marked failed.
    ExpiredFailed { jobs: u64 },
    /// The worker was told to stop: it claims nothing more and finishes or
    /// releases (`on_stop`) the `held` jobs it has.
    Stopping { held: usize, on_stop: OnStop },
    /// A job was put back in the queue unfinished (the worker is stopping with
    /// [`OnStop::Release`]); `held`: false if the worker had lost it already.
    Released { job: JobId, held: bool },
}

/// Counts of a worker's run.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct WorkerStats {
    /// Proofs written as the job's.
    pub done: u64,
    /// Attempts that failed.
    pub failed: u64,
    /// Proofs finished after another worker's had been written, or after the
    /// job was marked failed (discarded).
    pub late: u64,
    /// Proofs refused because this worker no longer held the job (discarded).
    pub refused: u64,
    /// Leases lost (the jobs cancelled here).
    pub leases_lost: u64,
    /// Jobs put back in the queue unfinished when the worker stopped.
    pub released: u64,
    /// Seconds the runners spent proving, summed over jobs.
    pub run_seconds: f64,
    /// Seconds spent in the queue's statements for jobs (the claims that got
    /// one, the write-backs), summed over jobs: the queue's own cost.
    pub queue_seconds: f64,
}

type OnEvent = Arc<dyn Fn(&WorkerEvent) + Send + Sync>;

/// What a slot writes back for a job it held.
enum Outcome {
    Proof(Vec<u8>),
    Error(RunError),
    /// Cancelled because the worker is stopping: back to the queue.
    Release,
}

/// A worker: `jobs_in_flight` threads claiming and proving, one renewing leases.
pub struct Worker {
    db: Database,
    options: WorkerOptions,
    runners: HashMap<String, Arc<dyn JobRunner>>,
    on_event: OnEvent,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("options", &self.options)
            .field("kinds", &self.runners.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// What the threads of one worker share.
struct Shared {
    stop: AtomicBool,
    /// Jobs held now, with the lease keeper's view of them.
    held: Mutex<HashSet<JobId>>,
    /// How to cancel each job held now (fired when stopping with `Release`).
    cancels: Mutex<HashMap<JobId, Arc<Cancel>>>,
    /// Wakes the lease keeper early when stopping.
    wake: Condvar,
    done: AtomicU64,
    failed: AtomicU64,
    late: AtomicU64,
    refused: AtomicU64,
    leases_lost: AtomicU64,
    released: AtomicU64,
    run_ns: AtomicU64,
    queue_ns: AtomicU64,
}

fn add_time(counter: &AtomicU64, since: Instant) {
    counter.fetch_add(since.elapsed().as_nanos() as u64, Ordering::Relaxed);
}

impl Worker {
    /// A worker for `db` proving the kinds of `runners`; `on_event` sees every
    /// [`WorkerEvent`] (from several threads). The URL is checked here; the
    /// database need not be up yet.
    pub fn new(
        db: impl Into<Database>,
        options: WorkerOptions,
        runners: Vec<Arc<dyn JobRunner>>,
        on_event: impl Fn(&WorkerEvent) + Send + Sync + 'static,
    ) -> Result<Worker, QueueError> {
        let db = db.into();
        db.config()?;
        Ok(Worker {
            db,
            options,
            runners: runners
                .into_iter()
                .map(|r| (r.kind().to_string(), r))
                .collect(),
            on_event: Arc::new(on_event),
        })
    }

    /// Runs until `stop` is set (or, with `drain`, until nothing is left to
    /// claim). Once `stop` is set nothing more is claimed, and the jobs held are
    /// finished and written back, or with [`OnStop::Release`] cancelled and put
    /// back in the queue, before this returns.
    ///
    /// First it registers its id as a live worker (waiting for the database if it
    /// is down): an id a live worker holds is an error
    /// ([`QueueError::WorkerIdTaken`]), as is a schema that is not this build's.
    /// The row is removed when it returns.
    pub fn run(&self, stop: &AtomicBool) -> Result<WorkerStats, QueueError> {
        let pid = std::process::id();
        let mut conn = None;
        let mut ever = false;
        let stopping = || stop.load(Ordering::SeqCst);
        loop {
            if !self.connect(&mut conn, &mut ever, &stopping)? {
                return Ok(WorkerStats::default());
            }
            let q = conn.as_mut().expect("connected");
            match q.register_worker(
                &self.options.id,
                &self.options.host,
                pid,
                self.options.config.lease(),
            ) {
                Ok(()) => break,
                Err(e) if e.is_connection_lost() => self.lost(&mut conn, e),
                Err(e) => return Err(e),
            }
        }
        self.emit(WorkerEvent::Registered {
            id: self.options.id.clone(),
        });
        let stats = self.run_registered(stop);
        // Best effort, one try (a database that is gone must not hold up the
        // exit): a row left behind goes stale and its id is free again.
        if conn.as_ref().is_none_or(|q| q.is_closed()) {
            conn = Queue::connect(&self.db).ok();
        }
        if let Some(q) = conn.as_mut() {
            let _ = q.unregister_worker(&self.options.id, &self.options.host, pid);
        }
        Ok(stats)
    }

    fn run_registered(&self, stop: &AtomicBool) -> WorkerStats {
        let shared = Shared {
            stop: AtomicBool::new(false),
            held: Mutex::new(HashSet::new()),
            cancels: Mutex::new(HashMap::new()),
            wake: Condvar::new(),
            done: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            late: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            leases_lost: AtomicU64::new(0),
            released: AtomicU64::new(0),
            run_ns: AtomicU64::new(0),
            queue_ns: AtomicU64::new(0),
        };
        std::thread::scope(|s| {
            let keeper = s.spawn(|| self.keep_leases(&shared));
            let watcher = s.spawn(|| self.watch_stop(&shared, stop));
            let slots: Vec<_> = (0..self.options.config.jobs_in_flight)
                .map(|_| s.spawn(|| self.slot(&shared, stop)))
                .collect();
            for slot in slots {
                // A slot catches its runner's panics; a panic here is the queue's
                // own bug, and the other slots go on.
                let _ = slot.join();
            }
            shared.stop.store(true, Ordering::SeqCst);
            shared.wake.notify_all();
            let _ = keeper.join();
            let _ = watcher.join();
        });
        WorkerStats {
            done: shared.done.load(Ordering::SeqCst),
            failed: shared.failed.load(Ordering::SeqCst),
            late: shared.late.load(Ordering::SeqCst),
            refused: shared.refused.load(Ordering::SeqCst),
            leases_lost: shared.leases_lost.load(Ordering::SeqCst),
            released: shared.released.load(Ordering::SeqCst),
            run_seconds: shared.run_ns.load(Ordering::SeqCst) as f64 * 1e-9,
            queue_seconds: shared.queue_ns.load(Ordering::SeqCst) as f64 * 1e-9,
        }
    }

    fn emit(&self, e: WorkerEvent) {
        (self.on_event)(&e);
    }

    /// Says when `stop` is set and, with [`OnStop::Release`], cancels every job
    /// held then or claimed after (a claim racing the stop), until the slots are
    /// done (`shared.stop`).
    fn watch_stop(&self, shared: &Shared, stop: &AtomicBool) {
        let on_stop = self.options.config.on_stop;
        let mut told = false;
        while !shared.stop.load(Ordering::SeqCst) {
            if stop.load(Ordering::SeqCst) {
                let cancels: Vec<Arc<Cancel>> = shared
                    .cancels
                    .lock()
                    .expect("cancels")
                    .values()
                    .cloned()
                    .collect();
                if !told {
                    told = true;
                    self.emit(WorkerEvent::Stopping {
                        held: cancels.len(),
                        on_stop,
                    });
                }
                if on_stop == OnStop::Release {
                    for c in cancels.iter().filter(|c| !c.is_cancelled()) {
                        c.cancel();
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A connection, made again as often as needed (backing off up to 2 s);
    /// `Ok(false)` once `stop` says to give up. `ever` says whether this thread
    /// had one before (so the event says "reconnected"). An error no retry can
    /// fix (the schema is not this build's, a bad CA file) is returned.
    fn connect(
        &self,
        conn: &mut Option<Queue>,
        ever: &mut bool,
        stop: &dyn Fn() -> bool,
    ) -> Result<bool, QueueError> {
        if conn.as_ref().is_some_and(|q| !q.is_closed()) {
            return Ok(true);
        }
        *conn = None;
        let mut attempt = 0u32;
        let mut backoff = Duration::from_millis(100);
        loop {
            if stop() {
                return Ok(false);
            }
            match Queue::connect(&self.db) {
                Ok(q) => {
                    self.emit(WorkerEvent::Connected {
                        reconnect: *ever,
                        failed: attempt,
                    });
                    *ever = true;
                    *conn = Some(q);
                    return Ok(true);
                }
                Err(e) if !e.is_connection_lost() => return Err(e),
                Err(e) => {
                    if attempt == 0 {
                        self.emit(WorkerEvent::ConnectionLost {
                            error: e.to_string(),
                        });
                    }
                    attempt += 1;
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                }
            }
        }
    }

    fn lost(&self, conn: &mut Option<Queue>, e: QueueError) {
        self.emit(WorkerEvent::ConnectionLost {
            error: e.to_string(),
        });
        *conn = None;
        std::thread::sleep(Duration::from_millis(100));
    }

    /// One job at a time: claim, run, write back.
    fn slot(&self, shared: &Shared, stop: &AtomicBool) {
        let kinds: Vec<String> = self.runners.keys().cloned().collect();
        let cfg = &self.options.config;
        let stopping = || stop.load(Ordering::SeqCst);
        let mut conn: Option<Queue> = None;
        let mut ever = false;
        while !stopping() {
            match self.connect(&mut conn, &mut ever, &stopping) {
                Ok(true) => {}
                Ok(false) => return,
                // The schema changed under a running worker (a newer cuzk migrated
                // it): say so and keep trying; an operator sees it in the log.
                Err(e) => {
                    self.lost(&mut conn, e);
                    std::thread::sleep(Duration::from_secs(1));
                    continue;
                }
            }
            let q = conn.as_mut().expect("connected");
            match q.fail_expired() {
                Ok(0) => {}
                Ok(jobs) => self.emit(WorkerEvent::ExpiredFailed { jobs }),
                Err(e) => {
                    self.lost(&mut conn, e);
                    continue;
                }
            }
            let claim_start = Instant::now();
            let job = match q.claim(&self.options.id, &kinds, cfg.lease()) {
                Ok(Some(job)) => {
                    add_time(&shared.queue_ns, claim_start);
                    job
                }
                Ok(None) if self.options.drain => return,
                Ok(None) => {
                    std::thread::sleep(Duration::from_millis(cfg.poll_ms));
                    continue;
                }
                Err(e) => {
                    self.lost(&mut conn, e);
                    continue;
                }
            };
            self.emit(WorkerEvent::Claimed {
                job: job.id,
                kind: job.kind.clone(),
                attempt: job.attempt,
            });
            shared.held.lock().expect("held").insert(job.id);
            let cancel = Arc::new(Cancel::default());
            shared
                .cancels
                .lock()
                .expect("cancels")
                .insert(job.id, cancel.clone());
            let start = Instant::now();
            let result = match self.runners.get(&job.kind) {
                Some(runner) => catch_unwind(AssertUnwindSafe(|| runner.run(&job, &cancel)))
                    .unwrap_or_else(|panic| {
                        let what = panic
                            .downcast_ref::<&str>()
                            .map(|s| s.to_string())
                            .or_else(|| panic.downcast_ref::<String>().cloned())
                            .unwrap_or_else(|| "a panic".into());
                        Err(RunError(format!(
                            "the {} runner panicked: {what}",
                            job.kind
                        )))
                    }),
                None => Err(RunError(format!("no runner for kind {}", job.kind))),
            };
            add_time(&shared.run_ns, start);
            // A proof finished before the cancel took effect is written all the
            // same; an attempt cut short by the cancel is no failure.
            let outcome = match result {
                Err(_) if cancel.is_cancelled() => Outcome::Release,
                Ok(proof) => Outcome::Proof(proof),
                Err(e) => Outcome::Error(e),
            };
            // The lease keeper lets go of the job before its outcome is written:
            // a renewal that finds the job finished is then known to be no loss.
            shared.held.lock().expect("held").remove(&job.id);
            self.write_back(shared, &mut conn, &mut ever, &job, outcome, start);
            shared.cancels.lock().expect("cancels").remove(&job.id);
        }
    }

    /// Writes a job's outcome, reconnecting until it is written (a proof is never
    /// dropped because the database restarted): the worker stops only after.
    fn write_back(
        &self,
        shared: &Shared,
        conn: &mut Option<Queue>,
        ever: &mut bool,
        job: &ClaimedJob,
        outcome: Outcome,
        start: Instant,
    ) {
        let never = || false;
        let write_start = Instant::now();
        loop {
            if let Err(e) = self.connect(conn, ever, &never) {
                self.lost(conn, e);
                std::thread::sleep(Duration::from_secs(1));
                continue;
            }
            let q = conn.as_mut().expect("connected");
            let written = match &outcome {
                Outcome::Proof(proof) => q.complete(job.id, &self.options.id, proof).map(|c| {
                    match c {
                        Completion::Written => shared.done.fetch_add(1, Ordering::SeqCst),
                        Completion::NotHolder => shared.refused.fetch_add(1, Ordering::SeqCst),
                        _ => shared.late.fetch_add(1, Ordering::SeqCst),
                    };
                    WorkerEvent::Done {
                        job: job.id,
                        completion: c,
                        seconds: start.elapsed().as_secs_f64(),
                    }
                }),
                Outcome::Error(e) => q.fail(job.id, &self.options.id, &e.0).map(|state| {
                    shared.failed.fetch_add(1, Ordering::SeqCst);
                    WorkerEvent::Failed {
                        job: job.id,
                        error: e.0.clone(),
                        state,
                    }
                }),
                Outcome::Release => q.release(job.id, &self.options.id).map(|held| {
                    shared.released.fetch_add(1, Ordering::SeqCst);
                    WorkerEvent::Released { job: job.id, held }
                }),
            };
            match written {
                Ok(event) => {
                    add_time(&shared.queue_ns, write_start);
                    return self.emit(event);
                }
                Err(e) if e.is_connection_lost() => self.lost(conn, e),
                Err(e) => {
                    // The job is gone (deleted by hand) or the statement is
                    // wrong: nothing a retry fixes.
                    self.emit(WorkerEvent::ConnectionLost {
                        error: format!("job {}: {e}", job.id),
                    });
                    return;
                }
            }
        }
    }

    /// Renews every held lease and the worker's heartbeat each `renew_every`, on
    /// a connection of its own; cancels a job whose lease was lost; prunes old
    /// finished jobs once every [`PRUNE_EVERY`] when `keep_done` is set.
    fn keep_leases(&self, shared: &Shared) {
        let cfg = &self.options.config;
        let pid = std::process::id();
        let stopping = || shared.stop.load(Ordering::SeqCst);
        let mut conn: Option<Queue> = None;
        let mut ever = false;
        let mut lost: HashSet<JobId> = HashSet::new();
        let mut heartbeat_lost = false;
        // The first prune soon after start, then every PRUNE_EVERY.
        let mut next_prune = Instant::now() + cfg.renew_every();
        loop {
            {
                let held = shared.held.lock().expect("held");
                let (held, _) = shared
                    .wake
                    .wait_timeout(held, cfg.renew_every())
                    .expect("held");
                drop(held);
            }
            if stopping() {
                return;
            }
            let ids: Vec<JobId> = shared.held.lock().expect("held").iter().copied().collect();
            lost.retain(|id| ids.contains(id));
            match self.connect(&mut conn, &mut ever, &stopping) {
                Ok(true) => {}
                Ok(false) => continue,
                Err(e) => {
                    self.lost(&mut conn, e);
                    continue;
                }
            }
            let q = conn.as_mut().expect("connected");
            match q.heartbeat(&self.options.id, &self.options.host, pid) {
                Ok(true) => heartbeat_lost = false,
                Ok(false) => {
                    if !heartbeat_lost {
                        heartbeat_lost = true;
                        self.emit(WorkerEvent::HeartbeatLost);
                    }
                    // Take the id back if it is free (the row was lost, not taken).
                    let _ =
                        q.register_worker(&self.options.id, &self.options.host, pid, cfg.lease());
                }
                Err(e) => {
                    self.lost(&mut conn, e);
                    continue;
                }
            }
            for id in ids {
                match q.renew(id, &self.options.id, cfg.lease()) {
                    Ok(true) => {}
                    // Not renewed: lost, unless the job's slot let go of it since
                    // the ids were taken (its outcome is being written, which ends
                    // the lease). Another worker has it: stop proving it here.
                    Ok(false) => {
                        let still_held = shared.held.lock().expect("held").contains(&id);
                        if still_held && lost.insert(id) {
                            shared.leases_lost.fetch_add(1, Ordering::SeqCst);
                            self.emit(WorkerEvent::LeaseLost { job: id });
                            let cancel = shared.cancels.lock().expect("cancels").get(&id).cloned();
                            if let Some(c) = cancel {
                                c.cancel();
                            }
                        }
                    }
                    Err(e) => {
                        self.lost(&mut conn, e);
                        break;
                    }
                }
            }
            if let (Some(keep), Some(q)) = (cfg.keep_done, conn.as_mut()) {
                if Instant::now() >= next_prune {
                    next_prune = Instant::now() + PRUNE_EVERY;
                    match q.prune(keep) {
                        Ok(pruned) => self.emit(WorkerEvent::Pruned { pruned }),
                        Err(e) => self.lost(&mut conn, e),
                    }
                }
            }
        }
    }
}
