//! The engine on several devices, without a GPU: a [`DeviceSet`] of CPU backends
//! stands for a host with several GPUs. Every job is proven on both devices with
//! proofs byte-identical to a one-device engine's and verified; both devices are
//! used (the TIMELINE's GPU events name them); a device whose backend fails with
//! a device error fails only its partitions, which the other device proves; an
//! input the backend refuses fails the job without a retry.

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, OnceLock,
    },
    time::{Duration, Instant},
};

use bellperson::groth16::{generate_random_parameters, Parameters};
use blstrs::{Bls12, Scalar};
use cuzk::pipeline::{job, to_bellperson, BellpersonVerifier, PartitionInput};
use cuzk_alloc::InlineDealloc;
use cuzk_circuits::MulChain;
use cuzk_gpu_backend::{
    lock::SingleLock, BackendError, Capabilities, CpuBackend, DeviceLane, DeviceSet, GpuBackend,
    PartitionJob, PartitionResult,
};
use cuzk_scheduler::{JobError, JobSpec, PipelineConfig, PipelineEngine, Policies, Unthrottled};
use cuzk_timeline::{analyse, EventKind, Recorder};
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
            &mut ChaCha20Rng::seed_from_u64(7),
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

fn cpu() -> Arc<dyn GpuBackend> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    Arc::new(CpuBackend::new(Arc::new(pool)))
}

/// What a test device does with a partition.
#[derive(Clone, Copy)]
enum Behaviour {
    /// Proves it (the CPU backend).
    Prove,
    /// Fails as a lost device does.
    DeviceError,
    /// Refuses the input's shape.
    ShapeError,
}

/// A CPU "device" that counts its calls and, before its first call, waits (up to a
/// minute) until `after` has been called: so that a test knows both devices were
/// offered work whatever the threads' timing.
struct TestDevice {
    inner: Arc<dyn GpuBackend>,
    behaviour: Behaviour,
    calls: Arc<AtomicUsize>,
    after: Option<Arc<AtomicUsize>>,
}

impl TestDevice {
    fn new(behaviour: Behaviour) -> Self {
        Self {
            inner: cpu(),
            behaviour,
            calls: Arc::new(AtomicUsize::new(0)),
            after: None,
        }
    }
}

