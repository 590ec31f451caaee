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
//! Every queue (synthesis, GPU, `b_g2_msm`) is ordered by (priority, job sequence,
//! partition): a more urgent job goes first, and among equals the oldest job's
//! lowest partition, so a job finishes before later ones crowd it out.
//! Critical jobs (a WinningPoSt) also have memory and synthesis slots held back
//! for them (`critical_reserve`, `critical_synth_slots`), so a queue of other
//! partitions holding the whole budget and every slot does not make them wait.
//! `b_g2_msm` runs on its own pool while the GPU worker is already on the next
//! partition, one MSM at a time in queue order (each one uses the whole pool), so
//! an earlier job's MSMs finish before a later job's; the throttle is raised while
//! one runs. Every transition is an event in the TIMELINE [`Recorder`].
//!
//! A panic anywhere in a job's path (a stage, the verifier, a policy) fails that
//! job with the panic's message; a worker thread that dies anyway fails every job
//! in flight and every later submission, so [`JobHandle::wait`] never blocks for
//! ever.

use std::{
    cmp::Reverse,
    collections::{BinaryHeap, HashMap},
    ops::Range,
    panic::{catch_unwind, AssertUnwindSafe},
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc, Condvar, Mutex, PoisonError, Weak,
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use bellpepper_core::Circuit;
use blstrs::{G2Projective, Scalar};
use crossbeam_channel::{bounded, unbounded, Receiver, Sender};
use cuzk_alloc::{Abc, DeallocPolicy, Released, ThrottleControl, Witness};
use cuzk_assembly::ProofPoints;
use cuzk_gpu_backend::{
    lock::{GpuLock, LockGuard, Region},
    DeviceLane, GpuBackend, PartitionResult,
};
use cuzk_synth::{SplitCircuit, SynthError, Throttle};
use cuzk_timeline::{EventKind as Ev, Recorder};
use rayon::ThreadPool;

use crate::{
    budget::{BudgetError, CriticalReserve, MemoryBudget, Permit},
    srs::{Srs, SrsError},
    stages::{
        assembly_stage, b_g2_msm, gpu_stage, gpu_stage_ref, gpu_stage_witness, panic_message,
        prep_stage, query_bases, spmv_stage, stage_abc, stage_splits, stage_witness, ProveError,
        Splits, StageTimes,
    },
};
use cuzk_synth::R1cs;

mod queues;
mod workers;

use queues::{key, CriticalGpu, Key, SynthQueue, WorkQueue};
use workers::{b_g2_worker, critical_lanes, finisher, gpu_worker, synth_worker};

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
    /// `a, b, c` evaluated by the backend from the witness instead of the spmv
    /// stage: `Some(true)` where the backend offers it, `Some(false)` never, `None`
    /// where it evaluates them on its device
    /// ([`abc_on_backend`](crate::abc_on_backend)). A partition then holds its
    /// witness, not `a, b, c`, until its GPU stage ends.
    pub abc_on_backend: Option<bool>,
    /// Bytes of the memory budget held back for [`Priority::Critical`] partitions
    /// (a WinningPoSt, due within an epoch): others are admitted against the budget
    /// less this, critical ones against the whole budget. `None`: learned, the
    /// largest critical job's partition and parameters seen so far
    /// ([`CriticalReserve::Learned`]); `Some(0)`: none. Must be below the budget.
    pub critical_reserve: Option<u64>,
    /// Synthesis slots only critical partitions may use, beyond the `synth_jobs`
    /// the others share (0: none), so a critical partition starts synthesis at once
    /// even while every other slot is busy.
    pub critical_synth_slots: usize,
    /// One more GPU worker per device, on a second instance of the backend
    /// ([`GpuBackend::open_sibling`]) and outside the device's GPU lock, that takes
    /// only [`Priority::Critical`] partitions: a WinningPoSt starts on the GPU at
    /// once instead of waiting for the partition already there (3-4 s at 32 GiB),
    /// its kernels sharing the device with that partition's. `Some(true)`:
    /// required (an error where the backend offers no second instance);
    /// `Some(false)`: none; `None`: where the backend drives devices and offers one.
    pub critical_lane: Option<bool>,
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
            abc_on_backend: None,
            critical_reserve: None,
            critical_synth_slots: 1,
            critical_lane: None,
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

/// Something that computes a partition's witness: any circuit (on the synthesis
/// worker's thread), or a [`SplitWitness`] (its parts on the synthesis pool).
pub trait WitnessSource: Send {
    /// The witness, checked against `r1cs`'s shape (counts of inputs, aux and
    /// constraints). `pool` is the engine's synthesis pool, for a source that
    /// synthesizes in parallel.
    fn synthesize(self: Box<Self>, r1cs: &R1cs, pool: &ThreadPool) -> Result<Witness, SynthError>;
}

impl<C: Circuit<Scalar> + Send> WitnessSource for C {
    fn synthesize(self: Box<Self>, r1cs: &R1cs, _: &ThreadPool) -> Result<Witness, SynthError> {
        cuzk_synth::synthesize_witness_for(r1cs, *self)
    }
}

/// A circuit whose independent parts are synthesized in parallel on the synthesis
/// pool ([`cuzk_synth::synthesize_witness_split`]): the same witness as the whole
/// circuit's, in a fraction of the time (a PoRep partition's 18 challenges).
pub struct SplitWitness<C>(pub C);

impl<C: SplitCircuit + Send> WitnessSource for SplitWitness<C> {
    fn synthesize(self: Box<Self>, r1cs: &R1cs, pool: &ThreadPool) -> Result<Witness, SynthError> {
        cuzk_synth::synthesize_witness_split(r1cs, self.0, pool)
    }
}

/// Checks a proof (the facade plugs bellperson's verifier in here).
pub trait ProofVerifier: Send + Sync {
    /// `Ok(true)` if the proof verifies for `public_inputs` (without the one).
    fn verify(&self, proof: &ProofPoints, public_inputs: &[Scalar]) -> Result<bool, String>;
}

/// How urgent a job is. Every queue serves a higher priority first; among equal
/// priorities, the job submitted first, then the lowest partition. A job already
/// in a stage is not interrupted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Priority {
    Low,
    #[default]
    Normal,
    High,
    Critical,
}

