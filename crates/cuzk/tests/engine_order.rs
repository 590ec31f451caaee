//! The pipelined engine's order and reliability: priorities in every queue, each
//! job's `b_g2_msm` finishing in order, and panics in the verifier or a policy
//! failing only their job, with the panic's message. Order is asserted on the
//! TIMELINE's events, never on time.

use std::sync::{
    mpsc::{channel, Receiver},
    Arc, OnceLock,
};
use std::time::{Duration, Instant};

use bellperson::groth16::{generate_random_parameters, Parameters};
use blstrs::{Bls12, Scalar};
use cuzk::pipeline::{job, BellpersonVerifier, PartitionInput, Priority};
use cuzk_alloc::{DeallocPolicy, InlineDealloc, Released, ThrottleControl};
use cuzk_assembly::ProofPoints;
use cuzk_circuits::MulChain;
use cuzk_gpu_backend::{lock::SingleLock, CpuBackend, GpuBackend};
use cuzk_scheduler::{
    JobError, JobSpec, PartitionSpec, PipelineConfig, PipelineEngine, Policies, ProofVerifier,
    Unthrottled, WitnessSource,
};
use cuzk_synth::{SynthError, Throttle, Witness};
use cuzk_timeline::{EventKind, Recorder};
use ff::Field;
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;

const LOG: u32 = 10;

struct Fixture {
    r1cs: Arc<cuzk::R1cs>,
    srs: Arc<cuzk::Srs>,
    verifier: Arc<BellpersonVerifier>,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let params: Parameters<Bls12> = generate_random_parameters(
            MulChain::new(LOG, 2, None).unwrap(),
            &mut ChaCha20Rng::seed_from_u64(3),
        )
        .unwrap();
        let r1cs = Arc::new(cuzk::compile_shape(MulChain::new(LOG, 2, Some(0)).unwrap()).unwrap());
        let srs = Arc::new(cuzk::srs_from_source(&&params, &r1cs).unwrap());
        Fixture {
            verifier: Arc::new(BellpersonVerifier::new(&params.vk)),
            r1cs,
            srs,
        }
    })
}

fn inputs(seed: u64) -> PartitionInput<MulChain> {
    let c = MulChain::new(LOG, 2, Some(seed)).unwrap();
    let mut g = ChaCha20Rng::seed_from_u64(seed);
    PartitionInput {
        public_inputs: c.public_inputs().unwrap(),
        circuit: c,
        r: Scalar::random(&mut g),
        s: Scalar::random(&mut g),
    }
}

fn make_job(seed: u64, partitions: usize, priority: Priority) -> JobSpec {
    let f = fixture();
    let parts = (0..partitions as u64)
        .map(|p| inputs(seed * 100 + p))
        .collect();
    let mut spec = job(
        f.r1cs.clone(),
        f.srs.clone(),
        parts,
        Some(f.verifier.clone()),
    );
    spec.priority = priority;
    spec
}

fn policies() -> Policies {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    Policies {
        backend: Arc::new(CpuBackend::new(Arc::new(pool))) as Arc<dyn GpuBackend>,
        dealloc: Arc::new(InlineDealloc),
        throttle: Arc::new(Unthrottled),
        lock: Arc::new(SingleLock::new()),
    }
}

fn config(synth_jobs: usize) -> PipelineConfig {
    PipelineConfig {
        synth_jobs: Some(synth_jobs),
        synth_threads: 1,
        gpu_workers_per_device: 1,
        gpu_threads: 2,
        memory_budget: Some(1 << 30),
        b_g2_on_backend: Some(false),
        ..PipelineConfig::default()
    }
}

/// A circuit whose synthesis waits for a signal: holds the only synthesis worker.
struct Gated {
    circuit: MulChain,
    go: Receiver<()>,
}

impl WitnessSource for Gated {
    fn synthesize(
        self: Box<Self>,
        r1cs: &cuzk::R1cs,
        _: &rayon::ThreadPool,
    ) -> Result<Witness, SynthError> {
        let _ = self.go.recv();
        cuzk_synth::synthesize_witness_for(r1cs, self.circuit)
    }
}

