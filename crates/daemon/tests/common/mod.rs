//! An in-process daemon on the CPU backend (behind a gate the test opens and
//! closes, so "queued" and "running" are states a test can hold a job in) with
//! the synthetic kind, and helpers to reach it over the wire.

#![allow(dead_code)]

use std::{
    path::{Path, PathBuf},
    sync::{Arc, Condvar, Mutex, OnceLock},
    time::{Duration, Instant},
};

use cuzk_alloc::InlineDealloc;
use cuzk_daemon::{client, wire as pb, Bound, DaemonConfig, Shutdown};
use cuzk_gpu_backend::{
    lock::SingleLock, BackendError, Capabilities, CpuBackend, DeviceLane, DeviceSet, GpuBackend,
    PartitionJob, PartitionResult,
};
use cuzk_scheduler::{PipelineConfig, Policies, Unthrottled};
use cuzk_service::{synthetic::SyntheticKind, KindProver, Service};

/// Holds every backend call while closed.
#[derive(Default)]
pub struct Gate {
    closed: Mutex<bool>,
    cv: Condvar,
    /// Calls that have entered the backend.
    entered: Mutex<usize>,
}

impl Gate {
    pub fn close(&self) {
        *self.closed.lock().unwrap() = true;
    }
    pub fn open(&self) {
        *self.closed.lock().unwrap() = false;
        self.cv.notify_all();
    }
    pub fn entered(&self) -> usize {
        *self.entered.lock().unwrap()
    }
}

struct GatedCpu {
    cpu: CpuBackend,
    gate: Arc<Gate>,
}

impl GpuBackend for GatedCpu {
    fn capabilities(&self) -> Capabilities {
        self.cpu.capabilities()
    }
    fn prove_partition(&self, job: PartitionJob<'_>) -> Result<PartitionResult, BackendError> {
        *self.gate.entered.lock().unwrap() += 1;
        let mut closed = self.gate.closed.lock().unwrap();
        while *closed {
            closed = self.gate.cv.wait(closed).unwrap();
        }
        drop(closed);
        self.cpu.prove_partition(job)
    }
}