impl std::fmt::Display for Priority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Priority::Low => "low",
            Priority::Normal => "normal",
            Priority::High => "high",
            Priority::Critical => "critical",
        })
    }
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
    /// Where the job's partitions go in every queue.
    pub priority: Priority,
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
    /// A thread of the engine died outside any job's catch (a bug); the engine
    /// takes no more work.
    #[error("the engine's {worker} thread died ({message}); the engine takes no more work")]
    WorkerDied { worker: String, message: String },
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

    /// Blocks until the job is done, failed or cancelled. Never for ever: every
    /// path out of the engine (its shutdown, a thread that died) answers.
    pub fn wait(self) -> Result<JobOutput, JobError> {
        self.rx.recv().unwrap_or(Err(JobError::ShutDown))
    }

    /// Like [`JobHandle::wait`], but gives the handle back after `timeout`.
    pub fn wait_timeout(self, timeout: Duration) -> Result<Result<JobOutput, JobError>, Self> {
        match self.rx.recv_timeout(timeout) {
            Ok(r) => Ok(r),
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => Ok(Err(JobError::ShutDown)),
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => Err(self),
        }
    }

    /// The result if the job is over.
    pub fn try_wait(&self) -> Option<Result<JobOutput, JobError>> {
        self.rx.try_recv().ok()
    }
}

/// Bytes a partition of `r1cs` holds at its peak, at worst: [`partition_bytes_for`]
/// with H on the host and every variable in each split's tail.
pub fn partition_bytes(r1cs: &R1cs) -> u64 {
    partition_bytes_for(r1cs, Held::Abc { host_h: true }, None)
}

