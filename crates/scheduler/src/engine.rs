//! The pipelined engine: many partitions of many jobs in flight at once.
//!
//! ```text
//! submit ─► synth queue ─► synthesis workers (synth_jobs, on the synth pool):
//!   (job, partition)         budget permit → witness → spmv → prep_msm
//!   oldest first        ─► GPU queue ─► GPU workers (gpu_workers_per_device × devices):
//!                            b_g2_msm handed to its pool, lock, backend call, unlock
//!                       ─► finisher: wait b_g2 → assembly → verify → dealloc → permit back
//! ```
//!
//! Both queues are ordered by (job sequence, partition), so the oldest job's lowest
//! partition always goes first and a job finishes before later ones crowd it out.
//! `b_g2_msm` runs on its own pool while the GPU worker is already on the next
//! partition; the throttle is raised while any `b_g2_msm` runs. Every transition is
//! an event in the TIMELINE [`Recorder`].

use std::{
    cmp::Reverse,
    collections::{BinaryHeap, HashMap},
    sync::{
        atomic::{AtomicU64, AtomicUsize, Ordering},
        Arc, Condvar, Mutex, PoisonError,
    },
    thread::JoinHandle,
    time::Instant,
};

use bellpepper_core::Circuit;
use blstrs::{G2Projective, Scalar};
use crossbeam_channel::{bounded, unbounded, Receiver, Sender};
use cuzk_alloc::{Abc, DeallocPolicy, Released, ThrottleControl, Witness};
use cuzk_assembly::ProofPoints;
use cuzk_gpu_backend::{
    lock::{GpuLock, Region},
    GpuBackend, PartitionResult,
};
use cuzk_synth::{SynthError, Throttle};
use cuzk_timeline::{EventKind as Ev, Recorder};
use rayon::ThreadPool;

use crate::{
    budget::{BudgetError, MemoryBudget, Permit},
    srs::{Srs, SrsError},
    stages::{
        assembly_stage, b_g2_msm, gpu_stage, gpu_stage_ref, prep_stage, query_bases, spmv_stage,
        stage_abc, ProveError, Splits, StageTimes,
    },
};
use cuzk_synth::R1cs;

/// A throttle: the read side (`spmv_parallel` checks it) and the raise side
/// (`b_g2_msm` raises it while it runs).
pub trait ThrottlePolicy: Throttle + ThrottleControl {}
impl<T: Throttle + ThrottleControl + ?Sized> ThrottlePolicy for T {}

/// No throttling.
#[derive(Clone, Copy, Debug, Default)]
pub struct Unthrottled;

impl Throttle for Unthrottled {
    fn checkpoint(&self, _worker: usize) {}
}

impl ThrottleControl for Unthrottled {
    fn raise(&self) {}
    fn lower(&self) {}
}

/// The engine's knobs.
#[derive(Clone, Debug)]
pub struct PipelineConfig {
    /// Partitions in synthesis at once; `None`: chosen from the cores and the work
    /// (see [`PipelineConfig::synth_jobs`]'s resolution in the engine).
    pub synth_jobs: Option<usize>,
    /// Threads of the synthesis pool (spmv, prep_msm); 0: all cores.
    pub synth_threads: usize,
    /// GPU workers per device (the C2 history settled on 2).
    pub gpu_workers_per_device: usize,
    /// Threads of the `b_g2_msm` pool (the C2 history: 32 beat 192); 0: all cores.
    pub gpu_threads: usize,
    /// Bytes all partitions in flight may hold; `None`: RAM less a margin.
    pub memory_budget: Option<u64>,
    /// Verify every proof before returning it.
    pub verify: bool,
    /// Check `a·b = c` before the MSMs.
    pub check_witness: bool,
    /// B in G2 on the backend instead of the CPU pool: `Some(true)` where the
    /// backend offers it, `Some(false)` never, `None` by the backend's capabilities
    /// ([`b_g2_on_backend`](crate::b_g2_on_backend)).
    pub b_g2_on_backend: Option<bool>,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        Self {
            synth_jobs: None,
            synth_threads: 0,
            gpu_workers_per_device: 2,
            gpu_threads: 0,
            memory_budget: None,
            verify: true,
            check_witness: false,
            b_g2_on_backend: None,
        }
    }
}