impl GpuBackend for TestDevice {
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    fn prove_partition(&self, job: PartitionJob<'_>) -> Result<PartitionResult, BackendError> {
        if let Some(after) = &self.after {
            let deadline = Instant::now() + Duration::from_secs(60);
            while after.load(Ordering::SeqCst) == 0 && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        self.calls.fetch_add(1, Ordering::SeqCst);
        match self.behaviour {
            Behaviour::Prove => self.inner.prove_partition(job),
            Behaviour::DeviceError => {
                Err(BackendError::Device("the device fell off the bus".into()))
            }
            Behaviour::ShapeError => Err(BackendError::Rejected("the h query is too short".into())),
        }
    }
}

fn set(devices: Vec<(u32, Arc<dyn GpuBackend>)>) -> Arc<dyn GpuBackend> {
    let lanes = devices
        .into_iter()
        .map(|(ordinal, backend)| DeviceLane { ordinal, backend })
        .collect();
    Arc::new(DeviceSet::new(lanes).unwrap())
}

fn engine(backend: Arc<dyn GpuBackend>, rec: Arc<Recorder>) -> PipelineEngine {
    let cfg = PipelineConfig {
        synth_jobs: Some(2),
        synth_threads: 2,
        gpu_workers_per_device: 1,
        gpu_threads: 1,
        memory_budget: Some(1 << 30),
        ..PipelineConfig::default()
    };
    let policies = Policies {
        backend,
        dealloc: Arc::new(InlineDealloc),
        throttle: Arc::new(Unthrottled),
        lock: Arc::new(SingleLock::new()),
    };
    PipelineEngine::start(cfg, policies, rec).unwrap()
}

fn recorder() -> Arc<Recorder> {
    Arc::new(Recorder::new(Instant::now()))
}

/// Proves `jobs` jobs of `partitions` each; every proof verified by the engine and
/// again here.
fn prove_all(
    engine: &PipelineEngine,
    jobs: usize,
    partitions: usize,
) -> Vec<Vec<cuzk::ProofPoints>> {
    let handles: Vec<_> = (0..jobs)
        .map(|j| engine.submit(make_job(j, partitions)))
        .collect();
    let f = fixture();
    handles
        .into_iter()
        .enumerate()
        .map(|(j, h)| {
            let out = h.wait().unwrap_or_else(|e| panic!("job {j} failed: {e}"));
            assert!(out.verified);
            for (p, proof) in out.proofs.iter().enumerate() {
                let inputs = MulChain::new(LOG, 2, Some(seed(j, p)))
                    .unwrap()
                    .public_inputs()
                    .unwrap();
                assert!(cuzk::verify(&f.params.vk, &to_bellperson(proof), &inputs).unwrap());
            }
            out.proofs
        })
        .collect()
}

/// Partitions whose backend call ended on `device` (without a retry).
fn gpu_ends_on(events: &[cuzk_timeline::Event], device: u32) -> usize {
    events
        .iter()
        .filter(|e| {
            e.event == EventKind::GpuEnd
                && e.device == Some(device)
                && !e.detail.starts_with("device_error=")
        })
        .count()
}

#[test]
fn two_devices_prove_every_job_identically_and_both_work() {
    let one = engine(cpu(), recorder());
    let want = prove_all(&one, 3, 4);
    drop(one);

    let first = TestDevice::new(Behaviour::Prove);
    let mut second = TestDevice::new(Behaviour::Prove);
    // Device 5 starts only once device 2 has taken a partition: both are used.
    second.after = Some(first.calls.clone());
    let (c2, c5) = (first.calls.clone(), second.calls.clone());
    let rec = recorder();
    let two = engine(
        set(vec![(2, Arc::new(first)), (5, Arc::new(second))]),
        rec.clone(),
    );
    assert_eq!(two.devices(), [2, 5]);
    let got = prove_all(&two, 3, 4);
    drop(two);
    assert_eq!(
        got, want,
        "two devices must give the one-device proofs, byte for byte"
    );

    let events = rec.events();
    let (on2, on5) = (gpu_ends_on(&events, 2), gpu_ends_on(&events, 5));
    assert_eq!(on2 + on5, 12, "every partition ran once, on device 2 or 5");
    assert!(
        on2 > 0 && on5 > 0,
        "both devices proved: {on2} on 2, {on5} on 5"
    );
    assert_eq!(
        (c2.load(Ordering::SeqCst), c5.load(Ordering::SeqCst)),
        (on2, on5)
    );
    // No event names a device outside the list (nothing assumes device 0).
    assert!(events
        .iter()
        .all(|e| matches!(e.device, None | Some(2) | Some(5))));
    // The analysis has a busy lane per device.
    let busy: Vec<Option<u32>> = analyse(&events).gpu_busy.iter().map(|d| d.device).collect();
    assert_eq!(busy, [Some(2), Some(5)]);
}

#[test]
fn a_failing_device_fails_only_its_partitions_which_the_other_proves() {
    let broken = TestDevice::new(Behaviour::DeviceError);
    let mut good = TestDevice::new(Behaviour::Prove);
    // The good device waits for the broken one's first failure: the broken device
    // is certainly offered work.
    good.after = Some(broken.calls.clone());
    let (failed, proved) = (broken.calls.clone(), good.calls.clone());
    let rec = recorder();
    let e = engine(
        set(vec![(0, Arc::new(good)), (1, Arc::new(broken))]),
        rec.clone(),
    );
    prove_all(&e, 2, 3);
    drop(e);
    let events = rec.events();
    let retried = events
        .iter()
        .filter(|e| {
            e.event == EventKind::GpuEnd
                && e.device == Some(1)
                && e.detail.contains("device_error=")
                && e.detail.contains("retried")
        })
        .count();
    assert!(failed.load(Ordering::SeqCst) > 0);
    assert_eq!(
        retried,
        failed.load(Ordering::SeqCst),
        "every failure on device 1 was retried"
    );
    assert_eq!(
        proved.load(Ordering::SeqCst),
        6,
        "device 0 proved all six partitions"
    );
    assert_eq!(gpu_ends_on(&events, 0), 6);
    assert_eq!(gpu_ends_on(&events, 1), 0);
}

#[test]
fn an_input_the_backend_refuses_fails_the_job_without_a_retry() {
    let refusing = TestDevice::new(Behaviour::ShapeError);
    let mut good = TestDevice::new(Behaviour::Prove);
    good.after = Some(refusing.calls.clone());
    let rec = recorder();
    let e = engine(
        set(vec![(0, Arc::new(good)), (1, Arc::new(refusing))]),
        rec.clone(),
    );
    let err = e.submit(make_job(0, 4)).wait().unwrap_err();
    assert!(
        matches!(&err, JobError::Partition { message, .. } if message.contains("too short")),
        "{err}"
    );
    drop(e);
    assert!(!rec.events().iter().any(|e| e.detail.contains("retried")));
}

#[test]
fn a_partition_every_device_fails_fails_its_job_with_the_device_error() {
    let rec = recorder();
    let e = engine(
        set(vec![
            (0, Arc::new(TestDevice::new(Behaviour::DeviceError))),
            (1, Arc::new(TestDevice::new(Behaviour::DeviceError))),
        ]),
        rec.clone(),
    );
    let err = e.submit(make_job(0, 2)).wait().unwrap_err();
    assert!(
        matches!(&err, JobError::Partition { message, .. } if message.contains("fell off the bus")),
        "{err}"
    );
    // The engine goes on: a later job on a working set proves.
    drop(e);
    let ok = engine(set(vec![(0, cpu()), (1, cpu())]), recorder());
    prove_all(&ok, 1, 2);
}

/// Builds the CPU backend plugin if this test run has not (a no-op after `cargo
/// build --workspace`); the folder it is in.
fn plugin_dir() -> std::path::PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe
        .parent()
        .and_then(std::path::Path::parent)
        .unwrap()
        .to_path_buf();
    if dir.file_name().is_some_and(|n| n == "release") {
        let status = std::process::Command::new(std::env::var("CARGO").unwrap_or("cargo".into()))
            .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
            .args([
                "build",
                "--release",
                "--quiet",
                "-p",
                "cuzk-plugin-backend-cpu",
            ])
            .status()
            .expect("running cargo to build the plugin");
        assert!(status.success(), "building the plugin failed");
    }
    dir
}

