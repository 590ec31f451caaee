//! The service: jobs from submission to a result handed over once.
//!
//! ```text
//! submit ─► kind.prepare (checks) ─► admission queue (priority, then submission)
//!        ─► at most `max_running_jobs` admitted: parameters acquired (loaded once)
//!        ─► kind starts the proof on the engine ─► wait ─► result kept until awaited
//! ```
//!
//! Each admitted job has one thread that loads its parameters and waits for the
//! engine; everything else happens under one mutex (`State`), so a job is in
//! exactly one phase and its result is handed over exactly once.

use std::{
    cmp::Reverse,
    collections::{BTreeMap, BinaryHeap, HashMap},
    future::Future,
    path::PathBuf,
    pin::Pin,
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc, Condvar, Mutex, MutexGuard, PoisonError,
    },
    task::{Context, Poll, Waker},
    time::{Duration, Instant},
};

use cuzk_scheduler::{PipelineConfig, PipelineEngine, PipelineError, Policies};
use cuzk_timeline::{Recorder, Subscriber};

use crate::{
    gpus::GpuInfo,
    kind::{
        check_request_id, KindLimits, KindProver, PreparedProof, ProofFailure, ProofKind,
        ProofRequest, RequestError,
    },
    metrics::Metrics,
    params::{EvictError, ParamCache, ParamStatus},
    Priority,
};

/// The service's knobs (the daemon fills them from `[daemon]` in `cuzk.toml`).
#[derive(Clone, Debug)]
pub struct ServiceConfig {
    /// Jobs admitted to the engine at once (loading parameters or proving). The
    /// rest wait in the service's priority queue, so a CRITICAL job submitted
    /// behind many queued ones is the next admitted. Two keep the engine's
    /// pipeline full (one job's synthesis overlaps the other's GPU work).
    pub max_running_jobs: usize,
    /// Bytes of parameter sets kept resident when no job uses them.
    pub param_budget_bytes: u64,
    /// How long a finished job's result waits to be awaited before it is dropped.
    pub result_ttl: Duration,
    /// Also write the TIMELINE as JSON lines to this file.
    pub timeline_jsonl: Option<PathBuf>,
    /// Per-kind limits that differ from [`KindLimits::default_for`].
    pub limits: BTreeMap<ProofKind, KindLimits>,
}

impl ServiceConfig {
    /// What the service accepts of `kind`.
    pub fn limits_for(&self, kind: ProofKind) -> KindLimits {
        self.limits
            .get(&kind)
            .copied()
            .unwrap_or_else(|| KindLimits::default_for(kind))
    }
}

impl Default for ServiceConfig {
    fn default() -> Self {
        Self {
            max_running_jobs: 2,
            param_budget_bytes: u64::MAX,
            result_ttl: Duration::from_secs(3600),
            timeline_jsonl: None,
            limits: BTreeMap::new(),
        }
    }
}

/// The service could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("the engine could not start: {0}")]
    Engine(#[from] PipelineError),
    #[error("the metrics could not be registered: {0}")]
    Metrics(#[from] prometheus::Error),
    #[error("the TIMELINE file could not be opened: {0}")]
    Timeline(#[from] cuzk_timeline::TimelineError),
    #[error("the configuration is invalid: {0}")]
    Config(String),
}

/// A call about one job failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobLookupError {
    #[error("no job `{0}` is known (never submitted, already awaited, or its result expired)")]
    NotFound(String),
}

/// A parameter-set call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParamsError {
    #[error("no proof kind served here knows the circuit id `{circuit_id}`; known ids look like {examples}")]
    UnknownCircuit {
        circuit_id: String,
        examples: String,
    },
    #[error("loading the parameters of `{circuit_id}` failed: {why}")]
    Load { circuit_id: String, why: String },
    #[error(transparent)]
    Evict(#[from] EvictError),
}

/// How a job ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobStatus {
    Completed,
    Failed,
    Cancelled,
}

/// Where a job's time went. Stage times are summed over its partitions, from the
/// engine's TIMELINE (so they agree with `cuzk_stage_seconds`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Timings {
    /// Submission to its first partition's synthesis (the service's queue, the
    /// parameter load and the engine's queues).
    pub queue_wait: Duration,
    /// Waiting for its parameter set (zero when resident).
    pub srs_load: Duration,
    /// Synthesis, spmv and prep_msm, summed over partitions.
    pub synthesis: Duration,
    /// The backend's partition calls, summed over partitions.
    pub gpu_compute: Duration,
    /// Submission to result.
    pub total: Duration,
}

