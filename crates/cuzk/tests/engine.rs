//! The pipelined engine: many jobs of several partitions at once through every
//! combination of the shipped plugins, cancellation, failures that stay inside
//! their job, and the memory budget. Every returned proof is verified by the
//! engine (bellperson's verifier) and checked again here.

use std::{
    collections::{HashMap, HashSet},
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, Mutex, OnceLock,
    },
    time::Instant,
};

use bellperson::groth16::{generate_random_parameters, Parameters};
use blstrs::{Bls12, Scalar};
use cuzk::pipeline::{job, to_bellperson, BellpersonVerifier, PartitionInput};
use cuzk_alloc::InlineDealloc;
use cuzk_circuits::MulChain;
use cuzk_gpu_backend::{
    lock::{GpuLock, LockGuard, NoLock, Region, SingleLock, SplitLock},
    AbcEval, AbcRef, BackendError, Capabilities, CpuBackend, GpuBackend, PartitionJob,
    PartitionJobRef, PartitionResult, SplitMsm, SplitRef, Staged, WitnessJobRef,
};
use cuzk_plugin_host::{PluginSpec, SearchPath};
use cuzk_scheduler::{
    partition_bytes, JobError, JobSpec, PipelineConfig, PipelineEngine, Policies, Unthrottled,
};
use cuzk_timeline::{EventKind, Recorder};
use ff::Field;
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;

const LOG: u32 = 10;

struct Fixture {
    params: Parameters<Bls12>,
    r1cs: Arc<cuzk::R1cs>,
    srs: Arc<cuzk::Srs>,
    verifier: Arc<BellpersonVerifier>,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let params = generate_random_parameters::<Bls12, _, _>(
            MulChain::new(LOG, 2, None).unwrap(),
            &mut ChaCha20Rng::seed_from_u64(1),
        )
        .unwrap();
        let r1cs = Arc::new(
            cuzk_synth::compile(MulChain::new(LOG, 2, Some(0)).unwrap())
                .unwrap()
                .r1cs,
        );
        let srs = Arc::new(cuzk::srs_from_source(&&params, &r1cs).unwrap());
        let verifier = Arc::new(BellpersonVerifier::new(&params.vk));
        Fixture {
            params,
            r1cs,
            srs,
            verifier,
        }
    })
}

fn seed(j: usize, p: usize) -> u64 {
    (j * 100 + p + 1) as u64
}

fn make_job(j: usize, partitions: usize) -> JobSpec {
    let f = fixture();
    let parts = (0..partitions)
        .map(|p| {
            let c = MulChain::new(LOG, 2, Some(seed(j, p))).unwrap();
            let mut g = ChaCha20Rng::seed_from_u64(seed(j, p));
            PartitionInput {
                public_inputs: c.public_inputs().unwrap(),
                circuit: c,
                r: Scalar::random(&mut g),
                s: Scalar::random(&mut g),
            }
        })
        .collect();
    job(
        f.r1cs.clone(),
        f.srs.clone(),
        parts,
        Some(f.verifier.clone()),
    )
}

/// Checks job `j`'s proofs: partition order, each verifies for its own inputs.
fn check_proofs(j: usize, proofs: &[cuzk::ProofPoints]) {
    let f = fixture();
    for (p, proof) in proofs.iter().enumerate() {
        let inputs = MulChain::new(LOG, 2, Some(seed(j, p)))
            .unwrap()
            .public_inputs()
            .unwrap();
        assert!(
            cuzk::verify(&f.params.vk, &to_bellperson(proof), &inputs).unwrap(),
            "job {j} partition {p} does not verify for its own inputs"
        );
    }
}

fn small_config() -> PipelineConfig {
    PipelineConfig {
        synth_jobs: Some(2),
        synth_threads: 2,
        gpu_workers_per_device: 2,
        gpu_threads: 1,
        memory_budget: Some(1 << 30),
        ..PipelineConfig::default()
    }
}

fn cpu_backend() -> Arc<dyn GpuBackend> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    Arc::new(CpuBackend::new(Arc::new(pool)))
}

fn in_process(lock: Arc<dyn GpuLock>) -> Policies {
    Policies {
        backend: cpu_backend(),
        dealloc: Arc::new(InlineDealloc),
        throttle: Arc::new(Unthrottled),
        lock,
    }
}

