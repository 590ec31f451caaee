//! The CUDA backend's benchmarks in one run: the table of BENCHMARKS.md (field
//! products, MSM, NTT, H, the PoRep-shaped partition) and the tuning sweeps.
//!
//! ```text
//! cuzk-gpu-check [OUT_DIR] [--quick] [--table-only] [--sweeps] [--device N]
//!                [--skip field-bench,msm-bench,g2-bench,ntt-bench,h-bench,spmv-bench,partition-bench]
//! cuzk-gpu-check --compile-only DIR [ARCH]   (writes staged kernels, no GPU needed)
//! ```
//! Times MSM, NTT, H and the spmv (warm-up, median of 5, CUDA events); each timed result is
//! also checked against the CPU. The correctness checks of every kernel are the
//! libtest tests in `tests/device.rs` (run on the device from the staged test
//! binaries). Full log in OUT_DIR/gpu-check.log, the table last on stdout and in
//! OUT_DIR/table.md. Exit status 1 if a check failed, 2 where there is no GPU
//! (nothing was measured). `--seed N` replays a run's inputs.

mod bench;
mod spmv_bench;
// Shared with tests/device.rs, which uses the check-only helpers.
#[allow(dead_code)]
mod common;

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Instant;

use anyhow::{anyhow, Context, Result};
use cuzk_cuda::{CudaBackend, CudaConfig, CudaError};
use cuzk_gpu_backend::GpuBackend;