/// The swappable strategies.
#[derive(Clone)]
pub struct Policies {
    pub backend: Arc<dyn GpuBackend>,
    pub dealloc: Arc<dyn DeallocPolicy>,
    pub throttle: Arc<dyn ThrottlePolicy>,
    pub lock: Arc<dyn GpuLock>,
}

/// Something that computes a partition's witness: any circuit.
pub trait WitnessSource: Send {
    /// The witness, checked against `r1cs`'s shape (counts of inputs, aux and
    /// constraints).
    fn synthesize(self: Box<Self>, r1cs: &R1cs) -> Result<Witness, SynthError>;
}

impl<C: Circuit<Scalar> + Send> WitnessSource for C {
    fn synthesize(self: Box<Self>, r1cs: &R1cs) -> Result<Witness, SynthError> {
        cuzk_synth::synthesize_witness_for(r1cs, *self)
    }
}

/// Checks a proof (the facade plugs bellperson's verifier in here).
pub trait ProofVerifier: Send + Sync {
    /// `Ok(true)` if the proof verifies for `public_inputs` (without the one).
    fn verify(&self, proof: &ProofPoints, public_inputs: &[Scalar]) -> Result<bool, String>;
}

/// One partition of a job.
pub struct PartitionSpec {
    pub circuit: Box<dyn WitnessSource>,
    pub r: Scalar,
    pub s: Scalar,
    /// For verification (without the one).
    pub public_inputs: Vec<Scalar>,
}

/// A job: one proof of several partitions of one circuit shape.
pub struct JobSpec {
    pub r1cs: Arc<R1cs>,
    pub srs: Arc<Srs>,
    pub partitions: Vec<PartitionSpec>,
    pub verifier: Option<Arc<dyn ProofVerifier>>,
}

/// A finished job: its partitions' proofs, in partition order.
#[derive(Clone, Debug)]
pub struct JobOutput {
    pub job: u64,
    pub proofs: Vec<ProofPoints>,
    pub times: Vec<StageTimes>,
    /// Whether every proof was verified before being returned.
    pub verified: bool,
}

/// Why a job did not produce its proofs.
#[derive(Debug, Clone, thiserror::Error)]
pub enum JobError {
    #[error("partition {partition} failed: {message}")]
    Partition { partition: u32, message: String },
    #[error(transparent)]
    Budget(#[from] BudgetError),
    #[error("the parameters do not fit the circuit: {0}")]
    Params(#[from] SrsError),
    #[error("the job was cancelled")]
    Cancelled,
    #[error("the engine shut down before the job finished")]
    ShutDown,
    #[error("a job needs at least one partition")]
    Empty,
}

/// Waits for a job's result.
#[derive(Debug)]
pub struct JobHandle {
    id: u64,
    rx: Receiver<Result<JobOutput, JobError>>,
}

impl JobHandle {
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Blocks until the job is done, failed or cancelled.
    pub fn wait(self) -> Result<JobOutput, JobError> {
        self.rx.recv().unwrap_or(Err(JobError::ShutDown))
    }

    /// The result if the job is over.
    pub fn try_wait(&self) -> Option<Result<JobOutput, JobError>> {
        self.rx.try_recv().ok()
    }
}

/// Bytes a partition of `r1cs` holds at its peak: witness, a/b/c, the H
/// evaluations a CPU backend pads to the domain, and the splits.
pub fn partition_bytes(r1cs: &R1cs) -> u64 {
    let vars = (r1cs.num_inputs() + r1cs.num_aux()) as u64;
    let n = r1cs.num_constraints() as u64;
    let domain = n.max(1).next_power_of_two();
    let scalar = 32u64;
    let witness = vars * scalar;
    let abc = 3 * n * scalar;
    let h = 3 * domain * scalar;
    // Each split: a bitmap and, at worst, every variable in the tail (index + limbs).
    let splits = 3 * (vars / 8 + vars * (4 + scalar));
    witness + abc + h + splits
}

// ---------------------------------------------------------------------------
// Queues.

struct Prioritised<T> {
    key: (u64, u32),
    item: T,
}

impl<T> PartialEq for Prioritised<T> {
    fn eq(&self, o: &Self) -> bool {
        self.key == o.key
    }
}
impl<T> Eq for Prioritised<T> {}
impl<T> PartialOrd for Prioritised<T> {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl<T> Ord for Prioritised<T> {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.key.cmp(&o.key)
    }
}

/// A blocking min-queue on (job sequence, partition).
struct WorkQueue<T> {
    state: Mutex<(BinaryHeap<Reverse<Prioritised<T>>>, bool)>,
    ready: Condvar,
}

impl<T> WorkQueue<T> {
    fn new() -> Self {
        Self {
            state: Mutex::new((BinaryHeap::new(), false)),
            ready: Condvar::new(),
        }
    }

    fn push(&self, key: (u64, u32), item: T) {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        st.0.push(Reverse(Prioritised { key, item }));
        drop(st);
        self.ready.notify_one();
    }

    /// The smallest item; `None` once closed and empty.
    fn pop(&self) -> Option<T> {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(Reverse(p)) = st.0.pop() {
                return Some(p.item);
            }
            if st.1 {
                return None;
            }
            st = self.ready.wait(st).unwrap_or_else(PoisonError::into_inner);
        }
    }

    fn close(&self) {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).1 = true;
        self.ready.notify_all();
    }

