//! What the Filecoin tests share: the parameter cache (one per build directory,
//! `target/tmp/filecoin-params`, shared with the CLI's tests, generated there and never
//! downloaded), the engine they prove with (the CPU backend on two threads, or a
//! backend of the test's own), a 2 KiB sector sealed by filecoin-proofs, and a fixed
//! `r, s` to compare with bellperson at.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use blstrs::Scalar;
use cuzk_alloc::InlineDealloc;
use cuzk_filecoin::{
    ensure_params, prover_id_from_miner, seal_test_sector, CircuitKind, RegisteredSealProof,
    SealedSector,
};
use cuzk_gpu_backend::{lock::SingleLock, CpuBackend, GpuBackend};
use cuzk_scheduler::{PipelineConfig, PipelineEngine, Policies, Unthrottled};
use cuzk_timeline::Recorder;
use ff::Field;
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;

/// The miner every test sector is sealed, updated and challenged for.
pub const MINER: u64 = 1000;

/// The parameter directory, set as `FIL_PROOFS_PARAMETER_CACHE` before anything of
/// filecoin-proofs reads its settings (every test calls this first).
pub fn param_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("filecoin-params");
        std::env::set_var(cuzk_filecoin::PARAMETER_CACHE_VAR, &dir);
        dir
    })
}

/// A kind's test parameters, generated on first use in this build directory. One
/// seed for every file, so that kinds sharing a circuit (PoRep and NI-PoRep) share
/// the file.
pub fn params<K: CircuitKind>(kind: &K) -> PathBuf {
    let t = Instant::now();
    let p = ensure_params(kind, param_dir(), 2026).unwrap();
    eprintln!(
        "{} parameters ready in {:.1} s: {}",
        kind.name(),
        t.elapsed().as_secs_f64(),
        p.display()
    );
    p
}

/// A sector of `proof`'s size sealed by filecoin-proofs for [`MINER`], its data drawn
/// from `seed`.
#[allow(dead_code)] // kinds.rs makes its inputs from sectors filecoin-proofs seals itself
pub fn seal(proof: RegisteredSealProof, sector: u64, seed: u64) -> SealedSector {
    param_dir();
    let work = tempfile::tempdir().unwrap();
    seal_test_sector(
        proof,
        prover_id_from_miner(MINER),
        sector,
        seed,
        work.path(),
    )
    .unwrap()
}

/// One `r, s` pair, drawn from `seed`.
#[allow(dead_code)] // niporep.rs draws 13 pairs from one generator
pub fn blinding(seed: u64) -> (Scalar, Scalar) {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    (Scalar::random(&mut rng), Scalar::random(&mut rng))
}

/// An engine on the CPU backend, over a pool of two threads.
pub fn engine() -> PipelineEngine {
    let pool = Arc::new(
        rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap(),
    );
    engine_with(Arc::new(CpuBackend::new(pool)))
}

/// An engine on `backend`: one synthesis job and one worker, two threads each, a
/// 4 GiB budget, and the engine's own verification off (a Filecoin prover's `wait`
/// verifies with filecoin-proofs instead).
pub fn engine_with(backend: Arc<dyn GpuBackend>) -> PipelineEngine {
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