/// A finished job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobResult {
    pub job_id: String,
    pub kind: ProofKind,
    pub status: JobStatus,
    /// The proof (verified before it was returned, unless `timing_only`); empty
    /// unless completed.
    pub proof: Vec<u8>,
    /// Made with timing-only parameters (random points: `[daemon]
    /// timing_only_circuits`): the proof was NOT verified and does not verify.
    pub timing_only: bool,
    /// Why it failed or was cancelled; empty if completed.
    pub error: String,
    pub timings: Timings,
}

/// An accepted job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Submitted {
    pub job_id: String,
    /// Queued jobs ahead of it when it was accepted.
    pub queue_position: u32,
}

/// Per-kind queue figures.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueStatus {
    pub kind: ProofKind,
    /// Waiting in the service's queue.
    pub pending: u32,
    /// Admitted: loading parameters or proving.
    pub in_progress: u32,
}

/// One device the engine drives and the job on it now (from the TIMELINE's
/// GPU_START/GPU_END on that device's lane).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuStatus {
    pub info: GpuInfo,
    pub current_job: Option<(String, ProofKind)>,
}

/// What `GetStatus` reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Status {
    pub gpus: Vec<GpuStatus>,
    pub params: Vec<ParamStatus>,
    pub queues: Vec<QueueStatus>,
    pub completed: u64,
    pub failed: u64,
    pub cancelled: u64,
    pub uptime_seconds: u64,
    /// Bytes the engine's memory budget has granted to partitions in flight (their
    /// witness, a/b/c and splits; the CUDA backend page-locks a/b/c while a
    /// partition is staged).
    pub budget_used_bytes: u64,
    pub budget_total_bytes: u64,
    /// Finished jobs whose results wait to be awaited.
    pub results_waiting: u32,
    /// Circuit ids proved with timing-only parameters (benchmarks; their proofs
    /// are returned unverified), as the kinds were configured.
    pub timing_only_circuits: Vec<String>,
}

/// How shutdown treats jobs already accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShutdownMode {
    /// Prove every accepted job (queued ones too), then stop.
    Finish,
    /// Cancel every accepted job, then stop.
    Cancel,
}

enum Phase {
    Queued(Box<dyn PreparedProof>),
    /// Admitted; loading parameters or starting.
    Loading,
    /// Running: on the engine (its job id), or outside it (`None`: an
    /// aggregation, which cannot be interrupted).
    Running {
        engine_job: Option<u64>,
    },
    Done(JobResult),
}

struct Job {
    kind: ProofKind,
    /// The service's submission number (names the job's thread).
    seq: u64,
    submitted: Instant,
    phase: Phase,
    cancel_requested: bool,
    /// Nobody will await it (its `Prove` caller went away): dropped when done.
    abandoned: bool,
    finished_at: Option<Instant>,
    wakers: Vec<Waker>,
}

#[derive(Default)]
struct State {
    jobs: HashMap<String, Job>,
    /// (priority, earlier first, id); cancelled entries are skipped when popped.
    queue: BinaryHeap<(Priority, Reverse<u64>, String)>,
    running: usize,
}

struct Inner {
    cfg: ServiceConfig,
    engine: Mutex<Option<Arc<PipelineEngine>>>,
    kinds: HashMap<ProofKind, Arc<dyn KindProver>>,
    params: ParamCache,
    metrics: Arc<Metrics>,
    state: Mutex<State>,
    changed: Condvar,
    next_seq: AtomicU64,
    accepting: AtomicBool,
    gpu_workers: usize,
}