/// The `cpu` plugin's policies from `cuzk.toml` text after `[engine]`'s header.
fn built_from(engine: &str, backend_params: &str) -> (cuzk_config::Config, Policies) {
    let text = format!(
        "plugin_dir = {:?}\n[engine]\n{engine}[backend]\nplugin = \"cpu\"\nparams = {{ {backend_params} }}\n",
        plugin_dir().display().to_string()
    );
    let cfg = cuzk_config::Config::from_toml(&text, "cuzk.toml").unwrap();
    let built = cfg
        .build_policies(&cuzk_config::BackendNeeds::default())
        .unwrap();
    (cfg, built.policies)
}

fn lanes_of(policies: &Policies) -> Vec<u32> {
    policies
        .backend
        .device_lanes()
        .iter()
        .map(|l| l.ordinal)
        .collect()
}

/// Runs two jobs of two partitions on `policies`' lanes, the first lane waiting
/// for the second's first call so that both are offered work, and asserts that
/// every lane proved and that the four partitions ran once each.
fn both_lanes_prove(cfg: &cuzk_config::Config, mut policies: Policies) {
    let gate = Arc::new(AtomicUsize::new(0));
    let lanes = policies.backend.device_lanes();
    let ordinals: Vec<u32> = lanes.iter().map(|l| l.ordinal).collect();
    let wrapped = lanes
        .into_iter()
        .enumerate()
        .map(|(i, lane)| {
            let mut d = TestDevice::new(Behaviour::Prove);
            d.inner = lane.backend;
            if i == 0 {
                d.after = Some(gate.clone());
            } else {
                d.calls = gate.clone();
            }
            (lane.ordinal, Arc::new(d) as Arc<dyn GpuBackend>)
        })
        .collect();
    policies.backend = set(wrapped);
    let rec = recorder();
    let pipeline = PipelineConfig {
        gpu_workers_per_device: 1,
        memory_budget: Some(1 << 30),
        ..cfg.pipeline_config()
    };
    let e = PipelineEngine::start(pipeline, policies, rec.clone()).unwrap();
    prove_all(&e, 2, 2);
    drop(e);
    let events = rec.events();
    let per: Vec<usize> = ordinals.iter().map(|&d| gpu_ends_on(&events, d)).collect();
    assert!(per.iter().all(|&n| n > 0), "every device proved: {per:?}");
    assert_eq!(per.iter().sum::<usize>(), 4);
}

/// `[engine] devices` through cuzk.toml and the plugin ABI: the `cpu` plugin
/// opened once per device, each instance its own lane, both proving.
#[test]
fn cuzk_toml_devices_open_the_plugin_once_per_device() {
    let (cfg, policies) = built_from("devices = [3, 1]\n", "threads = 1");
    assert_eq!(lanes_of(&policies), [3, 1]);
    both_lanes_prove(&cfg, policies);
}

/// `[engine] devices` unset: every device the backend reports is driven (the
/// `cpu` plugin told to report two, through the ABI's `device_count`), each
/// ordinal its own instance and lane, both proving; an explicit list still wins,
/// and a `device` pinned in the backend's parameters keeps one device.
#[test]
fn without_devices_the_engine_drives_every_device_the_backend_reports() {
    let (cfg, policies) = built_from("", "threads = 1, devices = 2");
    assert_eq!(policies.backend.device_count(), 2);
    assert_eq!(lanes_of(&policies), [0, 1]);
    both_lanes_prove(&cfg, policies);

    let (_, listed) = built_from("devices = [1]\n", "threads = 1, devices = 2");
    assert_eq!(lanes_of(&listed), [1]);
    let (_, pinned) = built_from("", "threads = 1, devices = 2, device = 1");
    assert!(lanes_of(&pinned).is_empty(), "one backend, no device set");
    // Reporting one device (the default): the backend itself, one lane.
    let (_, one) = built_from("", "threads = 1");
    assert!(lanes_of(&one).is_empty());
}