/// What a partition holds on the host between prep_msm and the end of its GPU
/// stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Held {
    /// `a, b, c` from the spmv stage, and where the backend computes H on the host
    /// (`host_h`: a backend without devices), the H evaluations padded to the
    /// domain. The witness is freed after prep_msm.
    Abc { host_h: bool },
    /// The witness, which the backend evaluates `a, b, c` from
    /// ([`PipelineConfig::abc_on_backend`]): no `a, b, c` on the host.
    Witness,
}

/// Bytes a partition of `r1cs` holds at its peak. The phases: synthesis (a split
/// witness is held twice while its parts are appended), then the witness with
/// `a, b, c` (where the engine evaluates them) and the splits, then
/// ([`partition_bytes_after_prep`]) what it keeps for the GPU stage (`held`).
/// `splits`: the bytes the three splits are known to take for this shape
/// (bitmaps and tails; see
/// [`SplitScalars::heap_size`](cuzk_alloc::SplitScalars::heap_size)), else the
/// worst case, every variable in each tail. A PoRep witness is 97-98% zeros and
/// ones: at 32 GiB, 0.2 GB of splits where the worst case is 14 GB.
pub fn partition_bytes_for(r1cs: &R1cs, held: Held, splits: Option<u64>) -> u64 {
    partition_bytes_of(PartitionShape::of(r1cs), held, splits)
}

/// What [`partition_bytes_for`] reads of a compiled shape: its variables and
/// constraints. The planner (`cuzk-plan`) counts a partition it has not compiled
/// with the same arithmetic ([`partition_bytes_of`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartitionShape {
    pub num_inputs: usize,
    pub num_aux: usize,
    pub num_constraints: usize,
}

impl PartitionShape {
    pub fn of(r1cs: &R1cs) -> Self {
        Self {
            num_inputs: r1cs.num_inputs(),
            num_aux: r1cs.num_aux(),
            num_constraints: r1cs.num_constraints(),
        }
    }
}

/// [`partition_bytes_for`] of a shape given by its counts.
pub fn partition_bytes_of(shape: PartitionShape, held: Held, splits: Option<u64>) -> u64 {
    let vars = (shape.num_inputs + shape.num_aux) as u64;
    let witness = vars * 32;
    let abc = match held {
        Held::Abc { .. } => 3 * shape.num_constraints as u64 * 32,
        Held::Witness => 0,
    };
    // Each split: a bitmap and, at worst, every variable in the tail (index + limbs).
    let worst = 3 * (vars.div_ceil(8) + vars * (4 + 32));
    let splits = splits.map_or(worst, |s| s.min(worst));
    (2 * witness)
        .max(witness + abc + splits)
        .max(partition_bytes_after_prep_of(shape, held, splits))
}

/// What a partition holds after prep_msm, until its GPU stage ends: its `splits`
/// (bytes) and what `held` says (`a, b, c` and H on the host, or the witness).
pub fn partition_bytes_after_prep(r1cs: &R1cs, held: Held, splits: u64) -> u64 {
    partition_bytes_after_prep_of(PartitionShape::of(r1cs), held, splits)
}

/// [`partition_bytes_after_prep`] of a shape given by its counts.
pub fn partition_bytes_after_prep_of(shape: PartitionShape, held: Held, splits: u64) -> u64 {
    match held {
        Held::Abc { host_h } => {
            let n = shape.num_constraints as u64;
            let domain = n.max(1).next_power_of_two();
            let h = if host_h { 3 * domain * 32 } else { 0 };
            3 * n * 32 + splits + h
        }
        Held::Witness => (shape.num_inputs + shape.num_aux) as u64 * 32 + splits,
    }
}

/// A circuit shape's key for what the engine learns about its partitions.
fn shape_key(r1cs: &R1cs) -> (usize, usize, usize) {
    (r1cs.num_inputs(), r1cs.num_aux(), r1cs.num_constraints())
}

// ---------------------------------------------------------------------------
// Jobs.

