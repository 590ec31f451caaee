//! Every Filecoin kind proven by cuzk's engine with this plugin as the backend
//! (loaded from its `.so` as `--backend wgpu` loads it), on 2 KiB sectors sealed
//! here by filecoin-proofs: each proof verified by filecoin-proofs and
//! byte-identical to the same proof on the CPU backend at the same `r, s`, and
//! refused for other public inputs. PoRep C2 first (its own test), then
//! SnapDeals, WindowPoSt and WinningPoSt.
//!
//! No adapter fails the test unless `CUZK_WGPU_ALLOW_NO_ADAPTER=1` (CI has
//! lavapipe). Parameters are generated once per build directory
//! (`target/tmp/filecoin-params`, shared with the other Filecoin tests). Run in
//! release: `cargo test --release -p cuzk-plugin-backend-wgpu --test kinds`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use blstrs::Scalar;
use cuzk_alloc::InlineDealloc;
use cuzk_filecoin::{
    ensure_params, parse_c1, post_test_inputs, prover_id_from_miner, seal_test_sector,
    snap_test_inputs, verify_proof, verify_snap_proof, verify_window_post_partition,
    verify_winning_post_proof, Blinding, Envelope, FilecoinError, FilecoinProver, PorepKind,
    PorepRequest, PostKind, Priority, ProverConfig, RegisteredPoStProof, RegisteredSealProof,
    RegisteredUpdateProof, UpdateKind, WindowPostRequest, WinningPostRequest,
};
use cuzk_gpu_backend::{lock::SingleLock, CpuBackend, GpuBackend};
use cuzk_plugin_host::{
    load_backend, BackendNeeds, PluginBackend, PluginError, PluginSpec, SearchPath,
};
use cuzk_scheduler::{PipelineConfig, PipelineEngine, Policies, Unthrottled};
use cuzk_timeline::Recorder;
use ff::Field;
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;

const PROOF: RegisteredSealProof = RegisteredSealProof::StackedDrg2KiBV1_1;
const MINER: u64 = 1000;
const SECTOR: u64 = 9;
const UPDATE: RegisteredUpdateProof = RegisteredUpdateProof::StackedDrg2KiBV1;
const WINDOW: RegisteredPoStProof = RegisteredPoStProof::StackedDrgWindow2KiBV1_2;
const WINNING: RegisteredPoStProof = RegisteredPoStProof::StackedDrgWinning2KiBV1;

/// The parameter directory, set as `FIL_PROOFS_PARAMETER_CACHE` before anything
/// of filecoin-proofs reads its settings.
fn param_dir() -> PathBuf {
    let params = Path::new(env!("CARGO_TARGET_TMPDIR")).join("filecoin-params");
    std::env::set_var(cuzk_filecoin::PARAMETER_CACHE_VAR, &params);
    params
}

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

/// The plugin, loaded as the host loads `--backend wgpu`; `None` (printing
/// "skipped") only where no adapter exists and CUZK_WGPU_ALLOW_NO_ADAPTER=1.
fn wgpu_plugin() -> Option<Arc<PluginBackend>> {
    let spec = PluginSpec::new("wgpu");
    match load_backend(
        &spec,
        &SearchPath::dir(plugin_dir()),
        &BackendNeeds::default(),
    ) {
        Ok(b) => {
            let caps = b.capabilities();
            eprintln!("wgpu plugin on {:?}", caps.devices);
            assert_eq!(caps.name, "wgpu");
            assert!(caps.devices[0].total_memory > 0);
            Some(b)
        }
        Err(e @ PluginError::Rejected { .. })
            if std::env::var("CUZK_WGPU_ALLOW_NO_ADAPTER").as_deref() == Ok("1")
                && e.to_string().contains("no wgpu adapter") =>
        {
            eprintln!("skipped: no wgpu adapter ({e})");
            None
        }
        Err(e) => panic!("the wgpu plugin did not load: {e} (CI: mesa-vulkan-drivers)"),
    }
}

fn cpu() -> Arc<dyn GpuBackend> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    Arc::new(CpuBackend::new(Arc::new(pool)))
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

fn blinding(seed: u64) -> (Scalar, Scalar) {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    (Scalar::random(&mut rng), Scalar::random(&mut rng))
}

