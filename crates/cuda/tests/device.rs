//! The device checks, as libtest tests: every kernel against the CPU implementation
//! (blstrs, cuzk-msm-cpu, cuzk-gpu-backend's NTT, compute_h and CpuBackend) on fresh
//! random inputs and 0/1-heavy ones, output buffers poisoned first. They run on the
//! device from the staged test binary (`scripts/stage-device.sh`,
//! `scripts/h200-run.sh`); elsewhere each prints `skipped: no CUDA device`.
//!
//! The checks are `tests/device/checks.rs`; their helpers (log, seeded inputs, naive
//! references) are `src/bin/cuzk-gpu-check/common.rs`, shared with the benchmark
//! tool. Each test logs every check to
//! `$TMPDIR/cuzk-device-checks/<test>.log` and fails with the list of those that
//! failed. The tests share one backend and run one at a time (each takes the
//! device for itself); the MSM checks vary a copy of that backend's `Tuning` per
//! MSM, never the backend's own.

#[allow(dead_code)]
#[path = "../src/bin/cuzk-gpu-check/common.rs"]
mod common;

#[path = "device/checks.rs"]
mod checks;

use std::io::Write as _;
use std::sync::{Mutex, OnceLock};

use cuzk_cuda::testing::gpu::Gpu;
use cuzk_cuda::testing::ntt::Ntt;
use cuzk_cuda::{CudaBackend, CudaConfig, CudaError};

use common::Log;

/// Largest MSM and NTT the checks reach (log2), as the full device check.
const MAX_MSM: u32 = 24;
const MAX_NTT: u32 = 26;

/// The one backend of this test process, or `None` where there is no device.
fn backend() -> Option<&'static CudaBackend> {
    static BACKEND: OnceLock<Option<CudaBackend>> = OnceLock::new();
    BACKEND
        .get_or_init(|| match CudaBackend::new(CudaConfig::default()) {
            Ok(b) => {
                println!(
                    "seed {} (the check tool's --seed replays it)",
                    common::run_seed()
                );
                Some(b)
            }
            Err(CudaError::NoDevice(_)) => None,
            Err(e) => panic!("the CUDA backend failed to start: {e}"),
        })
        .as_ref()
}

/// Runs `check` with a fresh log, one test at a time; fails with the failed checks.
fn run(name: &str, check: impl FnOnce(&CudaBackend, &Log) -> anyhow::Result<()>) {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(backend) = backend() else {
        let _ = writeln!(std::io::stderr(), "skipped: no CUDA device");
        return;
    };
    let dir = std::env::temp_dir().join("cuzk-device-checks");
    std::fs::create_dir_all(&dir).expect("creating the log folder");
    let path = dir.join(format!("{name}.log"));
    let log = Log {
        file: Mutex::new(std::fs::File::create(&path).expect("creating the log")),
        failures: Mutex::new(Vec::new()),
        checks: Mutex::new(0),
        table: Mutex::new(Vec::new()),
    };
    let result = check(backend, &log);
    let failures = log.failures.lock().unwrap().clone();
    let checks = *log.checks.lock().unwrap();
    println!(
        "{name}: {checks} checks, {} failed (log: {})",
        failures.len(),
        path.display()
    );
    if let Err(e) = result {
        panic!("{name} stopped: {e:#} (log: {})", path.display());
    }
    assert!(checks > 0, "{name} checked nothing");
    assert!(
        failures.is_empty(),
        "{name}: failed checks: {}",
        failures.join(", ")
    );
}

fn with_gpu<R>(backend: &CudaBackend, f: impl FnOnce(&Gpu, &Ntt) -> R) -> R {
    backend.with_gpu(f)
}

#[test]
fn field_and_curve_arithmetic_match_blst() {
    run("fields", |b, log| {
        with_gpu(b, |gpu, _| checks::check_fields(gpu, log))
    });
}

#[test]
fn every_ntt_kernel_matches_the_cpu_ntt() {
    let pool = common::pool();
    run("ntt", |b, log| {
        with_gpu(b, |gpu, ntt| {
            checks::check_ntt(gpu, ntt, log, &pool, MAX_NTT)
        })
    });
}

#[test]
fn h_matches_the_cpu_chain() {
    let pool = common::pool();
    run("h", |b, log| {
        with_gpu(b, |gpu, ntt| checks::check_h(gpu, ntt, log, &pool, MAX_NTT))
    });
}

#[test]
fn g1_msms_match_the_cpu() {
    let pool = common::pool();
    run("msm", |b, log| {
        with_gpu(b, |gpu, _| {
            checks::check_msm(gpu, b.tuning(), log, &pool, MAX_MSM)
        })
    });
}

#[test]
fn g2_msms_match_the_cpu() {
    let pool = common::pool();
    run("g2", |b, log| {
        with_gpu(b, |gpu, _| {
            checks::check_msm_g2(gpu, b.tuning(), log, &pool, MAX_MSM.min(18))
        })
    });
}

#[test]
fn whole_partitions_match_the_cpu_backend_resident_and_streamed() {
    let pool = common::pool();
    run("partition", |b, log| {
        let streamed = CudaBackend::new(CudaConfig {
            stream_chunk: 1000,
            ..CudaConfig::default()
        })?;
        checks::check_partition(b, &streamed, log, pool.clone())
    });
}

/// A parameter set memory-mapped from a points file is a read-only file mapping,
/// which plain page-locking refuses on platforms without read-only registration
/// support for such pages; `stream_staging = "register"` then retries with the
/// read-only flag, so a mapped set is DMA'd from in place like a decoded one.
#[test]
fn a_read_only_file_mapping_is_page_locked_in_place() {
    let Some(backend) = backend() else {
        let _ = writeln!(std::io::stderr(), "skipped: no CUDA device");
        return;
    };
    let dir = std::env::temp_dir().join(format!("cuzk-ro-register-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("points");
    let len = 16usize << 20;
    std::fs::write(&path, vec![7u8; len]).unwrap();
    let file = std::fs::File::open(&path).unwrap();
    // SAFETY: the file is ours and nobody truncates it while mapped.
    let map = unsafe { memmap2::Mmap::map(&file) }.unwrap();
    let ordinal = 0;
    let before = cuzk_cuda::testing::raw::registered_bytes(ordinal);
    with_gpu(backend, |gpu, _| {
        // SAFETY: `map` outlives the registration, dropped inside this closure.
        let reg = unsafe { cuzk_cuda::testing::raw::HostRegistration::new(gpu.context(), &map) }
            .expect("a read-only mapping is page-locked (with the read-only flag)");
        assert!(reg.is_some(), "the mapping was not registered by us");
        assert_eq!(
            cuzk_cuda::testing::raw::registered_bytes(ordinal),
            before + len as u64
        );
        drop(reg);
    });
    assert_eq!(cuzk_cuda::testing::raw::registered_bytes(ordinal), before);
    drop(map);
    let _ = std::fs::remove_dir_all(&dir);
}