/// The proving service. Cheap to clone (a handle).
#[derive(Clone)]
pub struct Service {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service")
            .field("config", &self.inner.cfg)
            .field("kinds", &self.inner.kinds.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn engine(&self) -> Option<Arc<PipelineEngine>> {
        self.engine
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Service {
    /// Starts the engine (with a TIMELINE that keeps no events in memory and feeds
    /// the metrics) and the service around it, serving `kinds`.
    pub fn start(
        cfg: ServiceConfig,
        engine_cfg: PipelineConfig,
        policies: Policies,
        kinds: Vec<Arc<dyn KindProver>>,
    ) -> Result<Self, StartError> {
        Self::start_with_subscribers(cfg, engine_cfg, policies, kinds, Vec::new())
    }

    /// [`Service::start`], with `subscribers` fed every TIMELINE event beside the
    /// metrics: what a command line shows of a proof as it runs (its partitions
    /// done, the TIMELINE on stderr) comes from the same events.
    pub fn start_with_subscribers(
        cfg: ServiceConfig,
        engine_cfg: PipelineConfig,
        policies: Policies,
        kinds: Vec<Arc<dyn KindProver>>,
        subscribers: Vec<Arc<dyn Subscriber>>,
    ) -> Result<Self, StartError> {
        if cfg.max_running_jobs == 0 {
            return Err(StartError::Config(
                "max_running_jobs must be at least 1".into(),
            ));
        }
        let metrics = Arc::new(Metrics::new()?);
        let mut recorder = Recorder::new(Instant::now())
            .with_retention(false)
            .with_subscriber(metrics.clone());
        for s in subscribers {
            recorder = recorder.with_subscriber(s);
        }
        if let Some(path) = &cfg.timeline_jsonl {
            recorder = recorder.with_jsonl(path)?;
        }
        let per_device = engine_cfg.gpu_workers_per_device;
        let engine = PipelineEngine::start(engine_cfg, policies, Arc::new(recorder))?;
        // The engine's lanes, CPU "devices" included (a CPU backend lists no
        // device in its capabilities, yet a set of them runs a lane each).
        let gpu_workers = engine.devices().len() * per_device;
        metrics.gpu_workers.set(gpu_workers as i64);
        for k in &kinds {
            for id in k.timing_only_circuits() {
                metrics
                    .timing_only_circuits
                    .with_label_values(&[id.as_str()])
                    .set(1);
            }
        }
        Ok(Self {
            inner: Arc::new(Inner {
                params: ParamCache::new(cfg.param_budget_bytes),
                cfg,
                engine: Mutex::new(Some(Arc::new(engine))),
                kinds: kinds.into_iter().map(|k| (k.kind(), k)).collect(),
                metrics,
                state: Mutex::new(State::default()),
                changed: Condvar::new(),
                next_seq: AtomicU64::new(1),
                accepting: AtomicBool::new(true),
                gpu_workers,
            }),
        })
    }

    /// The kinds this service proves.
    pub fn kinds(&self) -> Vec<ProofKind> {
        let mut k: Vec<_> = self.inner.kinds.keys().copied().collect();
        k.sort();
        k
    }

    /// Checks and queues a job. Every field is checked before anything is
    /// counted: the kind, the request id, the request's size, then the kind's
    /// own checks ([`KindProver::prepare`], a panic in which is a malformed
    /// request, never a dead handler), then, under the state lock, the id's
    /// uniqueness and the kind's pending cap.
    pub fn submit(
        &self,
        kind: ProofKind,
        mut request: ProofRequest,
    ) -> Result<Submitted, RequestError> {
        let inner = &self.inner;
        if !inner.accepting.load(Ordering::SeqCst) {
            return Err(RequestError::ShuttingDown);
        }
        let prover = inner
            .kinds
            .get(&kind)
            .ok_or_else(|| RequestError::Unsupported {
                kind,
                why: unsupported_reason(kind),
            })?;
        let priority = *request.priority.get_or_insert(kind.default_priority());
        let given_id = request.request_id.clone();
        let limits = inner.cfg.limits_for(kind);
        let prepared = check_request(&**prover, limits, request)?;
        let seq = inner.next_seq.fetch_add(1, Ordering::Relaxed);
        let job_id = given_id.unwrap_or_else(|| fresh_id(seq));
        let mut st = inner.lock();
        if !inner.accepting.load(Ordering::SeqCst) {
            return Err(RequestError::ShuttingDown);
        }
        if st.jobs.contains_key(&job_id) {
            return Err(RequestError::DuplicateId(job_id));
        }
        let queued = |j: &Job| matches!(j.phase, Phase::Queued(_));
        let pending_of_kind = st
            .jobs
            .values()
            .filter(|j| j.kind == kind && queued(j))
            .count() as u32;
        if pending_of_kind >= limits.max_pending {
            inner
                .metrics
                .refused_by_kind
                .with_label_values(&[kind.name()])
                .inc();
            return Err(RequestError::QueueFull {
                kind,
                pending: pending_of_kind,
            });
        }
        let queue_position = st.jobs.values().filter(|j| queued(j)).count() as u32;
        // Jobs of lower priority do not stand ahead of it.
        let behind = st
            .queue
            .iter()
            .filter(|(p, _, id)| *p < priority && st.jobs.get(id).is_some_and(queued))
            .count() as u32;
        st.jobs.insert(
            job_id.clone(),
            Job {
                kind,
                seq,
                submitted: Instant::now(),
                phase: Phase::Queued(prepared),
                cancel_requested: false,
                abandoned: false,
                finished_at: None,
                wakers: Vec::new(),
            },
        );
        st.queue.push((priority, Reverse(seq), job_id.clone()));
        inner
            .metrics
            .submitted_by_kind
            .with_label_values(&[kind.name()])
            .inc();
        tracing::info!(job_id, %kind, %priority, "job accepted");
        self.sweep(&mut st);
        self.dispatch(&mut st);
        self.update_gauges(&st);
        Ok(Submitted {
            job_id,
            queue_position: queue_position - behind,
        })
    }

    /// Admits queued jobs while there is room.
    fn dispatch(&self, st: &mut State) {
        while st.running < self.inner.cfg.max_running_jobs {
            let Some((_, _, id)) = st.queue.pop() else {
                return;
            };
            let Some(job) = st.jobs.get_mut(&id) else {
                continue;
            };
            if !matches!(job.phase, Phase::Queued(_)) {
                continue;
            }
            let Phase::Queued(prepared) = std::mem::replace(&mut job.phase, Phase::Loading) else {
                continue;
            };
            st.running += 1;
            let (kind, seq) = (job.kind, job.seq);
            let service = self.clone();
            let thread_id = id.clone();
            // Named by the service's own sequence number: nothing a caller sent
            // names a thread (a NUL byte in a name panics `spawn`).
            let spawned = std::thread::Builder::new()
                .name(format!("cuzk-job-{seq}"))
                .spawn(move || service.run_job(&thread_id, kind, prepared));
            if let Err(e) = spawned {
                let result = failed(&id, kind, format!("could not start a job thread: {e}"));
                self.finish_locked(st, &id, result);
            }
        }
    }

    /// One admitted job, on its own thread.
    fn run_job(&self, id: &str, kind: ProofKind, prepared: Box<dyn PreparedProof>) {
        let inner = &self.inner;
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.prove(id, kind, prepared)
        }))
        .unwrap_or_else(|panic| {
            let why = panic_text(&*panic);
            failed(id, kind, format!("the {kind} prover panicked: {why}"))
        });
        let mut st = inner.lock();
        self.finish_locked(&mut st, id, result);
    }