    fn drain(&self) -> Vec<T> {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        std::mem::take(&mut st.0)
            .into_iter()
            .map(|r| r.0.item)
            .collect()
    }
}

// ---------------------------------------------------------------------------
// Jobs.

struct JobShared {
    id: u64,
    r1cs: Arc<R1cs>,
    srs: Arc<Srs>,
    verifier: Option<Arc<dyn ProofVerifier>>,
    bytes: u64,
}

struct JobState {
    shared: Arc<JobShared>,
    results: Vec<Option<(ProofPoints, StageTimes)>>,
    remaining: usize,
    tx: Sender<Result<JobOutput, JobError>>,
    /// Set once the job failed or was cancelled: its other partitions are skipped.
    over: bool,
}

struct SynthItem {
    job: Arc<JobShared>,
    partition: u32,
    spec: PartitionSpec,
}

/// What a partition carries from synthesis to the finisher, besides `a, b, c`.
struct Carry {
    job: Arc<JobShared>,
    partition: u32,
    splits: Arc<Splits>,
    r: Scalar,
    s: Scalar,
    public_inputs: Vec<Scalar>,
    permit: Permit,
    times: StageTimes,
    started: Instant,
}

struct GpuItem {
    abc: Abc,
    carry: Carry,
}

type BG2Result = Result<G2Projective, ProveError>;

struct FinishItem {
    gpu: Result<PartitionResult, ProveError>,
    b_g2: Option<Receiver<(BG2Result, std::time::Duration)>>,
    carry: Carry,
}

struct Shared {
    cfg: PipelineConfig,
    policies: Policies,
    recorder: Arc<Recorder>,
    budget: Arc<MemoryBudget>,
    synth_pool: Arc<ThreadPool>,
    b_g2_pool: Arc<ThreadPool>,
    synth_q: WorkQueue<SynthItem>,
    gpu_q: WorkQueue<GpuItem>,
    jobs: Mutex<HashMap<u64, JobState>>,
    next_job: AtomicU64,
    /// `b_g2_msm`s running now: the throttle is up while this is non-zero.
    b_g2_running: Arc<AtomicUsize>,
}

impl Shared {
    /// One TIMELINE event; the argument list is the event's fields, in the
    /// recorder's order.
    #[allow(clippy::too_many_arguments)]
    fn rec(
        &self,
        ev: Ev,
        job: u64,
        p: u32,
        worker: Option<u32>,
        dev: Option<u32>,
        bytes: Option<u64>,
        detail: &str,
    ) {
        self.recorder.record(ev, job, p, worker, dev, bytes, detail);
    }

    /// Whether the job has failed or been cancelled (or is unknown).
    fn is_over(&self, job: u64) -> bool {
        let jobs = self.jobs.lock().unwrap_or_else(PoisonError::into_inner);
        jobs.get(&job).is_none_or(|j| j.over)
    }

    /// Ends a job with `err` (first error wins).
    fn fail(&self, job: u64, err: JobError) {
        let mut jobs = self.jobs.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(state) = jobs.get_mut(&job) {
            if !state.over {
                state.over = true;
                let ev = if matches!(err, JobError::Cancelled) {
                    Ev::JobCancelled
                } else {
                    Ev::JobFailed
                };
                self.rec(ev, job, 0, None, None, None, &err.to_string());
                let _ = state.tx.send(Err(err));
            }
            if state.remaining == 0 {
                jobs.remove(&job);
            }
        }
    }