struct JobShared {
    id: u64,
    r1cs: Arc<R1cs>,
    srs: Arc<Srs>,
    verifier: Option<Arc<dyn ProofVerifier>>,
    priority: Priority,
    /// Whether the job counts its parameters in the budget (from its first
    /// admitted partition until it leaves).
    holds_srs: AtomicBool,
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
    input: GpuInput,
    carry: Carry,
    /// The lanes (indexes into `Shared::lanes`) this partition failed on with a
    /// device error; it is not given to them again.
    failed_on: Vec<usize>,
    /// Its `b_g2_msm`, once queued (a retried partition keeps the first).
    b_g2: Option<Receiver<(BG2Result, Duration)>>,
}

/// What a partition hands its GPU stage.
enum GpuInput {
    /// `a, b, c` from the spmv stage.
    Abc(Abc),
    /// The witness: the backend evaluates `a, b, c` ([`Held::Witness`]).
    Witness(Witness),
}

impl GpuInput {
    /// The buffers, for the dealloc policy to free.
    fn released(self) -> Released {
        match self {
            GpuInput::Abc(abc) => Released::of(abc, "abc"),
            GpuInput::Witness(w) => Released::of(w, "witness"),
        }
    }
}

type BG2Result = Result<G2Projective, ProveError>;

/// One partition's `b_g2_msm`, waiting for the `b_g2_msm` thread.
struct BG2Task {
    job: Arc<JobShared>,
    partition: u32,
    splits: Arc<Splits>,
    done: Sender<(BG2Result, Duration)>,
}

struct FinishItem {
    gpu: Result<PartitionResult, ProveError>,
    b_g2: Option<Receiver<(BG2Result, std::time::Duration)>>,
    carry: Carry,
}

struct Shared {
    cfg: PipelineConfig,
    policies: Policies,
    /// The critical lanes ([`PipelineConfig::critical_lane`]): a second backend
    /// instance per device, each driven by one worker that takes only critical
    /// partitions, outside the GPU lock. Their indices (in a partition's
    /// `failed_on`) follow `lanes`'.
    critical_lanes: Vec<DeviceLane>,
    /// The devices the GPU workers run on: the backend's lanes, or the backend
    /// itself as one lane (ordinal 0).
    lanes: Vec<DeviceLane>,
    recorder: Arc<Recorder>,
    budget: Arc<MemoryBudget>,
    synth_pool: Arc<ThreadPool>,
    b_g2_pool: Arc<ThreadPool>,
    synth_q: SynthQueue,
    gpu_q: WorkQueue<GpuItem>,
    critical_gpu: CriticalGpu,
    b_g2_q: WorkQueue<BG2Task>,
    jobs: Mutex<HashMap<u64, JobState>>,
    next_job: AtomicU64,
    /// Set when a thread died outside any job: the engine takes no more work.
    broken: Mutex<Option<JobError>>,
    /// Parameters held by jobs in flight, counted once each in the memory budget:
    /// (address of the `Srs`) → (jobs using it, its permit).
    srs_held: Mutex<HashMap<usize, (usize, Permit)>>,
    /// Every parameter set a job has used, with its base vectors' host ranges:
    /// once a set is gone (its `Weak` dead) the backends may still hold device
    /// copies of it, which [`PipelineEngine::forget_dropped_params`] frees.
    srs_seen: Mutex<Vec<SeenSrs>>,
    /// What a partition holds for its GPU stage: `a, b, c` (H on the host for a
    /// backend without devices), or its witness where the backend evaluates them.
    held: Held,
    /// The largest splits seen per circuit shape (inputs, aux, constraints): what
    /// the next partition of that shape is charged for its splits, with a margin.
    splits_seen: Mutex<HashMap<(usize, usize, usize), u64>>,
}

