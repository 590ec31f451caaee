//! A 2 KiB sector sealed by filecoin-proofs, its C2 proven by cuzk's engine with
//! this plugin as the backend (loaded from its `.so` as `--backend wgpu` loads
//! it), verified by filecoin-proofs' `verify_seal` and byte-identical to the same
//! C2 on the CPU backend at the same `r, s`; refused for another miner.
//!
//! No adapter fails the test unless `CUZK_WGPU_ALLOW_NO_ADAPTER=1` (CI has
//! lavapipe). Parameters are generated once per build directory
//! (`target/tmp/filecoin-params`, shared with the other Filecoin tests). Run in
//! release: `cargo test --release -p cuzk-plugin-backend-wgpu --test porep_c2`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use blstrs::Scalar;
use cuzk_alloc::InlineDealloc;
use cuzk_filecoin::{
    ensure_params, parse_c1, prover_id_from_miner, seal_test_sector, verify_proof, Blinding,
    Envelope, FilecoinError, FilecoinProver, PorepKind, PorepRequest, Priority, ProverConfig,
    RegisteredSealProof,
};
use cuzk_gpu_backend::{lock::SingleLock, CpuBackend, GpuBackend};
use cuzk_plugin_host::{load_backend, BackendNeeds, PluginError, PluginSpec, SearchPath};
use cuzk_scheduler::{PipelineConfig, PipelineEngine, Policies, Unthrottled};
use cuzk_timeline::Recorder;
use ff::Field;
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;

const PROOF: RegisteredSealProof = RegisteredSealProof::StackedDrg2KiBV1_1;
const MINER: u64 = 1000;
const SECTOR: u64 = 9;

/// `<target>/<profile>`, where cargo puts this test binary's plugins; the plugin
/// is built there first (a no-op when it is current), as the host's tests do.
fn plugin_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(Path::parent).unwrap().to_path_buf();
    let profile = match dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") => "dev".to_string(),
        Some(p) => p.to_string(),
        None => "release".to_string(),
    };
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
        .args(["build", "--quiet", "--profile", &profile, "--target-dir"])
        .arg(dir.parent().unwrap())
        .args(["-p", "cuzk-plugin-backend-wgpu"])
        .status()
        .unwrap();
    assert!(status.success(), "building the wgpu plugin failed");
    dir
}

fn engine(backend: Arc<dyn GpuBackend>) -> PipelineEngine {
    PipelineEngine::start(
        PipelineConfig {
            synth_jobs: Some(1),
            synth_threads: 2,
            gpu_workers_per_device: 1,
            gpu_threads: 2,
            memory_budget: Some(4 << 30),
            verify: false,
            ..PipelineConfig::default()
        },
        Policies {
            backend,
            dealloc: Arc::new(InlineDealloc),
            throttle: Arc::new(Unthrottled),
            lock: Arc::new(SingleLock::default()),
        },
        Arc::new(Recorder::new(Instant::now())),
    )
    .unwrap()
}

#[test]
fn porep_c2_through_the_wgpu_plugin_verifies_and_equals_the_cpu_backends() {
    let params = Path::new(env!("CARGO_TARGET_TMPDIR")).join("filecoin-params");
    std::env::set_var(cuzk_filecoin::PARAMETER_CACHE_VAR, &params);
    let spec = PluginSpec::new("wgpu");
    let wgpu = match load_backend(
        &spec,
        &SearchPath::dir(plugin_dir()),
        &BackendNeeds::default(),
    ) {
        Ok(b) => b,
        Err(e @ PluginError::Rejected { .. })
            if std::env::var("CUZK_WGPU_ALLOW_NO_ADAPTER").as_deref() == Ok("1")
                && e.to_string().contains("no wgpu adapter") =>
        {
            eprintln!("skipped: no wgpu adapter ({e})");
            return;
        }
        Err(e) => panic!("the wgpu plugin did not load: {e} (CI: mesa-vulkan-drivers)"),
    };
    let caps = wgpu.capabilities();
    eprintln!("wgpu plugin on {:?}", caps.devices);
    assert_eq!(caps.name, "wgpu");
    assert!(caps.devices[0].total_memory > 0);

    let t = Instant::now();
    ensure_params(&PorepKind::new(PROOF).unwrap(), &params, 2026).unwrap();
    eprintln!("parameters ready in {:.1} s", t.elapsed().as_secs_f64());
    let work = tempfile::tempdir().unwrap();
    let sealed =
        seal_test_sector(PROOF, prover_id_from_miner(MINER), SECTOR, 13, work.path()).unwrap();
    let env = serde_json::to_vec(&Envelope::wrap(&sealed.c1_json, SECTOR, 2048)).unwrap();

    let mut rng = ChaCha20Rng::seed_from_u64(36);
    let blinding = vec![(Scalar::random(&mut rng), Scalar::random(&mut rng))];
    let request = |miner: u64, blinding: Blinding| PorepRequest {
        input: parse_c1(&env).unwrap(),
        prover_id: prover_id_from_miner(miner),
        sector: None,
        blinding,
    };
    let prover = FilecoinProver::new(ProverConfig::default());
    let prove = |engine: &PipelineEngine| {
        let t = Instant::now();
        let proof = prover
            .submit_porep(
                engine,
                request(MINER, Blinding::Fixed(blinding.clone())),
                Priority::Normal,
            )
            .unwrap()
            .wait() // verified by filecoin-proofs' verify_seal before it returns
            .unwrap();
        eprintln!("C2 {:.1} s", t.elapsed().as_secs_f64());
        proof
    };

    let on_wgpu = engine(wgpu.clone());
    let proof = prove(&on_wgpu);
    let cpu_pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    let on_cpu = engine(Arc::new(CpuBackend::new(Arc::new(cpu_pool))));
    let want = prove(&on_cpu);
    assert_eq!(proof.len(), 192);
    assert_eq!(
        proof, want,
        "the wgpu plugin's proof differs from the CPU backend's"
    );

    let input = parse_c1(&env).unwrap();
    verify_proof(&input, prover_id_from_miner(MINER), None, &proof, &params).unwrap();
    let wrong = verify_proof(
        &input,
        prover_id_from_miner(MINER + 1),
        None,
        &proof,
        &params,
    );
    assert!(
        matches!(wrong, Err(FilecoinError::NotVerified { .. })),
        "{wrong:?}"
    );
    // Proven for the wrong miner, it is refused by verify_seal: no bytes come back.
    let e = prover
        .submit_porep(
            &on_wgpu,
            request(MINER + 1, Blinding::Random),
            Priority::Normal,
        )
        .unwrap()
        .wait();
    assert!(matches!(e, Err(FilecoinError::NotVerified { .. })), "{e:?}");
}