/// Where synthetic parameters are cached across tests (generated once).
pub fn param_dir() -> PathBuf {
    let d = std::env::temp_dir().join("cuzk-daemon-test-params");
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub struct Daemon {
    pub addr: String,
    pub gate: Arc<Gate>,
    pub service: Service,
    pub shutdown: Shutdown,
    pub rt: tokio::runtime::Runtime,
    pub served: Option<tokio::task::JoinHandle<Result<(), cuzk_daemon::ServeError>>>,
    _dir: tempfile::TempDir,
}

/// Options of a test daemon.
#[derive(Default)]
pub struct Opts {
    pub unix: bool,
    pub daemon_toml: String,
    /// Kinds served besides the synthetic one.
    pub kinds: Vec<Arc<dyn KindProver>>,
    /// The engine's memory budget; `None`: 1 GiB, small enough that the synthetic
    /// tests see every byte come back.
    pub memory_budget: Option<u64>,
    /// CPU "devices" the engine drives (0 or 1: the gated CPU backend as the one
    /// device; more: a `DeviceSet` of that many gated CPU backends, ordinals
    /// 0..n, as `[engine] devices = [0, 1, ..]` builds with the builtin CPU
    /// backend). One gate holds them all.
    pub devices: u32,
    /// The plan the daemon reports in `GetStatus` (`DaemonConfig::plan`).
    pub plan: Option<cuzk_daemon::config::StartupPlan>,
}

pub fn start(opts: Opts) -> Daemon {
    let dir = tempfile::tempdir().unwrap();
    let listen = if opts.unix {
        format!("unix://{}", dir.path().join("cuzk.sock").display())
    } else {
        "127.0.0.1:0".to_owned()
    };
    let toml = format!(
        "[daemon]\nlisten = \"{listen}\"\nsynthetic = true\nparam_cache = \"{}\"\n{}\n",
        param_dir().display(),
        opts.daemon_toml
    );
    let mut cfg = DaemonConfig::from_toml(&toml, "test").unwrap();
    cfg.plan = opts.plan;
    let gate = Arc::new(Gate::default());
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    let pool = Arc::new(pool);
    let gated = || -> Arc<dyn GpuBackend> {
        Arc::new(GatedCpu {
            cpu: CpuBackend::new(pool.clone()),
            gate: gate.clone(),
        })
    };
    let backend = if opts.devices > 1 {
        let lanes = (0..opts.devices)
            .map(|ordinal| DeviceLane {
                ordinal,
                backend: gated(),
            })
            .collect();
        Arc::new(DeviceSet::new(lanes).unwrap())
    } else {
        gated()
    };
    let policies = Policies {
        backend,
        dealloc: Arc::new(InlineDealloc),
        throttle: Arc::new(Unthrottled),
        lock: Arc::new(SingleLock::new()),
    };
    let engine = PipelineConfig {
        synth_jobs: Some(2),
        synth_threads: 2,
        gpu_workers_per_device: 1,
        gpu_threads: 1,
        memory_budget: Some(opts.memory_budget.unwrap_or(1 << 30)),
        ..PipelineConfig::default()
    };
    let mut kinds: Vec<Arc<dyn KindProver>> =
        vec![Arc::new(SyntheticKind::new(cfg.param_cache.clone()))];
    kinds.extend(opts.kinds);
    let service = Service::start(cfg.service.clone(), engine, policies, kinds).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let shutdown = Shutdown::default();
    let (addr, served) = rt.block_on(async {
        let bound = Bound::bind_with(&cfg.listen, &cfg.access).await.unwrap();
        let addr = bound.address();
        let svc = service.clone();
        let sd = shutdown.clone();
        let served = tokio::spawn(async move { cuzk_daemon::serve(&cfg, svc, bound, sd).await });
        (addr, served)
    });
    Daemon {
        addr,
        gate,
        service,
        shutdown,
        rt,
        served: Some(served),
        _dir: dir,
    }
}

impl Daemon {
    pub fn client(&self) -> client::Client {
        self.rt
            .block_on(client::connect(&self.addr, 256 << 20))
            .unwrap()
    }

    /// A client with `opts` (a token, TLS).
    pub fn client_with(&self, opts: &client::ClientOptions) -> client::Client {
        self.rt
            .block_on(client::connect_with(&self.addr, 256 << 20, opts))
            .unwrap()
    }

    /// Waits (bounded) until `f` holds for the daemon's status.
    pub fn wait_status(
        &self,
        what: &str,
        f: impl Fn(&pb::GetStatusResponse) -> bool,
    ) -> pb::GetStatusResponse {
        let mut c = self.client();
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let s = self
                .rt
                .block_on(c.get_status(pb::GetStatusRequest {}))
                .unwrap()
                .into_inner();
            if f(&s) {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "status never showed {what}: {s:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until the daemon holds no job and no memory.
    pub fn wait_idle(&self) -> pb::GetStatusResponse {
        self.wait_status("an idle daemon", |s| {
            s.queues
                .iter()
                .all(|q| q.pending == 0 && q.in_progress == 0)
                && s.pinned_memory_bytes == 0
        })
    }

    pub fn metric(&self, name: &str) -> f64 {
        metric(&self.service.metrics_text(), name)
    }
}

/// The value of the sample line `name` (with its labels, as printed).
pub fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(' ')))
        .unwrap_or_else(|| panic!("no metric `{name}` in:\n{text}"))
        .trim()
        .parse()
        .unwrap()
}

pub fn synthetic(log: u32, partitions: u32, seed: u64) -> pb::SubmitProofRequest {
    pb::SubmitProofRequest {
        proof_kind: pb::ProofKind::Synthetic as i32,
        vanilla_proof: format!(
            r#"{{"circuit":"mul","log":{log},"partitions":{partitions},"seed":{seed}}}"#
        )
        .into_bytes(),
        ..Default::default()
    }
}

/// Checks a synthetic proof with bellperson's verifier against the parameters
/// (the same cached file the daemon loaded), and that a wrong input fails.
pub fn check_synthetic_proof(log: u32, partitions: u32, seed: u64, proof: &[u8]) {
    static PARAMS: OnceLock<
        Mutex<std::collections::HashMap<u32, Arc<cuzk_service::synthetic::SyntheticParams>>>,
    > = OnceLock::new();
    let p = PARAMS
        .get_or_init(Default::default)
        .lock()
        .unwrap()
        .entry(log)
        .or_insert_with(|| {
            Arc::new(
                SyntheticKind::new(param_dir())
                    .params(&format!("synthetic-mul-{log}"))
                    .unwrap(),
            )
        })
        .clone();
    assert_eq!(proof.len(), 192 * partitions as usize, "proof length");
    for (i, chunk) in proof.chunks(192).enumerate() {
        let proof = bellperson::groth16::Proof::<blstrs::Bls12>::read(chunk).unwrap();
        let c = cuzk_circuits::MulChain::new(log, 2, Some(seed + i as u64)).unwrap();
        let mut inputs = c.public_inputs().unwrap();
        assert!(
            cuzk::verify(&p.params.vk, &proof, &inputs).unwrap(),
            "partition {i} does not verify"
        );
        inputs[0] += blstrs::Scalar::from(1u64);
        assert!(
            !cuzk::verify(&p.params.vk, &proof, &inputs).unwrap(),
            "partition {i} verifies for a wrong input"
        );
    }
}

pub fn path_exists(p: &Path) -> bool {
    p.exists()
}