/// A parameter set a job used, held weakly, and its base vectors' host ranges.
/// A parameter set a job used: whether it is still held, its base vectors' host
/// ranges, and a clone of it (the vectors' `Arc`s, not the points), so that the
/// vectors outlive the set until the backends have forgotten them: a backend may
/// keep host memory registered with the driver (the CUDA backend's streamed
/// bases, `stream_staging = "register"`), which must be unregistered before the
/// memory is freed, never after.
type SeenSrs = (Weak<Srs>, Vec<Range<usize>>, Srs);

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
                if let Some(state) = jobs.remove(&job) {
                    self.release_srs(&state.shared);
                }
            }
        }
    }

    /// A partition failed: its job ends with `message`, and the partition leaves.
    fn partition_failed(&self, job: u64, partition: u32, message: String) {
        self.fail(job, JobError::Partition { partition, message });
        self.partition_left(job, partition, None);
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
            let Some(state) = jobs.remove(&job) else {
                return;
            };
            self.release_srs(&state.shared);
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

    /// Hands `buf` to the deallocation policy; a panicking policy fails the job
    /// (the buffer is freed while the panic unwinds).
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
        let label = buf.label();
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| self.policies.dealloc.release(buf))) {
            let message = format!(
                "the deallocation policy panicked releasing {label}: {}",
                panic_message(panic.as_ref())
            );
            self.fail(
                job,
                JobError::Partition {
                    partition: p,
                    message,
                },
            );
        }
        self.rec(Ev::DeallocEnd, job, p, None, None, Some(bytes), "");
    }

    /// A thread died outside any job's catch: fail every job and every later
    /// submission, and wake every queue so the other threads wind down.
    fn worker_died(&self, worker: String, message: String) {
        tracing::error!(target: "cuzk::engine", %worker, %message, "an engine thread died");
        let err = JobError::WorkerDied { worker, message };
        {
            let mut broken = self.broken.lock().unwrap_or_else(PoisonError::into_inner);
            if broken.is_none() {
                *broken = Some(err.clone());
            }
        }
        let ids: Vec<u64> = self
            .jobs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .keys()
            .copied()
            .collect();
        for id in ids {
            self.fail(id, err.clone());
        }
    }

    /// What the next partition of `r1cs` is charged: [`partition_bytes_for`] with
    /// the largest splits seen for this shape and a quarter more (the worst case
    /// until one partition of the shape has been prepared).
    fn partition_charge(&self, r1cs: &R1cs) -> u64 {
        let seen = self
            .splits_seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&shape_key(r1cs))
            .copied();
        partition_bytes_for(r1cs, self.held, seen.map(|s| s + s / 4))
    }

    /// Records a partition's real splits, and returns what it holds at its peak
    /// with them (which the caller's permit grows to where the charge fell short).
    fn splits_prepared(&self, r1cs: &R1cs, splits: u64) -> u64 {
        let mut seen = self
            .splits_seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let e = seen.entry(shape_key(r1cs)).or_insert(0);
        *e = (*e).max(splits);
        partition_bytes_for(r1cs, self.held, Some(splits))
    }

    /// Bytes of `job`'s parameters that its next partition must bring into the
    /// budget: all of them while no admitted job holds this `Srs`, else none.
    fn srs_extra(&self, job: &JobShared) -> u64 {
        if job.holds_srs.load(Ordering::Acquire) {
            return 0;
        }
        let addr = Arc::as_ptr(&job.srs) as usize;
        let held = self.srs_held.lock().unwrap_or_else(PoisonError::into_inner);
        if held.contains_key(&addr) {
            0
        } else {
            job.srs.host_bytes()
        }
    }

    /// Counts a job's parameters in the budget from its first admitted partition
    /// on, once per `Srs` in use: `extra` is the permit [`Shared::srs_extra`]'s
    /// bytes were admitted with (dropped here if another job got there first).
    /// Taking them together with a partition, never at submission, keeps a queued
    /// job from holding bytes that a running job's partitions wait for.
    fn hold_srs(&self, job: &JobShared, extra: Option<Permit>) {
        if job.holds_srs.swap(true, Ordering::AcqRel) {
            return;
        }
        let addr = Arc::as_ptr(&job.srs) as usize;
        let mut held = self.srs_held.lock().unwrap_or_else(PoisonError::into_inner);
        match held.get_mut(&addr) {
            Some((jobs, _)) => *jobs += 1,
            None => {
                let permit = extra.unwrap_or_else(|| self.budget.hold(job.srs.host_bytes()));
                held.insert(addr, (1, permit));
            }
        }
    }

    fn release_srs(&self, job: &JobShared) {
        if !job.holds_srs.load(Ordering::Acquire) {
            return;
        }
        let addr = Arc::as_ptr(&job.srs) as usize;
        let mut held = self.srs_held.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((jobs, _)) = held.get_mut(&addr) {
            *jobs -= 1;
            if *jobs == 0 {
                held.remove(&addr);
            }
        }
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
        let total = cfg
            .memory_budget
            .unwrap_or_else(MemoryBudget::default_total);
        let reserve = match cfg.critical_reserve {
            None => CriticalReserve::Learned,
            Some(bytes) if bytes > 0 && bytes >= total => {
                return Err(PipelineError::Config(format!(
                    "critical_reserve ({bytes} bytes) must be below the memory budget \
                     ({total} bytes): it would leave nothing for other work"
                )))
            }
            Some(bytes) => CriticalReserve::Bytes(bytes),
        };
        let lanes = match policies.backend.device_lanes() {
            lanes if lanes.is_empty() => vec![DeviceLane {
                ordinal: 0,
                backend: policies.backend.clone(),
            }],
            lanes => lanes,
        };
        let cores = match cfg.synth_threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        };
        let budget = MemoryBudget::with_reserve(total, reserve);
        let backend = policies.backend.clone();
        budget.count_external(move || backend.pinned_host_bytes());
        // A backend that drives devices computes H there; the CPU backend pads
        // a, b, c to the domain on the host. A backend may evaluate a, b, c itself.
        let backend = policies.backend.as_ref();
        // check_witness reads a, b, c on the host: left unset, it keeps them there.
        let setting = match (cfg.abc_on_backend, cfg.check_witness) {
            (Some(true), true) => {
                return Err(PipelineError::Config(
                    "check_witness reads a, b, c on the host: it cannot be combined with \
                     abc_on_backend = true"
                        .into(),
                ))
            }
            (None, true) => Some(false),
            (setting, _) => setting,
        };
        let held = if crate::abc_on_backend(setting, backend) {
            Held::Witness
        } else {
            Held::Abc {
                host_h: backend.capabilities().devices.is_empty(),
            }
        };
        if cfg.abc_on_backend == Some(true) && held != Held::Witness {
            return Err(PipelineError::Config(format!(
                "abc_on_backend = true, but the backend `{}` does not evaluate a, b, c \
                 from the witness",
                backend.capabilities().name
            )));
        }
        let critical_lanes = critical_lanes(cfg.critical_lane, backend, &lanes)?;
        let shared = Arc::new(Shared {
            budget,
            synth_q: SynthQueue::new(cores, cfg.synth_jobs, cfg.critical_synth_slots),
            synth_pool: pool(cfg.synth_threads, "synth")?,
            b_g2_pool: pool(cfg.gpu_threads, "b-g2")?,
            cfg,
            policies,
            lanes,
            critical_lanes,
            recorder,
            gpu_q: WorkQueue::new(),
            critical_gpu: CriticalGpu::new(),
            b_g2_q: WorkQueue::new(),
            jobs: Mutex::new(HashMap::new()),
            next_job: AtomicU64::new(1),
            broken: Mutex::new(None),
            srs_held: Mutex::new(HashMap::new()),
            srs_seen: Mutex::new(Vec::new()),
            held,
            splits_seen: Mutex::new(HashMap::new()),
        });
        let (finish_tx, finish_rx) = unbounded::<FinishItem>();
        let mut engine = PipelineEngine {
            shared: shared.clone(),
            threads: Vec::new(),
            finish_tx: Some(finish_tx.clone()),
        };
        // Every thread runs under a catch: one that dies outside a job's own catch
        // fails every job (and later submissions) instead of leaving them waiting.
        let spawn = |name: String, f: Box<dyn FnOnce() + Send>| {
            let sh = shared.clone();
            let thread = name.clone();
            std::thread::Builder::new()
                .name(name)
                .spawn(move || {
                    if let Err(panic) = catch_unwind(AssertUnwindSafe(f)) {
                        sh.worker_died(thread, panic_message(panic.as_ref()));
                    }
                })
                .map_err(|source| PipelineError::Thread {
                    what: "worker",
                    source,
                })
        };
        for w in 0..shared.synth_q.workers() {
            let sh = shared.clone();
            let h = spawn(
                format!("cuzk-synth-worker-{w}"),
                Box::new(move || synth_worker(&sh, w as u32)),
            )?;
            engine.threads.push(("synth", h));
        }
        for lane in 0..shared.lanes.len() {
            for w in 0..shared.cfg.gpu_workers_per_device {
                let sh = shared.clone();
                let tx = finish_tx.clone();
                let d = shared.lanes[lane].ordinal;
                let h = spawn(
                    format!("cuzk-gpu-{d}-{w}"),
                    Box::new(move || gpu_worker(&sh, lane, w as u32, &tx)),
                )?;
                engine.threads.push(("gpu", h));
            }
        }
        // One worker per critical lane, numbered after the lane's own workers.
        for (i, l) in shared.critical_lanes.iter().enumerate() {
            let sh = shared.clone();
            let tx = finish_tx.clone();
            let lane = shared.lanes.len() + i;
            let w = shared.cfg.gpu_workers_per_device as u32;
            let h = spawn(
                format!("cuzk-gpu-{}-critical", l.ordinal),
                Box::new(move || gpu_worker(&sh, lane, w, &tx)),
            )?;
            engine.threads.push(("gpu", h));
        }
        drop(finish_tx);
        let sh = shared.clone();
        let h = spawn("cuzk-b-g2".into(), Box::new(move || b_g2_worker(&sh)))?;
        engine.threads.push(("b_g2", h));
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

    /// How many critical lanes run (the resolved [`PipelineConfig::critical_lane`]:
    /// one per device, or none).
    pub fn critical_lanes(&self) -> usize {
        self.shared.critical_lanes.len()
    }

    /// Whether the backend evaluates `a, b, c` from the witness (the resolved
    /// [`PipelineConfig::abc_on_backend`]).
    pub fn abc_on_backend(&self) -> bool {
        self.shared.held == Held::Witness
    }

    pub fn budget(&self) -> &MemoryBudget {
        &self.shared.budget
    }

    /// The ordinals of the devices the GPU workers run on, in lane order (what a
    /// status report lists; TIMELINE GPU events carry the same numbers, and
    /// `cuzk_timeline::analyse` gives each one's busy %).
    pub fn devices(&self) -> Vec<u32> {
        self.shared.lanes.iter().map(|l| l.ordinal).collect()
    }

    /// Each device lane's ordinal and what its backend says of its device (its
    /// `capabilities().devices`: one entry for a GPU backend, none for the CPU
    /// backend), in lane order.
    pub fn device_infos(&self) -> Vec<(u32, Option<cuzk_gpu_backend::DeviceInfo>)> {
        self.shared
            .lanes
            .iter()
            .map(|l| {
                let info = l.backend.capabilities().devices.into_iter().next();
                (l.ordinal, info)
            })
            .collect()
    }

    /// Tells every device's backend to drop what it keeps of the parameter sets
    /// that are gone (used by a job once, held by nobody now: a parameter cache
    /// evicted them), and returns the bytes the backends freed (device copies; the
    /// CPU backend's fixed-base tables, host memory). A backend busy with a partition answers after it. A set held
    /// anywhere (a job, a cache) is left alone.
    pub fn forget_dropped_params(&self) -> u64 {
        // The vectors of the sets gone are freed (where nobody else holds them)
        // only once every backend has forgotten them: `_kept` drops last.
        let (gone, _kept): (Vec<Range<usize>>, Vec<Srs>) = {
            let mut seen = self
                .shared
                .srs_seen
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let (dead, live): (Vec<SeenSrs>, Vec<SeenSrs>) = std::mem::take(&mut *seen)
                .into_iter()
                .partition(|(w, _, _)| w.strong_count() == 0);
            *seen = live;
            dead.into_iter().map(|(_, ranges, srs)| (ranges, srs)).fold(
                (Vec::new(), Vec::new()),
                |(mut g, mut k), (r, s)| {
                    g.extend(r);
                    k.push(s);
                    (g, k)
                },
            )
        };
        if gone.is_empty() {
            return 0;
        }
        self.shared
            .lanes
            .iter()
            .map(|lane| {
                catch_unwind(AssertUnwindSafe(|| lane.backend.forget_bases(&gone))).unwrap_or_else(
                    |panic| {
                        tracing::error!(
                            target: "cuzk::engine",
                            device = lane.ordinal,
                            "the backend panicked forgetting bases: {}",
                            panic_message(panic.as_ref())
                        );
                        0
                    },
                )
            })
            .sum()
    }

    /// Jobs the engine holds state for now: submitted and not yet ended. A job's
    /// state is dropped when it ends, so this never grows with the jobs proved.
    pub fn open_jobs(&self) -> usize {
        self.shared
            .jobs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Queues a job. Its partitions start as synthesis workers and memory allow,
    /// in the order of [`JobSpec::priority`], then submission.
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
            &format!("partitions={n} priority={}", job.priority),
        );
        let bytes = sh.partition_charge(&job.r1cs);
        let broken = sh
            .broken
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let early = if let Some(err) = broken {
            Some(err)
        } else if n == 0 {
            Some(JobError::Empty)
        } else if let Err(e) = sh.budget.check_for(
            bytes + job.srs.host_bytes(),
            job.priority == Priority::Critical,
        ) {
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
        {
            let mut seen = sh.srs_seen.lock().unwrap_or_else(PoisonError::into_inner);
            let live = |w: &Weak<Srs>| w.upgrade().is_some_and(|s| Arc::ptr_eq(&s, &job.srs));
            if !seen.iter().any(|(w, _, _)| live(w)) {
                seen.push((
                    Arc::downgrade(&job.srs),
                    job.srs.host_ranges(),
                    (*job.srs).clone(),
                ));
            }
        }
        let shared_job = Arc::new(JobShared {
            id,
            r1cs: job.r1cs,
            srs: job.srs,
            verifier: job.verifier,
            priority: job.priority,
            holds_srs: AtomicBool::new(false),
        });
        sh.synth_q.job_submitted(n);
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
                key(&shared_job, p),
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
        // GPU workers (they queue b_g2_msm tasks), then the b_g2_msm thread, then the
        // finisher. Joining never panics: threads run under a catch.
        let mut threads = std::mem::take(&mut self.threads);
        for stage in ["synth", "gpu", "b_g2", "finish"] {
            match stage {
                "gpu" => sh.gpu_q.close(),
                "b_g2" => sh.b_g2_q.close(),
                _ => {}
            }
            let (now, later): (Vec<_>, Vec<_>) =
                threads.into_iter().partition(|(name, _)| *name == stage);
            threads = later;
            for (_, h) in now {
                let _ = h.join();
            }
            if stage == "gpu" {
                // A partition a worker sent back for another device after that
                // device's workers had already left: it will not run.
                for item in sh.gpu_q.drain() {
                    let (job, p) = (item.carry.job.id, item.carry.partition);
                    sh.fail(job, JobError::ShutDown);
                    drop(item);
                    sh.partition_left(job, p, None);
                }
            }
        }
        // A panicking drain must not take the dropping thread down.
        if catch_unwind(AssertUnwindSafe(|| sh.policies.dealloc.drain())).is_err() {
            tracing::error!(target: "cuzk::engine", "the deallocation policy panicked in drain");
        }
    }
}