/// Polls the recorder until `job` has an event of `kind` (no timing is asserted).
fn wait_for(rec: &Recorder, kind: EventKind, job: u64) {
    let start = Instant::now();
    while !rec.events().iter().any(|e| e.event == kind && e.job == job) {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no {kind:?} for job {job}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A Critical job submitted behind ten queued Normal jobs starts synthesis next,
/// then High, the Normal jobs in submission order, and Low last.
#[test]
fn a_critical_job_jumps_the_queue() {
    let rec = Arc::new(Recorder::new(Instant::now()));
    let engine = PipelineEngine::start(config(1), policies(), rec.clone()).unwrap();
    let f = fixture();
    let (go, gate) = channel();
    let blocker = engine.submit(JobSpec {
        r1cs: f.r1cs.clone(),
        srs: f.srs.clone(),
        partitions: vec![PartitionSpec {
            circuit: Box::new(Gated {
                circuit: MulChain::new(LOG, 2, Some(7)).unwrap(),
                go: gate,
            }),
            r: Scalar::ONE,
            s: Scalar::ONE,
            public_inputs: Vec::new(),
        }],
        verifier: None,
        priority: Priority::Normal,
    });
    let blocker_id = blocker.id();
    wait_for(&rec, EventKind::SynthStart, blocker_id);
    let mut handles = Vec::new();
    for j in 0..10 {
        handles.push(engine.submit(make_job(j + 1, 1, Priority::Normal)));
    }
    let low = engine.submit(make_job(20, 1, Priority::Low));
    let critical = engine.submit(make_job(21, 1, Priority::Critical));
    let high = engine.submit(make_job(22, 1, Priority::High));
    let normal_ids: Vec<u64> = handles.iter().map(|h| h.id()).collect();
    let (low_id, critical_id, high_id) = (low.id(), critical.id(), high.id());
    go.send(()).unwrap();
    blocker.wait().unwrap();
    for h in handles.into_iter().chain([low, critical, high]) {
        let out = h.wait().unwrap();
        assert!(out.verified);
    }
    let started: Vec<u64> = rec
        .events()
        .iter()
        .filter(|e| e.event == EventKind::SynthStart)
        .map(|e| e.job)
        .collect();
    let mut want = vec![blocker_id, critical_id, high_id];
    want.extend(&normal_ids);
    want.push(low_id);
    assert_eq!(
        started, want,
        "synthesis order (critical {critical_id}, high {high_id}, low {low_id})"
    );
}

/// With many partitions in flight, the CPU `b_g2_msm`s run one at a time, in
/// queue order, so an earlier job's finish before a later job's (with spawned
/// MSMs sharing the pool they all finished together).
#[test]
fn b_g2_msms_run_one_at_a_time_in_order() {
    let rec = Arc::new(Recorder::new(Instant::now()));
    let engine = PipelineEngine::start(config(1), policies(), rec.clone()).unwrap();
    let handles: Vec<_> = (0..4)
        .map(|j| engine.submit(make_job(30 + j, 2, Priority::Normal)))
        .collect();
    for h in handles {
        assert!(h.wait().unwrap().verified);
    }
    drop(engine);
    let mut running = 0;
    let mut ends = Vec::new();
    for e in rec.events() {
        match e.event {
            EventKind::BG2Start => {
                running += 1;
                assert_eq!(running, 1, "two b_g2_msms overlapped: {e:?}");
            }
            EventKind::BG2End => {
                running -= 1;
                ends.push((e.job, e.partition));
            }
            _ => {}
        }
    }
    assert_eq!(ends.len(), 8);
    // One synthesis worker and one GPU worker hand them over in (job, partition)
    // order, and they finish in that order.
    let mut sorted = ends.clone();
    sorted.sort();
    assert_eq!(ends, sorted);
}

struct PanickingVerifier;
impl ProofVerifier for PanickingVerifier {
    fn verify(&self, _: &ProofPoints, _: &[Scalar]) -> Result<bool, String> {
        panic!("the verifier exploded");
    }
}

struct PanickingDealloc;
impl DeallocPolicy for PanickingDealloc {
    fn release(&self, buf: Released) {
        if buf.label() == "splits" {
            panic!("the dealloc policy exploded");
        }
        buf.free();
    }
    fn drain(&self) {}
}

struct PanickingThrottle;
impl Throttle for PanickingThrottle {
    fn checkpoint(&self, _: usize) {}
}
impl ThrottleControl for PanickingThrottle {
    fn raise(&self) {
        panic!("the throttle exploded");
    }
    fn lower(&self) {}
}

fn failure_of(engine: &PipelineEngine, spec: JobSpec) -> String {
    match engine.submit(spec).wait() {
        Err(JobError::Partition { message, .. }) => message,
        other => panic!("expected a failed partition, got {other:?}"),
    }
}

/// A panic in the verifier, a deallocation policy or a throttle fails its job with
/// the panic's message; the engine goes on proving.
#[test]
fn panics_fail_their_job_with_the_message() {
    let rec = || Arc::new(Recorder::new(Instant::now()));
    let engine = PipelineEngine::start(config(1), policies(), rec()).unwrap();
    let mut spec = make_job(40, 1, Priority::Normal);
    spec.verifier = Some(Arc::new(PanickingVerifier));
    let m = failure_of(&engine, spec);
    assert!(
        m.contains("verify") && m.contains("the verifier exploded"),
        "{m}"
    );
    assert!(
        engine
            .submit(make_job(41, 1, Priority::Normal))
            .wait()
            .unwrap()
            .verified
    );

    let mut p = policies();
    p.dealloc = Arc::new(PanickingDealloc);
    let engine = PipelineEngine::start(config(1), p, rec()).unwrap();
    let m = failure_of(&engine, make_job(42, 1, Priority::Normal));
    assert!(m.contains("the dealloc policy exploded"), "{m}");

    let mut p = policies();
    p.throttle = Arc::new(PanickingThrottle);
    let engine = PipelineEngine::start(config(1), p, rec()).unwrap();
    let m = failure_of(&engine, make_job(43, 1, Priority::Normal));
    assert!(
        m.contains("throttle") && m.contains("the throttle exploded"),
        "{m}"
    );
    // The handle of a job still running comes back after a timeout.
    let h = engine.submit(make_job(44, 1, Priority::Normal));
    let h = match h.wait_timeout(Duration::ZERO) {
        Err(h) => h,
        Ok(r) => panic!("a job cannot be over at once: {r:?}"),
    };
    assert!(h.wait().is_err());
}

/// The budget counts each job's parameters from its first admitted partition on:
/// two jobs whose parameters do not fit together run one after the other instead
/// of each holding what the other waits for.
#[test]
fn parameters_that_do_not_fit_together_run_in_turn() {
    let f = fixture();
    let srs_bytes = f.srs.host_bytes();
    let part = cuzk_scheduler::partition_bytes(&f.r1cs);
    let mut cfg = config(2);
    cfg.memory_budget = Some(srs_bytes + srs_bytes / 2 + 2 * part);
    let rec = Arc::new(Recorder::new(Instant::now()));
    let engine = PipelineEngine::start(cfg, policies(), rec).unwrap();
    let mut a = make_job(50, 2, Priority::Normal);
    let mut b = make_job(51, 2, Priority::Normal);
    // Two copies of the parameters: counted apart.
    a.srs = Arc::new((*f.srs).clone());
    b.srs = Arc::new((*f.srs).clone());
    let (a, b) = (engine.submit(a), engine.submit(b));
    for h in [a, b] {
        match h.wait_timeout(Duration::from_secs(600)) {
            Ok(r) => assert!(r.unwrap().verified),
            Err(_) => panic!("a job waits for memory its own parameters hold"),
        }
    }
    assert_eq!(engine.budget().used(), 0, "everything went back");
}

/// Partitions of one job that wait for the budget together, before any of them
/// holds the job's parameters, each first count the parameters in their need; the
/// one admitted first holds them for the job, and the others' need must drop them
/// while they wait. Here the parameters counted twice never fit, so a need read
/// once (as it was: on the H200, five partitions of a 32 GiB sector waited for
/// ever once the witness-copy buffers counted against the budget) leaves the job
/// waiting for itself. A gated job fills the budget until all four partitions wait.
#[test]
fn partitions_admitted_together_count_their_parameters_once() {
    let f = fixture();
    let srs_bytes = f.srs.host_bytes();
    let part = cuzk_scheduler::partition_bytes(&f.r1cs);
    assert!(
        srs_bytes > part,
        "the parameters must not fit twice: {srs_bytes} vs {part}"
    );
    let mut cfg = config(5);
    cfg.memory_budget = Some(srs_bytes + part + part / 2);
    let rec = Arc::new(Recorder::new(Instant::now()));
    let engine = PipelineEngine::start(cfg, policies(), rec.clone()).unwrap();
    let (go, gate) = channel();
    let gated = engine.submit(gated_job(70, gate));
    wait_for(&rec, EventKind::SynthStart, gated.id());
    let mut spec = make_job(71, 4, Priority::Normal);
    spec.srs = Arc::new((*f.srs).clone());
    let h = engine.submit(spec);
    let start = Instant::now();
    while rec
        .events()
        .iter()
        .filter(|e| e.event == EventKind::BudgetWaitStart && e.job == h.id())
        .count()
        < 4
    {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "the partitions never waited"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    go.send(()).unwrap();
    gated.wait().unwrap();
    match h.wait_timeout(Duration::from_secs(120)) {
        Ok(r) => assert!(r.unwrap().verified),
        Err(_) => panic!("a partition waits for its job's parameters counted twice"),
    }
    assert_eq!(engine.budget().used(), 0, "everything went back");
}

/// A job whose one partition's synthesis waits for `go`.
fn gated_job(seed: u64, go: Receiver<()>) -> JobSpec {
    let f = fixture();
    JobSpec {
        r1cs: f.r1cs.clone(),
        srs: f.srs.clone(),
        partitions: vec![PartitionSpec {
            circuit: Box::new(Gated {
                circuit: MulChain::new(LOG, 2, Some(seed)).unwrap(),
                go,
            }),
            r: Scalar::ONE,
            s: Scalar::ONE,
            public_inputs: Vec::new(),
        }],
        verifier: None,
        priority: Priority::Normal,
    }
}

fn first(rec: &Recorder, kind: EventKind, job: u64) -> usize {
    rec.events()
        .iter()
        .position(|e| e.event == kind && e.job == job)
        .unwrap_or_else(|| panic!("no {kind:?} for job {job}"))
}

/// Two Normal partitions hold both Normal synthesis slots and, with the parameters,
/// all of the budget Normal work may use (their synthesis waits for a gate); three
/// more Normal jobs queue behind them; then a Critical job arrives. With the reserve
/// (`reserve`: a slot and one partition's bytes) it is admitted at once and proved
/// while the gates are still shut; without it, it starts only once a gated
/// partition has left synthesis. Either way it goes before the queued Normal jobs.
/// Returns the recorder and the ids (gated, queued, critical).
fn critical_behind_a_full_engine(reserve: bool) -> (Arc<Recorder>, Vec<u64>, Vec<u64>, u64) {
    let f = fixture();
    // The worst-case charge: no partition of the shape is prepared before the
    // critical one is admitted, so every partition here is charged this.
    let part = cuzk_scheduler::partition_bytes(&f.r1cs);
    let normal_room = f.srs.host_bytes() + 2 * part + part / 2;
    let mut cfg = config(2);
    if reserve {
        cfg.memory_budget = Some(normal_room + part);
        cfg.critical_reserve = Some(part);
        cfg.critical_synth_slots = 1;
    } else {
        cfg.memory_budget = Some(normal_room);
        cfg.critical_reserve = Some(0);
        cfg.critical_synth_slots = 0;
    }
    let rec = Arc::new(Recorder::new(Instant::now()));
    let engine = PipelineEngine::start(cfg, policies(), rec.clone()).unwrap();
    let mut gates = Vec::new();
    let mut gated = Vec::new();
    for seed in [60, 61] {
        let (go, gate) = channel();
        gates.push(go);
        gated.push(engine.submit(gated_job(seed, gate)));
    }
    let gated_ids: Vec<u64> = gated.iter().map(|h| h.id()).collect();
    for &id in &gated_ids {
        wait_for(&rec, EventKind::SynthStart, id);
    }
    // Full for Normal work: one more Normal partition would have to wait.
    let used = engine.budget().used();
    assert!(used + part > normal_room, "the budget is not full: {used}");
    let queued: Vec<_> = (0..3)
        .map(|j| engine.submit(make_job(62 + j, 1, Priority::Normal)))
        .collect();
    let queued_ids: Vec<u64> = queued.iter().map(|h| h.id()).collect();
    let critical = engine.submit(make_job(70, 1, Priority::Critical));
    let critical_id = critical.id();
    let critical = if reserve {
        // Proved while both gates are still shut: it needed no slot and no byte the
        // Normal partitions hold.
        match critical.wait_timeout(Duration::from_secs(600)) {
            Ok(r) => assert!(r.unwrap().verified),
            Err(_) => panic!("the critical job was not admitted past the full engine"),
        }
        None
    } else {
        Some(critical)
    };
    for go in gates {
        go.send(()).unwrap();
    }
    for h in gated.into_iter().chain(queued).chain(critical) {
        h.wait().unwrap();
    }
    drop(engine);
    (rec, gated_ids, queued_ids, critical_id)
}

#[test]
fn a_critical_job_uses_the_reserve_past_a_full_engine() {
    let (rec, gated, queued, critical) = critical_behind_a_full_engine(true);
    let done = first(&rec, EventKind::JobDone, critical);
    for &g in &gated {
        assert!(
            done < first(&rec, EventKind::SynthEnd, g),
            "the critical job finished while gated job {g} was still in synthesis"
        );
    }
    // Admitted without waiting for memory, before any queued Normal job started.
    assert!(!rec
        .events()
        .iter()
        .any(|e| e.event == EventKind::BudgetWaitStart && e.job == critical));
    for &q in &queued {
        assert!(done < first(&rec, EventKind::SynthStart, q));
    }
}

#[test]
fn without_the_reserve_a_critical_job_waits_for_a_normal_slot() {
    let (rec, gated, queued, critical) = critical_behind_a_full_engine(false);
    let start = first(&rec, EventKind::SynthStart, critical);
    let first_gated_end = gated
        .iter()
        .map(|&g| first(&rec, EventKind::SynthEnd, g))
        .min()
        .unwrap();
    assert!(
        start > first_gated_end,
        "with no reserved slot, the critical job starts only when a gated one leaves"
    );
    // Still first among the waiting jobs.
    for &q in &queued {
        assert!(start < first(&rec, EventKind::SynthStart, q));
    }
}

/// A reserve at or past the budget is a configuration error; with a fixed reserve a
/// Normal job that only fits the whole budget is refused at submission, naming
/// the reserve, while a Critical one of the same size is accepted.
#[test]
fn the_reserve_is_checked_at_start_and_at_submission() {
    let f = fixture();
    let part = cuzk_scheduler::partition_bytes(&f.r1cs);
    let need = f.srs.host_bytes() + part;
    let mut cfg = config(1);
    cfg.memory_budget = Some(need);
    cfg.critical_reserve = Some(need);
    let e = PipelineEngine::start(
        cfg.clone(),
        policies(),
        Arc::new(Recorder::new(Instant::now())),
    )
    .unwrap_err();
    assert!(e.to_string().contains("critical_reserve"), "{e}");
    cfg.memory_budget = Some(need + part / 2);
    cfg.critical_reserve = Some(part);
    let engine =
        PipelineEngine::start(cfg, policies(), Arc::new(Recorder::new(Instant::now()))).unwrap();
    match engine.submit(make_job(80, 1, Priority::Normal)).wait() {
        Err(JobError::Budget(e)) => {
            assert!(e.to_string().contains("critical"), "{e}");
            assert_eq!(e.reserved, part);
        }
        other => panic!("expected a budget error, got {other:?}"),
    }
    assert!(
        engine
            .submit(make_job(81, 1, Priority::Critical))
            .wait()
            .unwrap()
            .verified
    );
}

/// The CPU backend, whose first partition call waits for a gate (so it holds the
/// device's lock).
struct GatedBackend {
    inner: CpuBackend,
    gate: std::sync::Mutex<Option<Receiver<()>>>,
}

impl GpuBackend for GatedBackend {
    fn capabilities(&self) -> cuzk_gpu_backend::Capabilities {
        self.inner.capabilities()
    }

    fn prove_partition(
        &self,
        job: cuzk_gpu_backend::PartitionJob<'_>,
    ) -> Result<cuzk_gpu_backend::PartitionResult, cuzk_gpu_backend::BackendError> {
        let gate = self.gate.lock().unwrap().take();
        if let Some(gate) = gate {
            let _ = gate.recv();
        }
        self.inner.prove_partition(job)
    }

    /// Without a gate.
    fn open_sibling(&self) -> Result<Option<Arc<dyn GpuBackend>>, cuzk_gpu_backend::BackendError> {
        Ok(Some(Arc::new(GatedBackend {
            inner: self.inner.clone(),
            gate: std::sync::Mutex::new(None),
        })))
    }
}

/// With a critical lane, a Critical job is proven while a Normal partition holds
/// the device's lock (its backend call held by a gate that opens only after the
/// Critical job returned): the critical lane's worker runs beside it, on the
/// second backend instance. Asked for with a backend that has no second
/// instance, the lane is a configuration error at start.
#[test]
fn a_critical_lane_proves_beside_the_partition_holding_the_device() {
    let (go, gate) = channel();
    let mut p = policies();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    p.backend = Arc::new(GatedBackend {
        inner: CpuBackend::new(Arc::new(pool)),
        gate: std::sync::Mutex::new(Some(gate)),
    });
    let mut cfg = config(2);
    cfg.critical_lane = Some(true);
    let rec = Arc::new(Recorder::new(Instant::now()));
    let engine = PipelineEngine::start(cfg.clone(), p, rec.clone()).unwrap();
    assert_eq!(engine.critical_lanes(), 1);
    let on_gpu = engine.submit(make_job(95, 1, Priority::Normal));
    wait_for(&rec, EventKind::GpuStart, on_gpu.id());
    let critical = engine.submit(make_job(96, 2, Priority::Critical));
    let critical_id = critical.id();
    // Returns while the gate is still closed: it never waited for the lock.
    let out = critical.wait().unwrap();
    assert!(out.verified);
    assert_eq!(out.proofs.len(), 2);
    let events = rec.events();
    assert!(!events
        .iter()
        .any(|e| e.event == EventKind::GpuEnd && e.job == on_gpu.id()));
    // On the critical lane's worker (numbered after the device's one worker).
    assert!(events
        .iter()
        .filter(|e| e.event == EventKind::GpuStart && e.job == critical_id)
        .all(|e| e.worker == Some(1)));
    go.send(()).unwrap();
    assert!(on_gpu.wait().unwrap().verified);
    drop(engine);

    // The CPU backend itself offers a second instance; a backend without one
    // (the default) does not, and asking for the lane is then refused.
    struct Plain(CpuBackend);
    impl GpuBackend for Plain {
        fn capabilities(&self) -> cuzk_gpu_backend::Capabilities {
            self.0.capabilities()
        }
        fn prove_partition(
            &self,
            job: cuzk_gpu_backend::PartitionJob<'_>,
        ) -> Result<cuzk_gpu_backend::PartitionResult, cuzk_gpu_backend::BackendError> {
            self.0.prove_partition(job)
        }
    }
    let mut p = policies();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    p.backend = Arc::new(Plain(CpuBackend::new(Arc::new(pool))));
    let e = PipelineEngine::start(cfg, p, Arc::new(Recorder::new(Instant::now()))).unwrap_err();
    assert!(e.to_string().contains("no second instance"), "{e}");
}

/// One Normal partition on the device (its call held by a gate), a second one
/// ready and waiting for the device's lock on the other GPU worker, and a Critical
/// partition queued for the GPU: when the device is free the critical one goes
/// first, the ready Normal one giving way.
#[test]
fn a_critical_partition_goes_before_the_one_waiting_for_the_gpu_lock() {
    let (go, gate) = channel();
    let mut p = policies();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    p.backend = Arc::new(GatedBackend {
        inner: CpuBackend::new(Arc::new(pool)),
        gate: std::sync::Mutex::new(Some(gate)),
    });
    let mut cfg = config(2);
    cfg.gpu_workers_per_device = 2;
    let rec = Arc::new(Recorder::new(Instant::now()));
    let engine = PipelineEngine::start(cfg, p, rec.clone()).unwrap();
    let on_gpu = engine.submit(make_job(90, 1, Priority::Normal));
    wait_for(&rec, EventKind::GpuStart, on_gpu.id());
    let ready = engine.submit(make_job(91, 1, Priority::Normal));
    wait_for(&rec, EventKind::LockWaitStart, ready.id());
    let critical = engine.submit(make_job(92, 1, Priority::Critical));
    wait_for(&rec, EventKind::GpuQueue, critical.id());
    let (ready_id, critical_id) = (ready.id(), critical.id());
    go.send(()).unwrap();
    for h in [on_gpu, ready, critical] {
        assert!(h.wait().unwrap().verified);
    }
    assert!(
        first(&rec, EventKind::GpuStart, critical_id) < first(&rec, EventKind::GpuStart, ready_id),
        "the partition waiting for the lock went before the critical one"
    );
    drop(engine);
}