    /// A partition left the pipeline (done or skipped).
    fn partition_left(&self, job: u64, partition: u32, result: Option<(ProofPoints, StageTimes)>) {
        let mut jobs = self.jobs.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(state) = jobs.get_mut(&job) else {
            return;
        };
        state.remaining -= 1;
        if let Some(r) = result {
            state.results[partition as usize] = Some(r);
        }
        if state.remaining == 0 {
            let state = jobs.remove(&job).expect("present");
            if !state.over {
                let (proofs, times) = state
                    .results
                    .into_iter()
                    .map(|r| r.expect("every partition of a job that is not over has a result"))
                    .unzip();
                self.rec(Ev::JobDone, job, 0, None, None, None, "");
                let _ = state.tx.send(Ok(JobOutput {
                    job,
                    proofs,
                    times,
                    verified: self.cfg.verify && state.shared.verifier.is_some(),
                }));
            }
        }
    }

    fn dealloc(&self, job: u64, p: u32, buf: Released) {
        let bytes = buf.bytes() as u64;
        self.rec(
            Ev::DeallocStart,
            job,
            p,
            None,
            None,
            Some(bytes),
            buf.label(),
        );
        self.policies.dealloc.release(buf);
        self.rec(Ev::DeallocEnd, job, p, None, None, Some(bytes), "");
    }
}

/// The pipelined engine. Dropping it finishes the partitions in flight, fails the
/// jobs still queued with [`JobError::ShutDown`] and joins its threads.
pub struct PipelineEngine {
    shared: Arc<Shared>,
    threads: Vec<(&'static str, JoinHandle<()>)>,
    finish_tx: Option<Sender<FinishItem>>,
}

impl std::fmt::Debug for PipelineEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PipelineEngine")
            .field("config", &self.shared.cfg)
            .field("backend", &self.shared.policies.backend.capabilities().name)
            .field("budget", &self.shared.budget.total())
            .finish()
    }
}

/// The engine could not start.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error("could not build the {pool} thread pool: {message}")]
    ThreadPool { pool: &'static str, message: String },
    #[error("could not start a {what} thread: {source}")]
    Thread {
        what: &'static str,
        source: std::io::Error,
    },
    #[error("the configuration is invalid: {0}")]
    Config(String),
}

/// Partitions in synthesis at once when not set: half the synthesis pool's cores.
/// A partition's witness is one thread, its spmv and prep_msm use the whole pool,
/// so about two partitions per core pair keep the cores busy without thrashing
/// caches (the H200 machine's 16 vCPUs measured 6-8 best, BENCHMARKS.md).
fn auto_synth_jobs(synth_threads: usize) -> usize {
    let cores = match synth_threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    (cores / 2).max(1)
}

fn pool(threads: usize, name: &'static str) -> Result<Arc<ThreadPool>, PipelineError> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(move |i| format!("cuzk-{name}-{i}"))
        .build()
        .map(Arc::new)
        .map_err(|e| PipelineError::ThreadPool {
            pool: name,
            message: e.to_string(),
        })
}