    fn prove(&self, id: &str, kind: ProofKind, prepared: Box<dyn PreparedProof>) -> JobResult {
        let inner = &self.inner;
        let submitted = inner.lock().jobs.get(id).map(|j| j.submitted);
        let submitted = submitted.unwrap_or_else(Instant::now);
        let timing_only = std::cell::Cell::new(false);
        let done = |status, proof, error: String, timings: Timings| JobResult {
            job_id: id.to_owned(),
            kind,
            status,
            proof,
            timing_only: timing_only.get(),
            error,
            timings: Timings {
                total: submitted.elapsed(),
                ..timings
            },
        };
        let prover = inner.kinds[&kind].clone();
        let circuit_id = prepared.circuit_id().to_owned();
        let (hold, srs_load) = match inner.params.acquire(&prover, &circuit_id) {
            Ok(x) => x,
            Err(why) => {
                let error = format!("loading the parameters of `{circuit_id}` failed: {why}");
                return done(JobStatus::Failed, Vec::new(), error, Timings::default());
            }
        };
        inner
            .metrics
            .srs_load_seconds
            .observe(srs_load.as_secs_f64());
        timing_only.set(hold.params().timing_only);
        let mut timings = Timings {
            srs_load,
            ..Timings::default()
        };
        if self.cancel_requested(id) {
            timings.queue_wait = submitted.elapsed();
            return done(JobStatus::Cancelled, Vec::new(), cancelled_msg(), timings);
        }
        let Some(engine) = inner.engine() else {
            let error = "the engine has shut down".to_owned();
            return done(JobStatus::Failed, Vec::new(), error, timings);
        };
        let handed_over = submitted.elapsed();
        let running = match prepared.start(&engine, hold.params()) {
            Ok(r) => r,
            Err(why) => return done(JobStatus::Failed, Vec::new(), why, timings),
        };
        let engine_job = running.engine_job();
        let cancel_now = {
            let mut st = inner.lock();
            match st.jobs.get_mut(id) {
                Some(job) => {
                    job.phase = Phase::Running { engine_job };
                    job.cancel_requested
                }
                None => true,
            }
        };
        if let (true, Some(j)) = (cancel_now, engine_job) {
            engine.cancel(j);
        }
        drop(engine);
        let mut outcome = running.wait();
        // Work outside the engine cannot be stopped: a job cancelled while it ran
        // has finished by now, and its result is discarded.
        if engine_job.is_none() && outcome.is_ok() && self.cancel_requested(id) {
            outcome = Err(ProofFailure::Cancelled);
        }
        let stages = engine_job
            .map(|j| inner.metrics.take_job(j))
            .unwrap_or_default();
        // The parameter set may be evicted from here on (and its device copies
        // freed with it when the budget evicts it).
        drop(hold);
        if inner.params.trim() > 0 {
            if let Some(e) = inner.engine() {
                e.forget_dropped_params();
            }
        }
        let ms = |x: f64| Duration::from_micros((x * 1e3).max(0.0) as u64);
        timings.synthesis = ms(stages.synthesis_ms);
        timings.gpu_compute = ms(stages.gpu_ms);
        // The service's queue (wall time to the hand-over, less the parameter
        // load), plus the engine's queues as its TIMELINE saw them.
        let engine_wait = match (stages.submit_ms, stages.first_synth_ms) {
            (Some(s), Some(f)) => ms(f - s),
            _ => Duration::ZERO,
        };
        timings.queue_wait = handed_over.saturating_sub(srs_load) + engine_wait;
        match outcome {
            Ok(proof) => done(JobStatus::Completed, proof, String::new(), timings),
            Err(ProofFailure::Cancelled) => {
                done(JobStatus::Cancelled, Vec::new(), cancelled_msg(), timings)
            }
            Err(ProofFailure::Failed(why)) => done(JobStatus::Failed, Vec::new(), why, timings),
        }
    }