/// A CPU "device" that keeps, as a GPU backend does, a device copy of every base
/// vector a partition used (here: its host address and byte size) until told to
/// forget it.
struct Resident {
    inner: Arc<dyn GpuBackend>,
    copies: std::sync::Mutex<std::collections::HashMap<usize, u64>>,
}

impl Resident {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            inner: cpu(),
            copies: Default::default(),
        })
    }

    /// Bytes of the copies held whose host vectors lie in `ranges`.
    fn held_in(&self, ranges: &[std::ops::Range<usize>]) -> u64 {
        let copies = self.copies.lock().unwrap();
        copies
            .iter()
            .filter(|(a, _)| ranges.iter().any(|r| r.contains(a)))
            .map(|(_, b)| b)
            .sum()
    }
}

impl GpuBackend for Resident {
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    fn prove_partition(&self, job: PartitionJob<'_>) -> Result<PartitionResult, BackendError> {
        {
            let mut copies = self.copies.lock().unwrap();
            let mut keep = |p: *const u8, bytes: usize| {
                copies.insert(p as usize, bytes as u64);
            };
            keep(
                job.h_bases.as_ptr().cast(),
                std::mem::size_of_val(job.h_bases),
            );
            for m in [&job.l, &job.a, &job.b_g1] {
                keep(m.bases.as_ptr().cast(), std::mem::size_of_val(m.bases));
            }
        }
        self.inner.prove_partition(job)
    }

    fn forget_bases(&self, host: &[std::ops::Range<usize>]) -> u64 {
        let mut copies = self.copies.lock().unwrap();
        let mut freed = 0;
        copies.retain(|a, b| {
            let gone = host.iter().any(|r| r.contains(a));
            if gone {
                freed += *b;
            }
            !gone
        });
        freed
    }
}

/// Once the last holder of a parameter set drops it (a cache evicting it), the
/// engine has every device forget its copies of that set's bases, reports the
/// bytes, and leaves the sets still held alone; a set in use is never forgotten.
#[test]
fn the_device_copies_of_a_dropped_parameter_set_are_forgotten_on_every_device() {
    let f = fixture();
    let devices = [Resident::new(), Resident::new()];
    let e = engine(
        set(vec![(0, devices[0].clone()), (1, devices[1].clone())]),
        recorder(),
    );
    // A parameter set of its own (fresh vectors, as a cache's load makes).
    let fresh = |b: &cuzk_scheduler::Bases<blstrs::G1Affine>| {
        cuzk_scheduler::Bases::new(Arc::new(b.as_slice().to_vec()))
    };
    let own = Arc::new(cuzk::Srs {
        key: f.srs.key,
        ic_len: f.srs.ic_len,
        h: fresh(&f.srs.h),
        l: fresh(&f.srs.l),
        a: fresh(&f.srs.a),
        b_g1: fresh(&f.srs.b_g1),
        b_g2: cuzk_scheduler::Bases::new(Arc::new(f.srs.b_g2.as_slice().to_vec())),
    });
    let own_ranges = own.host_ranges();
    // Four partitions on each set, so both devices prove some of each.
    let mut spec = make_job(0, 4);
    spec.srs = own.clone();
    e.submit(spec).wait().unwrap();
    e.submit(make_job(1, 4)).wait().unwrap();
    let fixture_ranges = f.srs.host_ranges();
    let held = |ranges: &[std::ops::Range<usize>]| -> u64 {
        devices.iter().map(|d| d.held_in(ranges)).sum()
    };
    let own_bytes = held(&own_ranges);
    let fixture_bytes = held(&fixture_ranges);
    assert!(own_bytes > 0 && fixture_bytes > 0);
    // Still held here: nothing is forgotten.
    assert_eq!(e.forget_dropped_params(), 0);
    assert_eq!(held(&own_ranges), own_bytes);
    drop(own);
    assert_eq!(e.forget_dropped_params(), own_bytes);
    assert_eq!(held(&own_ranges), 0);
    assert_eq!(held(&fixture_ranges), fixture_bytes);
    assert_eq!(e.forget_dropped_params(), 0);
    // The set still held proves as before.
    prove_all(&e, 1, 2);
}