#[test]
fn porep_c2_through_the_wgpu_plugin_verifies_and_equals_the_cpu_backends() {
    let params = param_dir();
    let Some(wgpu) = wgpu_plugin() else { return };

    let t = Instant::now();
    ensure_params(&PorepKind::new(PROOF).unwrap(), &params, 2026).unwrap();
    eprintln!("parameters ready in {:.1} s", t.elapsed().as_secs_f64());
    let work = tempfile::tempdir().unwrap();
    let sealed =
        seal_test_sector(PROOF, prover_id_from_miner(MINER), SECTOR, 13, work.path()).unwrap();
    let env = serde_json::to_vec(&Envelope::wrap(&sealed.c1_json, SECTOR, 2048)).unwrap();

    let blinding = vec![blinding(36)];
    let request = |miner: u64, blinding: Blinding| PorepRequest {
        input: parse_c1(&env).unwrap(),
        prover_id: prover_id_from_miner(miner),
        sector: None,
        blinding,
    };
    let prover = FilecoinProver::new(ProverConfig::default());
    let t = Instant::now();
    prover.preload(PROOF).unwrap();
    eprintln!(
        "preload (compile + load) {:.1} s",
        t.elapsed().as_secs_f64()
    );
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

    let on_wgpu = engine(wgpu);
    let proof = prove(&on_wgpu);
    let on_cpu = engine(cpu());
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

#[test]
fn snapdeals_window_and_winning_post_through_the_wgpu_plugin_equal_the_cpu_backends() {
    let params = param_dir();
    let Some(wgpu) = wgpu_plugin() else { return };
    let on_wgpu = engine(wgpu);
    let on_cpu = engine(cpu());
    let prover = FilecoinProver::new(ProverConfig::default());

    // SnapDeals: an update of a sealed 2 KiB sector.
    let kind = UpdateKind::new(UPDATE).unwrap();
    ensure_params(&kind, &params, 2026).unwrap();
    let work = tempfile::tempdir().unwrap();
    let mut snap = snap_test_inputs(UPDATE, MINER, 21, work.path()).unwrap();
    snap.blinding = Blinding::Fixed(vec![blinding(5)]);
    let prove_snap = |engine: &PipelineEngine| {
        let t = Instant::now();
        let proof = prover
            .submit_snap(engine, snap.clone(), Priority::Normal)
            .unwrap()
            .wait() // verified by filecoin-proofs before it returns
            .unwrap();
        eprintln!("SnapDeals {:.1} s", t.elapsed().as_secs_f64());
        proof
    };
    let proof = prove_snap(&on_wgpu);
    assert_eq!(
        proof,
        prove_snap(&on_cpu),
        "SnapDeals differs from the CPU's"
    );
    verify_snap_proof(&snap, &proof).unwrap();
    let mut other = snap.clone();
    other.comm_d_new[0] ^= 1;
    assert!(verify_snap_proof(&other, &proof).is_err());

    // WindowPoSt: one partition over two sectors.
    let kind = PostKind::new(WINDOW).unwrap();
    ensure_params(&kind, &params, 2026).unwrap();
    let work = tempfile::tempdir().unwrap();
    let inputs = post_test_inputs(WINDOW, MINER, 2, 31, work.path()).unwrap();
    let window = WindowPostRequest {
        proof: inputs.proof,
        randomness: inputs.randomness.to_vec(),
        prover_id: inputs.prover_id,
        partition_index: 0,
        vanilla_proofs: inputs.vanilla_proofs.clone(),
        blinding: Blinding::Fixed(vec![blinding(6)]),
    };
    let prove_window = |engine: &PipelineEngine| {
        prover
            .submit_window_post(engine, window.clone(), Priority::High)
            .unwrap()
            .wait()
            .unwrap()
    };
    let proof = prove_window(&on_wgpu);
    assert_eq!(
        proof,
        prove_window(&on_cpu),
        "WindowPoSt differs from the CPU's"
    );
    verify_window_post_partition(&window, &proof).unwrap();
    let mut other = window.clone();
    other.randomness[0] ^= 1;
    assert!(verify_window_post_partition(&other, &proof).is_err());

    // WinningPoSt: one sector.
    let kind = PostKind::new(WINNING).unwrap();
    ensure_params(&kind, &params, 2026).unwrap();
    let work = tempfile::tempdir().unwrap();
    let inputs = post_test_inputs(WINNING, MINER, 1, 41, work.path()).unwrap();
    let winning = WinningPostRequest {
        proof: inputs.proof,
        randomness: inputs.randomness.to_vec(),
        prover_id: inputs.prover_id,
        vanilla_proofs: inputs.vanilla_proofs.clone(),
        blinding: Blinding::Fixed(vec![blinding(7)]),
    };
    let prove_winning = |engine: &PipelineEngine| {
        prover
            .submit_winning_post(engine, winning.clone(), Priority::Critical)
            .unwrap()
            .wait()
            .unwrap()
    };
    let proof = prove_winning(&on_wgpu);
    assert_eq!(
        proof,
        prove_winning(&on_cpu),
        "WinningPoSt differs from the CPU's"
    );
    verify_winning_post_proof(&winning, &proof).unwrap();
    let mut flipped = proof.clone();
    flipped[150] ^= 1;
    assert!(verify_winning_post_proof(&winning, &flipped).is_err());
}