    fn cancel_requested(&self, id: &str) -> bool {
        self.inner
            .lock()
            .jobs
            .get(id)
            .is_none_or(|j| j.cancel_requested)
    }

    /// Records `result` for `id`, wakes its waiters, admits the next job.
    fn finish_locked(&self, st: &mut State, id: &str, result: JobResult) {
        let inner = &self.inner;
        let m = &inner.metrics;
        let kind = result.kind.name();
        match result.status {
            JobStatus::Completed => {
                m.completed.inc();
                m.completed_by_kind.with_label_values(&[kind]).inc();
                if result.timing_only {
                    m.timing_only_proofs.inc();
                }
                m.proof_seconds
                    .with_label_values(&[kind])
                    .observe(result.timings.total.as_secs_f64());
            }
            JobStatus::Failed => {
                m.failed.inc();
                m.failed_by_kind.with_label_values(&[kind]).inc();
            }
            JobStatus::Cancelled => m.cancelled.inc(),
        }
        if result.status != JobStatus::Cancelled {
            m.queue_wait_seconds
                .observe(result.timings.queue_wait.as_secs_f64());
        }
        tracing::info!(
            job_id = id,
            kind,
            status = ?result.status,
            timing_only = result.timing_only,
            error = result.error.as_str(),
            total_ms = result.timings.total.as_millis() as u64,
            "job finished"
        );
        if let Some(job) = st.jobs.get_mut(id) {
            let was_admitted = matches!(job.phase, Phase::Loading | Phase::Running { .. });
            if was_admitted {
                st.running -= 1;
            }
            let job = st.jobs.get_mut(id).expect("present");
            for w in job.wakers.drain(..) {
                w.wake();
            }
            if job.abandoned {
                st.jobs.remove(id);
            } else {
                job.phase = Phase::Done(result);
                job.finished_at = Some(Instant::now());
            }
        }
        inner.changed.notify_all();
        self.dispatch(st);
        self.update_gauges(st);
    }

    /// Drops results nobody awaited within the TTL.
    fn sweep(&self, st: &mut State) {
        let ttl = self.inner.cfg.result_ttl;
        st.jobs
            .retain(|_, j| j.finished_at.is_none_or(|t| t.elapsed() < ttl));
    }

    fn update_gauges(&self, st: &State) {
        let queued = st
            .jobs
            .values()
            .filter(|j| matches!(j.phase, Phase::Queued(_)))
            .count();
        let waiting = st
            .jobs
            .values()
            .filter(|j| matches!(j.phase, Phase::Done(_)))
            .count();
        self.inner.metrics.queue_depth.set(queued as i64);
        self.inner.metrics.results_waiting.set(waiting as i64);
        self.inner.metrics.running_jobs.set(st.running as i64);
    }

    /// Takes `id`'s result if it is finished.
    fn take_if_done(
        &self,
        id: &str,
        waker: Option<&Waker>,
    ) -> Result<Option<JobResult>, JobLookupError> {
        let mut st = self.inner.lock();
        let job = st
            .jobs
            .get_mut(id)
            .ok_or_else(|| JobLookupError::NotFound(id.to_owned()))?;
        if let Phase::Done(_) = job.phase {
            let Some(Job {
                phase: Phase::Done(result),
                ..
            }) = st.jobs.remove(id)
            else {
                unreachable!("checked just above under the same lock")
            };
            self.update_gauges(&st);
            return Ok(Some(result));
        }
        if let Some(w) = waker {
            if !job.wakers.iter().any(|x| x.will_wake(w)) {
                job.wakers.push(w.clone());
            }
        }
        Ok(None)
    }