impl PipelineEngine {
    /// Starts the engine's threads.
    pub fn start(
        cfg: PipelineConfig,
        policies: Policies,
        recorder: Arc<Recorder>,
    ) -> Result<Self, PipelineError> {
        if cfg.synth_jobs == Some(0) || cfg.gpu_workers_per_device == 0 {
            return Err(PipelineError::Config(
                "synth_jobs and gpu_workers_per_device must be at least 1".into(),
            ));
        }
        let devices = policies.backend.capabilities().devices.len().max(1);
        let synth_jobs = cfg
            .synth_jobs
            .unwrap_or_else(|| auto_synth_jobs(cfg.synth_threads));
        let shared = Arc::new(Shared {
            budget: MemoryBudget::new(
                cfg.memory_budget
                    .unwrap_or_else(MemoryBudget::default_total),
            ),
            synth_pool: pool(cfg.synth_threads, "synth")?,
            b_g2_pool: pool(cfg.gpu_threads, "b-g2")?,
            cfg,
            policies,
            recorder,
            synth_q: WorkQueue::new(),
            gpu_q: WorkQueue::new(),
            jobs: Mutex::new(HashMap::new()),
            next_job: AtomicU64::new(1),
            b_g2_running: Arc::new(AtomicUsize::new(0)),
        });
        let (finish_tx, finish_rx) = unbounded::<FinishItem>();
        let mut engine = PipelineEngine {
            shared: shared.clone(),
            threads: Vec::new(),
            finish_tx: Some(finish_tx.clone()),
        };
        let spawn = |name: String, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name)
                .spawn(f)
                .map_err(|source| PipelineError::Thread {
                    what: "worker",
                    source,
                })
        };
        for w in 0..synth_jobs {
            let sh = shared.clone();
            let h = spawn(
                format!("cuzk-synth-worker-{w}"),
                Box::new(move || synth_worker(&sh, w as u32)),
            )?;
            engine.threads.push(("synth", h));
        }
        for d in 0..devices {
            for w in 0..shared.cfg.gpu_workers_per_device {
                let sh = shared.clone();
                let tx = finish_tx.clone();
                let h = spawn(
                    format!("cuzk-gpu-{d}-{w}"),
                    Box::new(move || gpu_worker(&sh, d, w as u32, &tx)),
                )?;
                engine.threads.push(("gpu", h));
            }
        }
        drop(finish_tx);
        let sh = shared.clone();
        let h = spawn(
            "cuzk-finisher".into(),
            Box::new(move || finisher(&sh, &finish_rx)),
        )?;
        engine.threads.push(("finish", h));
        Ok(engine)
    }

    pub fn recorder(&self) -> &Arc<Recorder> {
        &self.shared.recorder
    }

    pub fn budget(&self) -> &MemoryBudget {
        &self.shared.budget
    }

    /// Queues a job. Its partitions start as synthesis workers and memory allow.
    pub fn submit(&self, job: JobSpec) -> JobHandle {
        let sh = &self.shared;
        let id = sh.next_job.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = bounded(1);
        let handle = JobHandle { id, rx };
        let n = job.partitions.len();
        sh.rec(
            Ev::JobSubmit,
            id,
            0,
            None,
            None,
            None,
            &format!("partitions={n}"),
        );
        let bytes = partition_bytes(&job.r1cs);
        let early = if n == 0 {
            Some(JobError::Empty)
        } else if let Err(e) = sh.budget.check(bytes) {
            Some(e.into())
        } else if let Err(e) = query_bases(&job.srs, &job.r1cs) {
            Some(e.into())
        } else {
            None
        };
        if let Some(err) = early {
            sh.rec(Ev::JobFailed, id, 0, None, None, None, &err.to_string());
            let _ = tx.send(Err(err));
            return handle;
        }
        let shared_job = Arc::new(JobShared {
            id,
            r1cs: job.r1cs,
            srs: job.srs,
            verifier: job.verifier,
            bytes,
        });
        sh.jobs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                id,
                JobState {
                    shared: shared_job.clone(),
                    results: vec![None; n],
                    remaining: n,
                    tx,
                    over: false,
                },
            );
        for (p, spec) in job.partitions.into_iter().enumerate() {
            let p = p as u32;
            sh.rec(Ev::SynthQueue, id, p, None, None, None, "");
            sh.synth_q.push(
                (id, p),
                SynthItem {
                    job: shared_job.clone(),
                    partition: p,
                    spec,
                },
            );
        }
        handle
    }

    /// Cancels a job: its waiting partitions are dropped, those in flight finish
    /// and are discarded, and its handle returns [`JobError::Cancelled`].
    pub fn cancel(&self, job: u64) {
        self.shared.fail(job, JobError::Cancelled);
    }
}

impl Drop for PipelineEngine {
    fn drop(&mut self) {
        let sh = &self.shared;
        // Jobs still waiting for synthesis will not run.
        for item in sh.synth_q.drain() {
            sh.fail(item.job.id, JobError::ShutDown);
            sh.partition_left(item.job.id, item.partition, None);
        }
        sh.synth_q.close();
        sh.budget.close();
        self.finish_tx.take();
        // Synthesis workers first (their partitions go on to the GPU queue), then the
        // GPU workers, then the finisher. Joining never panics: a worker that
        // panicked is reported and skipped.
        let mut threads = Vec::new();
        for (name, h) in std::mem::take(&mut self.threads) {
            if name == "synth" {
                if h.join().is_err() {
                    tracing::error!("a synthesis worker panicked");
                }
            } else {
                threads.push((name, h));
            }
        }
        sh.gpu_q.close();
        for (name, h) in threads {
            if h.join().is_err() {
                tracing::error!("a {name} thread panicked");
            }
        }
        sh.policies.dealloc.drain();
    }
}