fn recorder() -> Arc<Recorder> {
    Arc::new(Recorder::new(Instant::now()))
}

/// `<target>/<profile>`, where cargo puts the plugin libraries.
fn plugin_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().and_then(Path::parent).unwrap().to_path_buf()
}

/// Builds the plugins if this test run has not (a no-op after `cargo build --workspace`).
fn ensure_plugins() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = plugin_dir();
        let names = [
            "cuzk-plugin-backend-cpu",
            "cuzk-plugin-dealloc-inline",
            "cuzk-plugin-dealloc-detached",
            "cuzk-plugin-dealloc-bounded",
            "cuzk-plugin-throttle-off",
            "cuzk-plugin-throttle-flag",
            "cuzk-plugin-gpu-lock-single",
            "cuzk-plugin-gpu-lock-split",
            "cuzk-fixture-faulty-backend",
        ];
        let mut cmd = std::process::Command::new(std::env::var("CARGO").unwrap_or("cargo".into()));
        cmd.current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
            .args(["build", "--release", "--quiet"]);
        for n in names {
            cmd.args(["-p", n]);
        }
        if dir.file_name().is_some_and(|n| n == "release") {
            let status = cmd.status().expect("running cargo to build the plugins");
            assert!(status.success(), "building the plugins failed");
        }
        dir
    })
}

fn run_jobs(engine: &PipelineEngine, jobs: usize, partitions: usize) {
    let handles: Vec<_> = (0..jobs)
        .map(|j| (j, engine.submit(make_job(j, partitions))))
        .collect();
    for (j, h) in handles {
        let out = h.wait().unwrap_or_else(|e| panic!("job {j} failed: {e}"));
        assert!(out.verified);
        assert_eq!(out.proofs.len(), partitions);
        check_proofs(j, &out.proofs);
    }
}

#[test]
fn many_jobs_through_in_process_locks() {
    let locks: [Arc<dyn GpuLock>; 3] = [
        Arc::new(SingleLock::new()),
        Arc::new(SplitLock::new()),
        Arc::new(NoLock),
    ];
    for lock in locks {
        let engine = PipelineEngine::start(small_config(), in_process(lock), recorder()).unwrap();
        run_jobs(&engine, 4, 3);
    }
}

#[test]
fn every_combination_of_shipped_plugins_proves_the_same() {
    let dir = ensure_plugins();
    let search = SearchPath::dir(dir);
    let backend = cuzk_plugin_host::load_backend(
        &PluginSpec::new("cpu").with_param("threads", "2"),
        &search,
        &Default::default(),
    )
    .unwrap();
    // The same blinding gives the same proof whatever the strategies: compare
    // every combination's bytes with the in-process run's.
    let reference = {
        let engine = PipelineEngine::start(
            small_config(),
            in_process(Arc::new(SingleLock::new())),
            recorder(),
        )
        .unwrap();
        engine.submit(make_job(0, 2)).wait().unwrap().proofs
    };
    for dealloc in ["inline", "detached", "bounded"] {
        for throttle in ["off", "flag"] {
            for lock in ["single", "split"] {
                let policies = Policies {
                    backend: backend.clone(),
                    dealloc: cuzk_plugin_host::load_dealloc(&PluginSpec::new(dealloc), &search)
                        .unwrap(),
                    throttle: cuzk_plugin_host::load_throttle(&PluginSpec::new(throttle), &search)
                        .unwrap(),
                    lock: cuzk_plugin_host::load_gpu_lock(&PluginSpec::new(lock), &search).unwrap(),
                };
                let engine = PipelineEngine::start(small_config(), policies, recorder()).unwrap();
                let handles: Vec<_> = (0..2).map(|j| engine.submit(make_job(j, 2))).collect();
                for (j, h) in handles.into_iter().enumerate() {
                    let out = h
                        .wait()
                        .unwrap_or_else(|e| panic!("{dealloc}/{throttle}/{lock}: job {j}: {e}"));
                    check_proofs(j, &out.proofs);
                    if j == 0 {
                        assert_eq!(out.proofs, reference, "{dealloc}/{throttle}/{lock}");
                    }
                }
            }
        }
    }
}