    /// A future of `id`'s result: the result is handed over once, to the first
    /// caller that gets it; dropping the future before then changes nothing.
    /// Use any runtime's timeout around it.
    pub fn result(&self, id: &str) -> JobFuture {
        JobFuture {
            service: self.clone(),
            id: id.to_owned(),
        }
    }

    /// Blocks for `id`'s result, at most `timeout` (`None`: for ever);
    /// `Ok(None)` if the time ran out (the job goes on).
    pub fn wait_blocking(
        &self,
        id: &str,
        timeout: Option<Duration>,
    ) -> Result<Option<JobResult>, JobLookupError> {
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            if let Some(r) = self.take_if_done(id, None)? {
                return Ok(Some(r));
            }
            let st = self.inner.lock();
            // Re-checked under the lock the finisher notifies under.
            match st.jobs.get(id) {
                None => return Err(JobLookupError::NotFound(id.to_owned())),
                Some(j) if matches!(j.phase, Phase::Done(_)) => continue,
                Some(_) => {}
            }
            match deadline {
                None => drop(
                    self.inner
                        .changed
                        .wait(st)
                        .unwrap_or_else(PoisonError::into_inner),
                ),
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Ok(None);
                    }
                    drop(
                        self.inner
                            .changed
                            .wait_timeout(st, left)
                            .unwrap_or_else(PoisonError::into_inner),
                    );
                }
            }
        }
    }

    /// Cancels `id`: a queued job is dropped at once; an admitted one is cancelled
    /// on the engine (partitions not yet on the GPU are dropped, those on it are
    /// discarded when they return, memory freed). Returns whether it had been
    /// admitted. A finished job is left as it is (`Ok(false)`).
    pub fn cancel(&self, id: &str) -> Result<bool, JobLookupError> {
        let mut st = self.inner.lock();
        let job = st
            .jobs
            .get_mut(id)
            .ok_or_else(|| JobLookupError::NotFound(id.to_owned()))?;
        match job.phase {
            Phase::Queued(_) => {
                let result = JobResult {
                    job_id: id.to_owned(),
                    kind: job.kind,
                    status: JobStatus::Cancelled,
                    proof: Vec::new(),
                    timing_only: false,
                    error: cancelled_msg(),
                    timings: Timings {
                        total: job.submitted.elapsed(),
                        ..Timings::default()
                    },
                };
                self.finish_locked(&mut st, id, result);
                Ok(false)
            }
            Phase::Loading => {
                job.cancel_requested = true;
                Ok(true)
            }
            Phase::Running { engine_job } => {
                job.cancel_requested = true;
                drop(st);
                // Without an engine job (an aggregation), the work runs to its
                // end and its result is discarded (`prove`).
                if let (Some(engine), Some(j)) = (self.inner.engine(), engine_job) {
                    engine.cancel(j);
                }
                Ok(true)
            }
            Phase::Done(_) => Ok(false),
        }
    }

    /// Nobody will await `id` (its caller went away): it is cancelled if not
    /// finished, and its result is dropped instead of kept.
    pub fn abandon(&self, id: &str) {
        {
            let mut st = self.inner.lock();
            let Some(job) = st.jobs.get_mut(id) else {
                return;
            };
            if matches!(job.phase, Phase::Done(_)) {
                st.jobs.remove(id);
                self.update_gauges(&st);
                return;
            }
            job.abandoned = true;
        }
        let _ = self.cancel(id);
        // A queued job finished inside `cancel`, before it was marked abandoned
        // could take effect; drop its result too.
        let mut st = self.inner.lock();
        if st
            .jobs
            .get(id)
            .is_some_and(|j| matches!(j.phase, Phase::Done(_)))
        {
            st.jobs.remove(id);
        }
        self.update_gauges(&st);
    }

    /// Loads `circuit_id`'s parameters: `(already_loaded, time spent)`.
    pub fn preload(&self, circuit_id: &str) -> Result<(bool, Duration), ParamsError> {
        let prover = self.prover_for(circuit_id)?;
        self.inner
            .params
            .preload(&prover, circuit_id)
            .map_err(|why| ParamsError::Load {
                circuit_id: circuit_id.to_owned(),
                why,
            })
    }

    /// Drops `circuit_id`'s parameters if no job uses them: `Some(bytes freed)`,
    /// `None` if they were not loaded. The bytes are the host's (the set, with
    /// the kind's own copy released) plus what the engine's backends kept of its
    /// bases (device copies; the CPU backend's fixed-base tables), freed through them.
    pub fn evict(&self, circuit_id: &str) -> Result<Option<u64>, ParamsError> {
        self.prover_for(circuit_id)?;
        let Some(host) = self.inner.params.evict(circuit_id)? else {
            return Ok(None);
        };
        let device = self.inner.engine().map_or(0, |e| e.forget_dropped_params());
        tracing::info!(circuit_id, host, device, "parameters evicted");
        Ok(Some(host + device))
    }

    fn prover_for(&self, circuit_id: &str) -> Result<Arc<dyn KindProver>, ParamsError> {
        let mut kinds: Vec<_> = self.inner.kinds.values().collect();
        kinds.sort_by_key(|k| k.kind());
        kinds
            .iter()
            .find(|k| k.knows_circuit(circuit_id))
            .map(|k| (*k).clone())
            .ok_or_else(|| ParamsError::UnknownCircuit {
                circuit_id: circuit_id.to_owned(),
                examples: "porep-32g, porep-2k, synthetic-mul-10".into(),
            })
    }

    /// Queues, parameter sets, GPUs, counters.
    pub fn status(&self) -> Status {
        let inner = &self.inner;
        let on_gpu = inner.metrics.jobs_on_gpus();
        let st = inner.lock();
        let mut queues: Vec<QueueStatus> = ProofKind::ALL
            .iter()
            .filter(|k| inner.kinds.contains_key(k))
            .map(|&kind| QueueStatus {
                kind,
                pending: 0,
                in_progress: 0,
            })
            .collect();
        let mut results_waiting = 0;
        let mut by_engine_job = HashMap::new();
        for (id, j) in &st.jobs {
            let q = queues.iter_mut().find(|q| q.kind == j.kind);
            match (&j.phase, q) {
                (Phase::Queued(_), Some(q)) => q.pending += 1,
                (Phase::Loading, Some(q)) => q.in_progress += 1,
                (Phase::Running { engine_job }, Some(q)) => {
                    q.in_progress += 1;
                    if let Some(e) = engine_job {
                        by_engine_job.insert(*e, (id.clone(), j.kind));
                    }
                }
                (Phase::Done(_), _) => results_waiting += 1,
                _ => {}
            }
        }
        drop(st);
        let engine = inner.engine();
        let gpus = engine
            .as_deref()
            .map(engine_devices)
            .unwrap_or_default()
            .into_iter()
            .map(|info| GpuStatus {
                current_job: on_gpu
                    .get(&info.ordinal)
                    .and_then(|j| by_engine_job.get(j).cloned()),
                info,
            })
            .collect();
        let (used, total) = match &engine {
            Some(e) => (e.budget().used(), e.budget().total()),
            None => (0, 0),
        };
        Status {
            gpus,
            params: inner.params.status(),
            queues,
            completed: inner.metrics.completed.get(),
            failed: inner.metrics.failed.get(),
            cancelled: inner.metrics.cancelled.get(),
            uptime_seconds: inner.metrics.uptime_seconds(),
            budget_used_bytes: used,
            budget_total_bytes: total,
            results_waiting,
            timing_only_circuits: self.timing_only_circuits(),
        }
    }

    /// Every kind's timing-only circuit ids, sorted.
    pub fn timing_only_circuits(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .inner
            .kinds
            .values()
            .flat_map(|k| k.timing_only_circuits())
            .collect();
        ids.sort();
        ids
    }

    /// The Prometheus text of every metric.
    pub fn metrics_text(&self) -> String {
        self.inner.metrics.render()
    }

    /// GPU workers of the engine (devices × workers per device).
    pub fn gpu_workers(&self) -> usize {
        self.inner.gpu_workers
    }

    /// Stops accepting jobs; in [`ShutdownMode::Cancel`] also cancels every job
    /// accepted. Returns at once (the waiting is [`shutdown`](Service::shutdown)'s).
    pub fn begin_shutdown(&self, mode: ShutdownMode) {
        self.inner.accepting.store(false, Ordering::SeqCst);
        if mode == ShutdownMode::Cancel {
            self.cancel_unfinished();
        }
    }

    fn cancel_unfinished(&self) {
        let ids: Vec<String> = self
            .inner
            .lock()
            .jobs
            .iter()
            .filter(|(_, j)| !matches!(j.phase, Phase::Done(_)))
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            let _ = self.cancel(&id);
        }
    }

    /// Stops accepting jobs and finishes or cancels those accepted, blocking until
    /// none is queued or running (at most `timeout`, after which the rest are
    /// cancelled); then stops the engine. Results not yet awaited can still be
    /// taken until the service is dropped.
    pub fn shutdown(&self, mode: ShutdownMode, timeout: Duration) {
        let inner = &self.inner;
        self.begin_shutdown(mode);
        let deadline = Instant::now() + timeout;
        let mut st = inner.lock();
        let mut cancelled = mode == ShutdownMode::Cancel;
        loop {
            let busy = st.running > 0
                || st
                    .jobs
                    .values()
                    .any(|j| matches!(j.phase, Phase::Queued(_)));
            if !busy {
                break;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() && !cancelled {
                drop(st);
                tracing::warn!("shutdown: jobs still running at the deadline are cancelled");
                self.cancel_unfinished();
                cancelled = true;
                st = inner.lock();
                continue;
            }
            let wait = if left.is_zero() {
                Duration::from_millis(100)
            } else {
                left
            };
            st = inner
                .changed
                .wait_timeout(st, wait)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        drop(st);
        // Dropping the last handle joins the engine's threads.
        let engine = inner
            .engine
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        drop(engine);
    }
}

/// One entry per device lane of `engine`, in lane order ([`crate::gpus`]: what
/// the backend reported, free memory from NVML; no device is opened).
fn engine_devices(engine: &PipelineEngine) -> Vec<GpuInfo> {
    engine
        .device_infos()
        .into_iter()
        .map(|(ordinal, reported)| crate::gpus::lane_info(ordinal, reported))
        .collect()
}

/// The future of [`Service::result`].
pub struct JobFuture {
    service: Service,
    id: String,
}

impl Future for JobFuture {
    type Output = Result<JobResult, JobLookupError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.service.take_if_done(&self.id, Some(cx.waker())) {
            Ok(Some(r)) => Poll::Ready(Ok(r)),
            Ok(None) => Poll::Pending,
            Err(e) => Poll::Ready(Err(e)),
        }
    }
}