use crate::bench::*;
use crate::common::*;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(i) = args.iter().position(|a| a == "--compile-only") {
        // Stage kernels without a device: `--compile-only DIR [ARCH]` writes every
        // module's CUBIN into DIR (scripts/stage-device.sh ships them in `kernels/`
        // beside the binaries, so the device spends no time in NVRTC).
        let dir = args
            .get(i + 1)
            .map(PathBuf::from)
            .ok_or_else(|| anyhow!("--compile-only needs a folder"))?;
        let arch = args.get(i + 2).cloned().unwrap_or_else(|| "sm_90".into());
        for m in cuzk_cuda::testing::kernels::MODULES {
            let t = Instant::now();
            let path = cuzk_cuda::KernelCache::compile_into(&dir, &m, &arch)?;
            println!(
                "{} for {arch}: {} in {:.1?}",
                m.name,
                path.display(),
                t.elapsed()
            );
        }
        return Ok(());
    }
    if let Some(i) = args.iter().position(|a| a == "--seed") {
        let seed = args
            .get(i + 1)
            .and_then(|s| s.parse::<u64>().ok())
            .ok_or_else(|| anyhow!("--seed needs a number"))?;
        let _ = SEED.set(seed);
    }
    let quick = args.iter().any(|a| a == "--quick");
    let table_only = args.iter().any(|a| a == "--table-only");
    let sweeps = args.iter().any(|a| a == "--sweeps");
    // --skip fields,ntt,h,msm,partition: leave sections out of this visit.
    let skip: Vec<String> = args
        .iter()
        .position(|a| a == "--skip")
        .and_then(|i| args.get(i + 1))
        .map(|s| s.split(',').map(str::to_owned).collect())
        .unwrap_or_default();
    let on = |name: &str| !skip.iter().any(|s| s == name);
    // The one positional argument: what follows no option that takes a value.
    let takes_value = |a: &str| a == "--seed" || a == "--skip" || a == "--device";
    let out = PathBuf::from(
        args.iter()
            .enumerate()
            .filter(|(i, a)| !a.starts_with("--") && (*i == 0 || !takes_value(&args[i - 1])))
            .map(|(_, a)| a)
            .next()
            .cloned()
            .unwrap_or_else(|| "gpu-check-out".into()),
    );
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let log = Log {
        file: Mutex::new(std::fs::File::create(out.join("gpu-check.log"))?),
        failures: Mutex::new(Vec::new()),
        checks: Mutex::new(0),
        table: Mutex::new(Vec::new()),
    };
    let t0 = Instant::now();
    // --device N: the CUDA ordinal to measure (default 0); on a host with several
    // GPUs, run once per device.
    let device = match args.iter().position(|a| a == "--device") {
        Some(i) => args
            .get(i + 1)
            .and_then(|s| s.parse::<usize>().ok())
            .ok_or_else(|| anyhow!("--device needs a CUDA device ordinal"))?,
        None => 0,
    };
    let backend = match CudaBackend::new(CudaConfig {
        device,
        ..CudaConfig::default()
    }) {
        Ok(b) => b,
        Err(CudaError::NoDevice(why)) => {
            // A run that found no device measured nothing: say so, and fail.
            log.line(&format!("no CUDA device ({why}): nothing was measured"));
            std::process::exit(2);
        }
        Err(e) => return Err(e.into()),
    };
    let caps = backend.capabilities();
    log.line(&format!(
        "device: {:?}; opened + kernels ready in {:.2?}",
        caps.devices,
        t0.elapsed()
    ));
    log.line(&format!(
        "seed {} (--seed {} replays this run's inputs)",
        run_seed(),
        run_seed()
    ));
    let pool = pool();
    // A section that errors out is logged as a failure and the run goes on, so one
    // visit to the GPU machine reports on everything.
    let section = |name: &str, r: Result<()>| {
        if let Err(e) = r {
            log.check(&format!("{name} (aborted)"), false, &format!("{e:#}"));
        }
        log.line(&format!("{name} done at {:.1?}", t0.elapsed()));
    };
    if on("field-bench") {
        section(
            "field bench",
            backend.with_gpu(|gpu, _| bench_fields(gpu, &log)),
        );
    }
    if on("msm-bench") || on("g2-bench") {
        section(
            "bench",
            backend.with_gpu(|gpu, _| {
                bench(
                    gpu,
                    backend.tuning(),
                    &log,
                    &pool,
                    quick,
                    table_only,
                    sweeps,
                    &on,
                )
            }),
        );
    }
    if on("ntt-bench") || on("h-bench") {
        section(
            "ntt bench",
            backend.with_gpu(|gpu, ntt| bench_ntt(gpu, ntt, &log, quick, table_only, &on)),
        );
    }
    if on("spmv-bench") {
        // The table's visit keeps to 2^24 (a 2^26 run makes and checks 3 GiB of
        // matrices and 6 GiB of a, b, c on the host: tens of seconds).
        let sizes = match (quick, table_only) {
            (true, _) => vec![20u32],
            (false, true) => vec![24],
            (false, false) => vec![24, 26],
        };
        for lg in sizes {
            section(
                &format!("spmv bench 2^{lg}"),
                backend.with_gpu(|gpu, _| spmv_bench::bench_spmv(gpu, &log, &pool, lg)),
            );
        }
    }
    if on("partition-bench") {
        // Streamed bases: DMA'd from the parameter memory page-locked in place
        // (`stream_staging = "register"`, the default) at both sizes; through the
        // staging copies at the smaller one only (the host copy of a 2^27
        // partition's ~44 GiB is tens of seconds a call).
        let streamed = |staging| {
            CudaBackend::new(CudaConfig {
                stream_chunk: 1 << 22,
                stream_staging: staging,
                device,
                ..CudaConfig::default()
            })
        };
        let registered = streamed(cuzk_cuda::StreamStaging::Register)?;
        let copied = streamed(cuzk_cuda::StreamStaging::Copy)?;
        // What a 16 GB card does with a 2^27 partition (issue 33): the backend's own
        // placement and chunk for 16 GiB, H in two buffers, every set streamed.
        let card16 = CudaBackend::new(CudaConfig {
            device_memory_gib: 16,
            device,
            ..CudaConfig::default()
        })?;
        for lg in if quick { vec![20u32] } else { vec![24u32, 27] } {
            let mut sb = vec![("registered in place, chunks of 2^22", &registered)];
            if lg <= 24 {
                sb.push(("copied through staging buffers, chunks of 2^22", &copied));
            } else {
                sb.push(("a 16 GiB card's own placement and chunk", &card16));
            }
            section(
                &format!("partition bench 2^{lg}"),
                bench_partition(&backend, sb, &log, &pool, lg),
            );
        }
    }
    let failures = log.failures.lock().unwrap().clone();
    let checks = *log.checks.lock().unwrap();
    let mut table = String::new();
    writeln!(
        table,
        "| what | size | median ms | per element | sppark peer ms |"
    )?;
    writeln!(table, "|---|---|---|---|---|")?;
    for row in log.table.lock().unwrap().iter() {
        writeln!(
            table,
            "| {} | {} | {} | {} | {} |",
            row[0], row[1], row[2], row[3], row[4]
        )?;
    }
    std::fs::write(out.join("table.md"), &table)?;
    log.line(&format!(
        "\n{} checks, {} failed ({})",
        checks,
        failures.len(),
        failures.join(", ")
    ));
    log.line(&table);
    log.line(&format!("total {:.1?}", t0.elapsed()));
    if !failures.is_empty() {
        std::process::exit(1);
    }
    Ok(())
}