#[test]
fn cancelling_a_job_leaves_the_others_alone() {
    let mut cfg = small_config();
    cfg.synth_jobs = Some(1);
    cfg.gpu_workers_per_device = 1;
    let rec = recorder();
    let engine =
        PipelineEngine::start(cfg, in_process(Arc::new(SingleLock::new())), rec.clone()).unwrap();
    let a = engine.submit(make_job(0, 3));
    let b = engine.submit(make_job(1, 3));
    let c = engine.submit(make_job(2, 3));
    engine.cancel(b.id());
    assert!(matches!(b.wait(), Err(JobError::Cancelled)));
    check_proofs(0, &a.wait().unwrap().proofs);
    check_proofs(2, &c.wait().unwrap().proofs);
    drop(engine);
    let events = rec.events();
    assert!(events.iter().any(|e| e.event == EventKind::JobCancelled));
    // No partition of the cancelled job reached the GPU after the cancel... at most
    // the one in flight did: far fewer than its three.
    let b_gpu = events
        .iter()
        .filter(|e| e.event == EventKind::GpuStart && e.job == 2)
        .count();
    assert!(
        b_gpu <= 1,
        "{b_gpu} partitions of the cancelled job ran on the GPU"
    );
}

/// Delegates to the CPU backend but fails its `fail_at`-th call.
struct FailsOnce {
    inner: Arc<dyn GpuBackend>,
    calls: AtomicUsize,
    fail_at: usize,
}

impl GpuBackend for FailsOnce {
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    fn prove_partition(&self, job: PartitionJob<'_>) -> Result<PartitionResult, BackendError> {
        if self.calls.fetch_add(1, Ordering::SeqCst) == self.fail_at {
            return Err(BackendError::Device("injected failure".into()));
        }
        self.inner.prove_partition(job)
    }
}

#[test]
fn a_failing_partition_fails_only_its_job() {
    let mut cfg = small_config();
    cfg.gpu_workers_per_device = 1;
    let policies = Policies {
        backend: Arc::new(FailsOnce {
            inner: cpu_backend(),
            calls: AtomicUsize::new(0),
            fail_at: 1,
        }),
        ..in_process(Arc::new(SingleLock::new()))
    };
    let engine = PipelineEngine::start(cfg, policies, recorder()).unwrap();
    let handles: Vec<_> = (0..3).map(|j| (j, engine.submit(make_job(j, 2)))).collect();
    let mut failed = 0;
    for (j, h) in handles {
        match h.wait() {
            Ok(out) => check_proofs(j, &out.proofs),
            Err(e) => {
                failed += 1;
                assert!(e.to_string().contains("injected failure"), "{e}");
            }
        }
    }
    assert_eq!(failed, 1);
    // The engine goes on after the failure.
    run_jobs(&engine, 1, 1);
}

#[test]
fn a_plugin_failing_mid_proof_is_an_error_and_the_process_goes_on() {
    let dir = ensure_plugins();
    let search = SearchPath::dir(dir);
    for mode in ["error", "panic"] {
        let faulty = cuzk_plugin_host::load_backend(
            &PluginSpec::new(
                dir.join("libcuzk_fixture_faulty_backend.so")
                    .display()
                    .to_string(),
            )
            .with_param("mode", mode),
            &search,
            &Default::default(),
        )
        .unwrap();
        let policies = Policies {
            backend: faulty,
            ..in_process(Arc::new(SingleLock::new()))
        };
        let engine = PipelineEngine::start(small_config(), policies, recorder()).unwrap();
        let err = engine.submit(make_job(0, 2)).wait().unwrap_err();
        assert!(matches!(err, JobError::Partition { .. }), "{mode}: {err}");
    }
    // And the same process still proves.
    let engine = PipelineEngine::start(
        small_config(),
        in_process(Arc::new(SingleLock::new())),
        recorder(),
    )
    .unwrap();
    run_jobs(&engine, 1, 2);
}