// ---------------------------------------------------------------------------
// Workers.

fn synth_worker(sh: &Shared, w: u32) {
    while let Some(item) = sh.synth_q.pop() {
        let SynthItem {
            job,
            partition: p,
            spec,
        } = item;
        if sh.is_over(job.id) {
            sh.partition_left(job.id, p, None);
            continue;
        }
        let wk = Some(w);
        let bytes = job.bytes;
        let waits = sh.budget.would_wait(bytes);
        if waits {
            sh.rec(Ev::BudgetWaitStart, job.id, p, wk, None, Some(bytes), "");
        }
        let permit = match sh.budget.acquire(bytes) {
            Ok(Some(permit)) => permit,
            Ok(None) => {
                sh.fail(job.id, JobError::ShutDown);
                sh.partition_left(job.id, p, None);
                continue;
            }
            Err(e) => {
                sh.fail(job.id, e.into());
                sh.partition_left(job.id, p, None);
                continue;
            }
        };
        sh.rec(Ev::BudgetAcquired, job.id, p, wk, None, Some(bytes), "");
        let started = Instant::now();
        match synth_partition(sh, &job, p, w, spec, permit, started) {
            Ok(item) => {
                sh.rec(Ev::GpuQueue, job.id, p, None, None, None, "");
                sh.gpu_q.push((job.id, p), item);
            }
            Err(e) => {
                sh.fail(
                    job.id,
                    JobError::Partition {
                        partition: p,
                        message: e.to_string(),
                    },
                );
                sh.partition_left(job.id, p, None);
            }
        }
    }
}

fn synth_partition(
    sh: &Shared,
    job: &Arc<JobShared>,
    p: u32,
    w: u32,
    spec: PartitionSpec,
    permit: Permit,
    started: Instant,
) -> Result<GpuItem, ProveError> {
    let wk = Some(w);
    let mut times = StageTimes::default();
    sh.rec(Ev::SynthStart, job.id, p, wk, None, None, "");
    let t = Instant::now();
    let witness = catch("synthesis", || spec.circuit.synthesize(&job.r1cs))??;
    times.synthesis = t.elapsed();
    sh.rec(Ev::SynthEnd, job.id, p, wk, None, None, "");

    sh.rec(Ev::SpmvStart, job.id, p, wk, None, None, "");
    let t = Instant::now();
    let abc = catch("spmv", || {
        spmv_stage(
            &job.r1cs,
            &witness,
            &sh.synth_pool,
            sh.policies.throttle.as_ref(),
            sh.cfg.check_witness,
        )
    })??;
    times.spmv = t.elapsed();
    sh.rec(
        Ev::SpmvEnd,
        job.id,
        p,
        wk,
        None,
        Some(cuzk_alloc::HeapSize::heap_size(&abc) as u64),
        "",
    );

    sh.rec(Ev::PrepStart, job.id, p, wk, None, None, "");
    let t = Instant::now();
    let splits = catch("prep_msm", || {
        prep_stage(&job.r1cs, &witness, &sh.synth_pool)
    })??;
    times.prep_msm = t.elapsed();
    sh.rec(
        Ev::PrepEnd,
        job.id,
        p,
        wk,
        None,
        Some(splits.heap_size() as u64),
        "",
    );
    let t = Instant::now();
    sh.dealloc(job.id, p, Released::of(witness, "witness"));
    times.dealloc += t.elapsed();

    Ok(GpuItem {
        abc,
        carry: Carry {
            job: job.clone(),
            partition: p,
            splits: Arc::new(splits),
            r: spec.r,
            s: spec.s,
            public_inputs: spec.public_inputs,
            permit,
            times,
            started,
        },
    })
}

/// Runs `f`, turning a panic into [`ProveError::Panicked`].
fn catch<T>(stage: &'static str, f: impl FnOnce() -> T) -> Result<T, ProveError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .map_err(|_| ProveError::Panicked(stage))
}