fn failed(id: &str, kind: ProofKind, error: String) -> JobResult {
    JobResult {
        job_id: id.to_owned(),
        kind,
        status: JobStatus::Failed,
        proof: Vec::new(),
        timing_only: false,
        error,
        timings: Timings::default(),
    }
}

/// A caught panic's message.
/// The checks of a request that need no service state, in the order
/// [`Service::submit`] runs them: the `request_id` ([`check_request_id`]), the
/// request's bytes against `limits`, then the kind's own check
/// ([`KindProver::prepare`], with the kind's default priority where the request
/// names none; a panic in it is a malformed request). `submit` runs exactly these
/// before it counts anything; an entry that must know a request is sound before
/// a service exists runs them too (`cuzk queue submit` before a job is queued,
/// `cuzk c2`/`snap`/`post` before they compile its circuit and plan the engine
/// for it), so a request is refused the same way, with the same error, wherever
/// it enters.
pub fn check_request(
    prover: &dyn KindProver,
    limits: KindLimits,
    mut request: ProofRequest,
) -> Result<Box<dyn PreparedProof>, RequestError> {
    let kind = prover.kind();
    if let Some(id) = &request.request_id {
        check_request_id(id)?;
    }
    let bytes = request.payload_bytes();
    if bytes > limits.max_request_bytes {
        return Err(RequestError::TooLarge {
            kind,
            bytes,
            limit: limits.max_request_bytes,
        });
    }
    request.priority.get_or_insert(kind.default_priority());
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| prover.prepare(request)))
        .unwrap_or_else(|panic| {
            Err(RequestError::Malformed {
                kind,
                why: format!("its check panicked: {}", panic_text(&*panic)),
            })
        })
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

fn cancelled_msg() -> String {
    "the job was cancelled".into()
}

fn unsupported_reason(kind: ProofKind) -> String {
    match kind {
        ProofKind::PorepSealCommit => {
            "this build has no PoRep prover (the Filecoin adapter, cuzk-filecoin, is not linked in)"
                .into()
        }
        ProofKind::SnapDealsUpdate
        | ProofKind::WindowPostPartition
        | ProofKind::WinningPost
        | ProofKind::NiPorepSealCommit
        | ProofKind::SealAggregate => {
            format!("this daemon has no {kind} prover (the Filecoin adapter, cuzk-filecoin, serves it; `cuzk serve` registers it); no proof is faked")
        }
        ProofKind::Synthetic => {
            "the synthetic test kind is off; set `synthetic = true` in [daemon] to serve it".into()
        }
    }
}

/// A fresh job id: the sequence number and 64 random bits, so ids differ across
/// restarts of the daemon.
fn fresh_id(seq: u64) -> String {
    format!("job-{seq}-{:016x}", rand::random::<u64>())
}