#[test]
fn memory_budget_blocks_then_admits_and_refuses_what_never_fits() {
    let one = partition_bytes(&fixture().r1cs);
    // The budget also holds the parameters in use, once.
    let params = fixture().srs.host_bytes();
    let mut cfg = small_config();
    // Room for one partition at a time: the second waits for the first's permit.
    cfg.memory_budget = Some(params + one + one / 2);
    let rec = recorder();
    let engine = PipelineEngine::start(
        cfg.clone(),
        in_process(Arc::new(SingleLock::new())),
        rec.clone(),
    )
    .unwrap();
    run_jobs(&engine, 2, 2);
    drop(engine);
    let events = rec.events();
    assert!(
        events.iter().any(|e| e.event == EventKind::BudgetWaitStart),
        "with room for one partition, some partition must have waited"
    );
    // Never more than one partition holding memory at once.
    let mut held = 0i64;
    let mut sorted = events.clone();
    sorted.sort_by(|a, b| a.ms.total_cmp(&b.ms));
    for e in &sorted {
        match e.event {
            EventKind::BudgetAcquired => held += 1,
            EventKind::BudgetReleased => held -= 1,
            _ => {}
        }
        assert!(held <= 1, "two partitions held memory at once");
    }

    cfg.memory_budget = Some(params + one - 1);
    let engine =
        PipelineEngine::start(cfg, in_process(Arc::new(SingleLock::new())), recorder()).unwrap();
    let err = engine.submit(make_job(0, 1)).wait().unwrap_err();
    assert!(matches!(err, JobError::Budget(_)), "{err}");
    assert!(err.to_string().contains("memory budget"), "{err}");
}

#[test]
fn timeline_records_every_stage_of_every_partition() {
    let rec = recorder();
    let engine = PipelineEngine::start(
        small_config(),
        in_process(Arc::new(SingleLock::new())),
        rec.clone(),
    )
    .unwrap();
    run_jobs(&engine, 2, 2);
    drop(engine);
    let events = rec.events();
    for kind in [
        EventKind::SynthStart,
        EventKind::SpmvEnd,
        EventKind::PrepEnd,
        EventKind::GpuQueue,
        EventKind::LockAcquired,
        EventKind::GpuEnd,
        EventKind::BG2End,
        EventKind::AssemblyEnd,
        EventKind::VerifyEnd,
        EventKind::DeallocEnd,
    ] {
        let n = events.iter().filter(|e| e.event == kind).count();
        assert!(n >= 4, "{kind}: {n} events for 4 partitions");
    }
    let a = cuzk_timeline::analyse(&events);
    assert_eq!(a.jobs_done, 2);
    assert_eq!(a.partitions, 4);
    assert_eq!(a.unfinished, 0);
    let line = events[0].timeline_line();
    assert!(line.starts_with("TIMELINE,"), "{line}");
}

// ---------------------------------------------------------------------------
// Pre-staging: a backend may prepare a, b, c before the GPU lock is taken.

/// A GPU lock that notes which thread holds each device, around a `SingleLock`.
struct NotingLock {
    inner: SingleLock,
    holder: Arc<Mutex<Option<std::thread::ThreadId>>>,
}

impl GpuLock for NotingLock {
    fn partition(&self, device: usize) -> LockGuard {
        let g = self.inner.partition(device);
        *self.holder.lock().unwrap() = Some(std::thread::current().id());
        let holder = Arc::clone(&self.holder);
        LockGuard::new(g.waited(), move || {
            *holder.lock().unwrap() = None;
            drop(g);
        })
    }
    fn region(&self, device: usize, region: Region) -> LockGuard {
        self.inner.region(device, region)
    }
}

/// What the staging backend saw, in order: the call and whether the calling
/// thread held the GPU lock then.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Call {
    Stage { locked: bool },
    ProveRef { locked: bool, staged: bool },
    ProveWitness { locked: bool, staged: bool },
    ProveOwned,
    Unstage { locked: bool },
}

/// The CPU backend with a recording `stage` (or one that fails, or panics).
struct Staging {
    inner: Arc<dyn GpuBackend>,
    holder: Arc<Mutex<Option<std::thread::ThreadId>>>,
    /// (thread, call) in order.
    calls: Arc<Mutex<Vec<(std::thread::ThreadId, Call)>>>,
    /// Addresses of the `a` vectors staged now.
    staged: Arc<Mutex<HashSet<usize>>>,
    fail: Option<&'static str>,
    /// What it says of evaluating a, b, c from the witness (the CPU backend does,
    /// on the host): `Device` makes the engine hand it witnesses by default.
    abc_eval: AbcEval,
    /// What became of the split data staged (`stage_splits`).
    splits: Arc<Mutex<SplitLog>>,
}