fn gpu_worker(sh: &Shared, device: usize, w: u32, finish: &Sender<FinishItem>) {
    let (wk, dev) = (Some(w), Some(device as u32));
    // The finisher outlives the GPU workers (it is joined last), so a send fails only
    // during a panic elsewhere; the item is then dropped, freeing its buffers.
    let send = |gpu, b_g2, carry| {
        let _ = finish.send(FinishItem { gpu, b_g2, carry });
    };
    while let Some(GpuItem { abc, mut carry }) = sh.gpu_q.pop() {
        let (job, p) = (carry.job.clone(), carry.partition);
        if sh.is_over(job.id) {
            sh.dealloc(job.id, p, Released::of(abc, "abc"));
            let bytes = Some(carry.permit.bytes());
            sh.rec(Ev::BudgetReleased, job.id, p, None, None, bytes, "");
            drop(carry);
            sh.partition_left(job.id, p, None);
            continue;
        }
        sh.rec(Ev::GpuPickup, job.id, p, wk, dev, None, "");
        let g2_on_backend =
            crate::b_g2_on_backend(sh.cfg.b_g2_on_backend, &sh.policies.backend.capabilities());

        // b_g2_msm starts now on its own pool and overlaps this partition's GPU work
        // and the next one's.
        let b_g2 = (!g2_on_backend).then(|| spawn_b_g2(sh, &job, p, &carry.splits));

        // Staging (the CUDA backend pins a, b, c) runs before the lock is waited for,
        // so it overlaps another partition's GPU work instead of holding the device.
        let backend = sh.policies.backend.as_ref();
        let t = Instant::now();
        let (staged, stage_result) = stage_abc(backend, &abc);
        let took = t.elapsed().as_secs_f64() * 1e3;
        match &stage_result {
            Ok(()) if staged.is_staged() => {
                let detail = format!("ms={took:.3}");
                sh.rec(Ev::Staged, job.id, p, wk, dev, None, &detail);
            }
            Ok(()) => {}
            Err(why) => {
                let detail = format!("ms={took:.3} failed: {why}");
                sh.rec(Ev::Staged, job.id, p, wk, dev, None, &detail);
            }
        }
        // A staged partition lends a, b, c to the backend (`prove_partition_ref`)
        // and keeps them until the guard is gone; otherwise they are handed over.
        let mut abc = Some(abc);

        sh.rec(Ev::LockWaitStart, job.id, p, wk, dev, None, "");
        let guard = sh.policies.lock.partition(device);
        if let Some(why) = guard.failure() {
            let err = ProveError::Backend(cuzk_gpu_backend::BackendError::Device(format!(
                "the GPU lock failed: {why}"
            )));
            drop(guard);
            drop(staged);
            if let Some(abc) = abc {
                sh.dealloc(job.id, p, Released::of(abc, "abc"));
            }
            send(Err(err), b_g2, carry);
            continue;
        }
        let waited = guard.waited().as_secs_f64() * 1e3;
        let detail = format!("waited_ms={waited:.3}");
        sh.rec(Ev::LockAcquired, job.id, p, wk, dev, None, &detail);
        sh.rec(Ev::GpuStart, job.id, p, wk, dev, None, "");
        let t = Instant::now();
        let gpu = {
            let _compute = sh.policies.lock.region(device, Region::Compute);
            let lent = staged.is_staged();
            let owned = if lent { None } else { abc.take() };
            query_bases(&job.srs, &job.r1cs)
                .map_err(ProveError::from)
                .and_then(|bases| {
                    catch("gpu", || match (owned, &abc) {
                        (Some(owned), _) => {
                            gpu_stage(backend, owned, &bases, &carry.splits, g2_on_backend)
                        }
                        (None, Some(lent)) => {
                            gpu_stage_ref(backend, lent, &bases, &carry.splits, g2_on_backend)
                        }
                        // Not reachable: `abc` is taken only when it is handed over.
                        (None, None) => Err(cuzk_gpu_backend::BackendError::Device(
                            "internal: the partition's a, b, c were already handed over".into(),
                        )),
                    })?
                    .map_err(ProveError::from)
                })
        };
        carry.times.gpu = t.elapsed();
        sh.rec(Ev::GpuEnd, job.id, p, wk, dev, None, "");
        drop(guard);
        // After the backend call (and outside the lock): undo the staging, then free
        // what was lent.
        drop(staged);
        if let Some(abc) = abc {
            sh.dealloc(job.id, p, Released::of(abc, "abc"));
        }
        send(gpu, b_g2, carry);
    }
}

