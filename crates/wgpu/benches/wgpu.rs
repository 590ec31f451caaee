//! H and the NTT on a wgpu device, beside the CPU backend's on this host.
//!
//! Run: `BENCH_NPOW=16 cargo bench -p cuzk-wgpu --bench wgpu` (BENCH_NPOW defaults
//! to 16; one group `2^N` per run). `CUZK_WGPU_ADAPTER` picks the adapter by a
//! piece of its name (default: the first, high-performance first); on a machine
//! without a GPU, lavapipe (`source scripts/lavapipe-env.sh`) runs it on the CPU.
//!
//! Peers, in group `2^N`:
//! - `compute_h/wgpu`: `Ntt::compute_h` from host `a, b, c` (2^N constraints) to
//!   host `h`: uploads, the seven transforms, the read-back and the host gather;
//! - `fft_to_bitrev/wgpu`: one forward transform, upload and read-back included;
//! - `fft_to_bitrev/wgpu-resident`: forward transforms of a vector uploaded once,
//!   outside the timing (`Ntt::fft_to_bitrev_resident`), each iteration one
//!   transform and a wait for the queue: the figure to hold against a
//!   device-resident NTT such as the CUDA backend's (its word products as u64
//!   where the device has SHADER_INT64);
//! - `fft_to_bitrev/wgpu-resident-16bit`: the same with the word products as
//!   16-bit halves (only where the first used u64 products);
//! - `compute_h/cpu`: `cuzk_gpu_backend::compute_h` on a pool of every core.

use std::sync::Arc;

use blstrs::Scalar;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use cuzk_gpu_backend::{compute_h, Abc, AbcRef};
use cuzk_wgpu::{Context, Ntt, WgpuConfig};
use ff::Field;
use rand_chacha::ChaCha8Rng;
use rand_core::SeedableRng;

fn bench(c: &mut Criterion) {
    let log: u32 = std::env::var("BENCH_NPOW")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16);
    let n = 1usize << log;
    let config = WgpuConfig {
        adapter: std::env::var("CUZK_WGPU_ADAPTER").unwrap_or_default(),
        ..WgpuConfig::default()
    };
    let ctx = Arc::new(Context::new(&config).expect("a wgpu adapter"));
    eprintln!("adapter: {} ({:?})", ctx.info.name, ctx.info.backend);
    let ntt = Ntt::new(ctx, &config).expect("kernels");
    let pool = rayon::ThreadPoolBuilder::new().build().unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(16);
    let mut random = || (0..n).map(|_| Scalar::random(&mut rng)).collect::<Vec<_>>();
    let abc = Abc {
        a: random(),
        b: random(),
        c: random(),
    };

    let mut g = c.benchmark_group(format!("2^{log}"));
    g.sample_size(10);
    g.bench_function("compute_h/wgpu", |b| {
        b.iter(|| ntt.compute_h(AbcRef::new(&abc), &pool).unwrap())
    });
    g.bench_function("fft_to_bitrev/wgpu", |b| {
        b.iter_batched(
            || abc.a.clone(),
            |mut v| ntt.fft_to_bitrev(&mut v).unwrap(),
            BatchSize::LargeInput,
        )
    });
    let mut resident = ntt.upload(&abc.a).unwrap();
    ntt.sync().unwrap();
    g.bench_function("fft_to_bitrev/wgpu-resident", |b| {
        b.iter(|| {
            ntt.fft_to_bitrev_resident(&mut resident).unwrap();
            ntt.sync().unwrap();
        })
    });
    // The same with the word products as 16-bit halves, where the kernels above
    // multiply as u64: the two in one run, on one device.
    if ntt.uses_int64() {
        let halves = Ntt::new(
            ntt.context().clone(),
            &WgpuConfig {
                int64_products: Some(false),
                ..config.clone()
            },
        )
        .expect("kernels");
        g.bench_function("fft_to_bitrev/wgpu-resident-16bit", |b| {
            b.iter(|| {
                halves.fft_to_bitrev_resident(&mut resident).unwrap();
                halves.sync().unwrap();
            })
        });
    }
    drop(resident);
    g.bench_function("compute_h/cpu", |b| {
        b.iter_batched(
            || abc.clone(),
            |abc| compute_h(abc, &pool).unwrap(),
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