/// The split data's stagings as the staging backend saw them.
#[derive(Debug, Default)]
struct SplitLog {
    /// L's bitmap address of each staging alive now, with how many queries.
    staged: HashMap<usize, usize>,
    /// Per staging: whether the staging thread held the GPU lock.
    locked: Vec<bool>,
    /// Backend calls whose L split was staged then (and how many were not).
    proven_staged: usize,
    proven_unstaged: usize,
}

impl SplitLog {
    fn prove<G>(&mut self, l: &SplitMsm<'_, G>) {
        match self
            .staged
            .contains_key(&(l.split.ones_words().as_ptr() as usize))
        {
            true => self.proven_staged += 1,
            false => self.proven_unstaged += 1,
        }
    }
}

impl Staging {
    fn new(fail: Option<&'static str>) -> Self {
        Self {
            inner: cpu_backend(),
            holder: Arc::default(),
            calls: Arc::default(),
            staged: Arc::default(),
            fail,
            abc_eval: AbcEval::No,
            splits: Arc::default(),
        }
    }

    /// Records `addr` staged, and a guard that unstages it (noted, with whether
    /// the dropping thread holds the lock).
    fn stage_at(&self, addr: usize) -> Result<Staged, BackendError> {
        match self.fail {
            Some("error") => return Err(BackendError::Device("could not pin".into())),
            Some(_) => panic!("the backend panicked while staging"),
            None => {}
        }
        self.note(Call::Stage {
            locked: Self::locked(&self.holder),
        });
        self.staged.lock().unwrap().insert(addr);
        let (holder, calls, staged) = (
            Arc::clone(&self.holder),
            Arc::clone(&self.calls),
            Arc::clone(&self.staged),
        );
        Ok(Staged::new(move || {
            staged.lock().unwrap().remove(&addr);
            let locked = Self::locked(&holder);
            let me = std::thread::current().id();
            calls.lock().unwrap().push((me, Call::Unstage { locked }));
        }))
    }

    fn locked(holder: &Mutex<Option<std::thread::ThreadId>>) -> bool {
        *holder.lock().unwrap() == Some(std::thread::current().id())
    }

    fn note(&self, call: Call) {
        let me = std::thread::current().id();
        self.calls.lock().unwrap().push((me, call));
    }
}

impl GpuBackend for Staging {
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    fn stage(&self, abc: AbcRef<'_>) -> Result<Staged, BackendError> {
        self.stage_at(abc.a.as_ptr() as usize)
    }

    fn abc_eval(&self) -> AbcEval {
        self.abc_eval
    }

    fn stage_witness(&self, _input: &[Scalar], aux: &[Scalar]) -> Result<Staged, BackendError> {
        self.stage_at(aux.as_ptr() as usize)
    }