fn spawn_b_g2(
    sh: &Shared,
    job: &Arc<JobShared>,
    p: u32,
    splits: &Arc<Splits>,
) -> Receiver<(BG2Result, std::time::Duration)> {
    let (tx, rx) = bounded(1);
    let job = job.clone();
    let splits = splits.clone();
    let recorder = sh.recorder.clone();
    let throttle = sh.policies.throttle.clone();
    let running = sh.b_g2_running.clone();
    let pool = sh.b_g2_pool.clone();
    sh.b_g2_pool.spawn(move || {
        if running.fetch_add(1, Ordering::SeqCst) == 0 {
            throttle.raise();
        }
        recorder.record(Ev::BG2Start, job.id, p, None, None, None, "");
        let t = Instant::now();
        let result = catch("b_g2_msm", || -> BG2Result {
            let bases = query_bases(&job.srs, &job.r1cs)?;
            Ok(b_g2_msm(bases.b_g2, &splits.b, &pool)?)
        })
        .and_then(|r| r);
        let took = t.elapsed();
        recorder.record(Ev::BG2End, job.id, p, None, None, None, "");
        if running.fetch_sub(1, Ordering::SeqCst) == 1 {
            throttle.lower();
        }
        let _ = tx.send((result, took));
    });
    rx
}

fn finisher(sh: &Shared, rx: &Receiver<FinishItem>) {
    while let Ok(item) = rx.recv() {
        let FinishItem { gpu, b_g2, carry } = item;
        let Carry {
            job,
            partition: p,
            splits,
            r,
            s,
            public_inputs,
            permit,
            mut times,
            started,
        } = carry;
        let outcome = (|| -> Result<ProofPoints, ProveError> {
            let result = gpu?;
            let b_g2_sum = match (b_g2, result.b_g2) {
                (Some(rx), _) => {
                    let (sum, took) = rx.recv().map_err(|_| ProveError::Panicked("b_g2_msm"))?;
                    times.b_g2_msm = took;
                    sum?
                }
                (None, Some(sum)) => sum,
                (None, None) => {
                    return Err(ProveError::Backend(
                        cuzk_gpu_backend::BackendError::Unsupported("the G2 MSM it was asked for"),
                    ))
                }
            };
            sh.rec(Ev::AssemblyStart, job.id, p, None, None, None, "");
            let t = Instant::now();
            let proof = assembly_stage(&job.srs.key, &result, b_g2_sum, r, s)?;
            times.assembly = t.elapsed();
            sh.rec(Ev::AssemblyEnd, job.id, p, None, None, None, "");
            if sh.cfg.verify {
                if let Some(v) = &job.verifier {
                    sh.rec(Ev::VerifyStart, job.id, p, None, None, None, "");
                    let ok = v.verify(&proof, &public_inputs);
                    sh.rec(Ev::VerifyEnd, job.id, p, None, None, None, "");
                    match ok {
                        Ok(true) => {}
                        Ok(false) => return Err(ProveError::Verification(String::new())),
                        Err(e) => return Err(ProveError::Verification(format!(": {e}"))),
                    }
                }
            }
            Ok(proof)
        })();
        // The splits are shared with the b_g2 task, which is over by now.
        let t = Instant::now();
        match Arc::try_unwrap(splits) {
            Ok(splits) => {
                let bytes = splits.heap_size();
                sh.dealloc(job.id, p, Released::new(splits, bytes, "splits"));
            }
            Err(still_shared) => drop(still_shared),
        }
        times.dealloc += t.elapsed();
        // Recorded before the permit goes back, so a waiter's BUDGET_ACQUIRED never
        // precedes this release in the timeline.
        sh.rec(
            Ev::BudgetReleased,
            job.id,
            p,
            None,
            None,
            Some(permit.bytes()),
            "",
        );
        drop(permit);
        times.total = started.elapsed();
        match outcome {
            Ok(proof) => sh.partition_left(job.id, p, Some((proof, times))),
            Err(e) => {
                sh.fail(
                    job.id,
                    JobError::Partition {
                        partition: p,
                        message: e.to_string(),
                    },
                );
                sh.partition_left(job.id, p, None);
            }
        }
    }
}