    fn stage_splits(&self, splits: &[SplitRef<'_>]) -> Result<Staged, BackendError> {
        match self.fail {
            Some("error") => return Err(BackendError::Device("could not copy".into())),
            Some(_) => panic!("the backend panicked while staging split data"),
            None => {}
        }
        let addr = splits[0].ones_words().as_ptr() as usize;
        {
            let mut log = self.splits.lock().unwrap();
            log.staged.insert(addr, splits.len());
            log.locked.push(Self::locked(&self.holder));
        }
        let log = Arc::clone(&self.splits);
        Ok(Staged::new(move || {
            log.lock().unwrap().staged.remove(&addr);
        }))
    }

    fn prove_partition_witness(
        &self,
        job: WitnessJobRef<'_>,
    ) -> Result<PartitionResult, BackendError> {
        let staged = self
            .staged
            .lock()
            .unwrap()
            .contains(&(job.aux.as_ptr() as usize));
        self.note(Call::ProveWitness {
            locked: Self::locked(&self.holder),
            staged,
        });
        self.splits.lock().unwrap().prove(&job.l);
        self.inner.prove_partition_witness(job)
    }

    fn prove_partition(&self, job: PartitionJob<'_>) -> Result<PartitionResult, BackendError> {
        self.note(Call::ProveOwned);
        self.inner.prove_partition(job)
    }

    fn prove_partition_ref(
        &self,
        job: PartitionJobRef<'_>,
    ) -> Result<PartitionResult, BackendError> {
        let staged = self
            .staged
            .lock()
            .unwrap()
            .contains(&(job.abc.a.as_ptr() as usize));
        self.note(Call::ProveRef {
            locked: Self::locked(&self.holder),
            staged,
        });
        self.splits.lock().unwrap().prove(&job.l);
        self.inner.prove_partition_ref(job)
    }
}

/// Checks that each GPU worker thread's calls are rounds of stage (unlocked) →
/// `prove` (the backend call, under the lock) → unstage (unlocked), and returns
/// how many rounds (partitions) there were.
fn staged_rounds(calls: &[(std::thread::ThreadId, Call)], prove: Call) -> usize {
    let threads: HashSet<_> = calls.iter().map(|(t, _)| *t).collect();
    let mut partitions = 0;
    for t in threads {
        let mine: Vec<Call> = calls
            .iter()
            .filter(|(u, _)| *u == t)
            .map(|(_, c)| *c)
            .collect();
        assert_eq!(mine.len() % 3, 0, "{mine:?}");
        for c in mine.chunks(3) {
            assert_eq!(
                c,
                [
                    Call::Stage { locked: false },
                    prove,
                    Call::Unstage { locked: false }
                ],
                "{mine:?}"
            );
            partitions += 1;
        }
    }
    partitions
}

/// Every job's proofs, with the engine given.
fn proofs_of(
    engine: &PipelineEngine,
    jobs: usize,
    partitions: usize,
) -> Vec<Vec<cuzk::ProofPoints>> {
    let handles: Vec<_> = (0..jobs)
        .map(|j| engine.submit(make_job(j, partitions)))
        .collect();
    handles
        .into_iter()
        .enumerate()
        .map(|(j, h)| {
            let out = h.wait().unwrap_or_else(|e| panic!("job {j} failed: {e}"));
            assert!(out.verified);
            check_proofs(j, &out.proofs);
            out.proofs
        })
        .collect()
}

#[test]
fn the_engine_stages_before_the_gpu_lock_and_unstages_after_the_call() {
    let backend = Arc::new(Staging::new(None));
    let holder = Arc::clone(&backend.holder);
    let policies = Policies {
        backend: backend.clone(),
        lock: Arc::new(NotingLock {
            inner: SingleLock::new(),
            holder,
        }),
        ..in_process(Arc::new(NoLock))
    };
    let rec = recorder();
    // Two GPU workers: one stages while the other holds the lock.
    let engine = PipelineEngine::start(small_config(), policies, rec.clone()).unwrap();
    let staged_proofs = proofs_of(&engine, 3, 2);
    drop(engine);

    let calls = backend.calls.lock().unwrap().clone();
    // Per GPU worker thread: stage (unlocked) → prove_ref (locked, staged) →
    // unstage (unlocked), once per partition, never the owned call.
    let prove_ref = Call::ProveRef {
        locked: true,
        staged: true,
    };
    assert_eq!(staged_rounds(&calls, prove_ref), 6);
    assert!(backend.staged.lock().unwrap().is_empty());
    // The split data too: staged unlocked (L, A, B: the G2 sum is the engine's
    // here), found staged by every backend call, all unstaged after.
    {
        let log = backend.splits.lock().unwrap();
        assert_eq!(log.locked, [false; 6]);
        assert_eq!((log.proven_staged, log.proven_unstaged), (6, 0));
        assert!(log.staged.is_empty(), "{log:?}");
    }

    // One STAGED event per partition, before its lock wait.
    let events = rec.events();
    let staged: Vec<_> = events
        .iter()
        .filter(|e| e.event == EventKind::Staged)
        .collect();
    assert_eq!(staged.len(), 6);
    for s in &staged {
        assert!(s.detail.starts_with("ms="), "{}", s.detail);
        let wait = events
            .iter()
            .find(|e| {
                e.event == EventKind::LockWaitStart && e.job == s.job && e.partition == s.partition
            })
            .expect("a lock wait after staging");
        assert!(wait.ms >= s.ms);
    }

    // The same proofs, byte for byte, as the unstaged engine.
    let engine = PipelineEngine::start(
        small_config(),
        in_process(Arc::new(SingleLock::new())),
        recorder(),
    )
    .unwrap();
    assert_eq!(proofs_of(&engine, 3, 2), staged_proofs);
}

#[test]
fn a_staging_error_or_panic_does_not_fail_the_partition() {
    for fail in ["error", "panic"] {
        let backend = Arc::new(Staging::new(Some(fail)));
        let policies = Policies {
            backend: backend.clone(),
            ..in_process(Arc::new(SingleLock::new()))
        };
        let rec = recorder();
        let engine = PipelineEngine::start(small_config(), policies, rec.clone()).unwrap();
        run_jobs(&engine, 2, 2);
        drop(engine);
        // Unstaged: the a, b, c were handed over.
        let calls = backend.calls.lock().unwrap();
        assert_eq!(calls.len(), 4, "{fail}: {calls:?}");
        assert!(calls.iter().all(|(_, c)| *c == Call::ProveOwned));
        let failed = rec
            .events()
            .iter()
            .filter(|e| e.event == EventKind::Staged && e.detail.contains("failed"))
            .count();
        assert_eq!(failed, 4, "{fail}");
    }
}

#[test]
fn the_single_path_prover_stages_around_the_backend_call() {
    let f = fixture();
    let prove = |backend: Arc<dyn GpuBackend>| {
        let engine = cuzk::BatchProver::new(cuzk::BatchProverConfig {
            synth_threads: 2,
            b_g2_threads: 1,
            backend: Some(backend),
            ..Default::default()
        })
        .unwrap();
        let c = MulChain::new(LOG, 2, Some(seed(0, 0))).unwrap();
        let mut g = ChaCha20Rng::seed_from_u64(seed(0, 0));
        let (r, s) = (Scalar::random(&mut g), Scalar::random(&mut g));
        let p = engine
            .prove_compiled(&f.r1cs, c, &&f.params, r, s)
            .unwrap()
            .proof;
        let mut bytes = Vec::new();
        p.write(&mut bytes).unwrap();
        bytes
    };
    let staging = Arc::new(Staging::new(None));
    let staged = prove(staging.clone());
    let calls: Vec<Call> = staging.calls.lock().unwrap().iter().map(|c| c.1).collect();
    assert_eq!(
        calls,
        [
            Call::Stage { locked: false },
            Call::ProveRef {
                locked: false,
                staged: true
            },
            Call::Unstage { locked: false },
        ]
    );
    for fail in ["error", "panic"] {
        assert_eq!(prove(Arc::new(Staging::new(Some(fail)))), staged, "{fail}");
    }
    assert_eq!(prove(cpu_backend()), staged);
}

/// A partition is charged the worst case (every variable in each split's tail) until
/// one partition of its shape has been prepared; then what that one's splits took,
/// a quarter more. A SHA-256 witness is bits: its later partitions are charged far
/// less, which is what lets a host run several PoRep partitions (97-98% zeros and
/// ones) at once.
#[test]
fn the_charge_for_splits_is_learned_from_the_shape() {
    use cuzk_circuits::Sha256Chain;
    let log = 12;
    let params = generate_random_parameters::<Bls12, _, _>(
        Sha256Chain::new(log, None).unwrap(),
        &mut ChaCha20Rng::seed_from_u64(3),
    )
    .unwrap();
    let r1cs = Arc::new(
        cuzk_synth::compile(Sha256Chain::new(log, Some(1)).unwrap())
            .unwrap()
            .r1cs,
    );
    let srs = Arc::new(cuzk::srs_from_source(&&params, &r1cs).unwrap());
    let verifier = Arc::new(BellpersonVerifier::new(&params.vk));
    let rec = recorder();
    let engine =
        PipelineEngine::start(small_config(), in_process(Arc::new(NoLock)), rec.clone()).unwrap();
    for seed in [5, 6] {
        let c = Sha256Chain::new(log, Some(seed)).unwrap();
        let spec = job(
            r1cs.clone(),
            srs.clone(),
            vec![PartitionInput {
                public_inputs: c.public_inputs().unwrap(),
                circuit: c,
                r: Scalar::from(seed),
                s: Scalar::from(seed + 1),
            }],
            Some(verifier.clone()),
        );
        assert!(engine.submit(spec).wait().unwrap().verified);
    }
    drop(engine);
    let events = rec.events();
    let of = |kind: EventKind, job: u64| {
        events
            .iter()
            .find(|e| e.event == kind && e.job == job)
            .and_then(|e| e.bytes)
            .unwrap_or_else(|| panic!("no {kind:?} with bytes for job {job}"))
    };
    let (first, second) = (
        of(EventKind::BudgetAcquired, 1),
        of(EventKind::BudgetAcquired, 2),
    );
    assert_eq!(first, partition_bytes(&r1cs), "first: the worst case");
    let splits = of(EventKind::PrepEnd, 1);
    assert_eq!(
        second,
        cuzk_scheduler::partition_bytes_for(
            &r1cs,
            cuzk_scheduler::Held::Abc { host_h: true },
            Some(splits + splits / 4),
        ),
        "second: the first's splits and a quarter"
    );
    assert!(
        second < first,
        "bits make small splits: {second} charged after {first}"
    );
}

/// A backend that evaluates a, b, c on its device gets each partition's witness
/// (staged before the lock, proven under it, unstaged after), the engine runs no
/// spmv stage, and the proofs are the same bytes as with the engine's spmv. Asked
/// for explicitly, a backend that does not offer it, or `check_witness` (which
/// reads a, b, c on the host), is a configuration error at start.
#[test]
fn a_backend_that_evaluates_a_b_c_gets_the_witness_and_proves_the_same() {
    let backend = Arc::new(Staging {
        abc_eval: AbcEval::Device,
        ..Staging::new(None)
    });
    let holder = Arc::clone(&backend.holder);
    let policies = Policies {
        backend: backend.clone(),
        lock: Arc::new(NotingLock {
            inner: SingleLock::new(),
            holder,
        }),
        ..in_process(Arc::new(NoLock))
    };
    let rec = recorder();
    // Unset: on the backend, since it says it evaluates them on its device.
    let engine = PipelineEngine::start(small_config(), policies, rec.clone()).unwrap();
    assert!(engine.abc_on_backend());
    let witness_proofs = proofs_of(&engine, 3, 2);
    drop(engine);
    let calls = backend.calls.lock().unwrap().clone();
    let prove_witness = Call::ProveWitness {
        locked: true,
        staged: true,
    };
    assert_eq!(staged_rounds(&calls, prove_witness), 6);
    let events = rec.events();
    assert!(events.iter().all(|e| e.event != EventKind::SpmvStart));
    assert_eq!(
        events
            .iter()
            .filter(|e| e.event == EventKind::GpuEnd)
            .count(),
        6
    );

    // The CPU backend evaluates them on the host: unset, the engine's spmv runs;
    // asked for, the backend's. The same proofs, byte for byte, all three ways.
    let host = PipelineEngine::start(
        small_config(),
        in_process(Arc::new(SingleLock::new())),
        recorder(),
    )
    .unwrap();
    assert!(!host.abc_on_backend());
    assert_eq!(proofs_of(&host, 3, 2), witness_proofs);
    drop(host);
    let asked = PipelineConfig {
        abc_on_backend: Some(true),
        ..small_config()
    };
    let cpu = PipelineEngine::start(
        asked.clone(),
        in_process(Arc::new(SingleLock::new())),
        recorder(),
    )
    .unwrap();
    assert!(cpu.abc_on_backend());
    assert_eq!(proofs_of(&cpu, 3, 2), witness_proofs);
    drop(cpu);

    // Refused at start: a backend that does not offer it; with check_witness.
    let plain = Policies {
        backend: Arc::new(Staging::new(None)),
        ..in_process(Arc::new(NoLock))
    };
    let e = PipelineEngine::start(asked.clone(), plain, recorder()).unwrap_err();
    assert!(e.to_string().contains("does not evaluate"), "{e}");
    let checking = PipelineConfig {
        check_witness: true,
        ..asked
    };
    let e = PipelineEngine::start(checking, in_process(Arc::new(NoLock)), recorder()).unwrap_err();
    assert!(e.to_string().contains("check_witness"), "{e}");
}
