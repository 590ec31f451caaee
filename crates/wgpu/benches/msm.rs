//! The G1 MSM on a wgpu device, against blst's CPU MSM on the same inputs.
//!
//! Run: `BENCH_NPOW=20 cargo bench -p cuzk-wgpu --bench msm` (BENCH_NPOW defaults to 16;
//! one group `2^N` a run). The device is wgpu's high-performance adapter
//! (`WGPU_BACKEND=vulkan` to pin the backend); on a machine with only lavapipe,
//! `VK_ICD_FILENAMES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json` and a small N.
//! `BENCH_WINDOW` overrides the window width, `BENCH_WG` the threads a workgroup
//! (default 64), `BENCH_INT64=0` makes word products from 16-bit halves even
//! where the device has SHADER_INT64; `BENCH_BLST=0` skips the CPU peer
//! (minutes at 2^24 on few cores).
//!
//! - `wgpu_g1`: `G1Msm::msm` on bases uploaded once (scalar upload, every GPU
//!   pass and the host's final window sums included).
//! - `wgpu_g1_split`: `G1Msm::split_msm` on scalars of which 90% are 0 or 1.
//! - `blst_g1`: `G1Projective::multi_exp` on all cores.

use blstrs::{G1Affine, G1Projective, Scalar};
use criterion::{criterion_group, criterion_main, Criterion};
use cuzk_alloc::{Density, SplitScalars};
use cuzk_wgpu::msm::testing::block_on;
use cuzk_wgpu::msm::{G1Msm, MsmConfig};
use ff::Field;
use group::{Curve, Group};
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Distinct random points, cheaply: a walk over sums of 16 random points.
fn points(n: usize, rng: &mut ChaCha8Rng) -> Vec<G1Affine> {
    let seeds: Vec<G1Projective> = (0..16).map(|_| G1Projective::random(&mut *rng)).collect();
    let mut acc = G1Projective::random(&mut *rng);
    let proj: Vec<G1Projective> = (0..n)
        .map(|_| {
            acc += seeds[(rng.next_u32() % 16) as usize];
            acc
        })
        .collect();
    let mut out = vec![G1Affine::from(G1Projective::identity()); n];
    G1Projective::batch_normalize(&proj, &mut out);
    out
}

fn limbs(s: &Scalar) -> [u64; 4] {
    let b = s.to_bytes_le();
    std::array::from_fn(|k| u64::from_le_bytes(b[8 * k..8 * k + 8].try_into().unwrap()))
}

fn device() -> (wgpu::Device, wgpu::Queue) {
    let instance = wgpu::Instance::default();
    let adapter = block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
        power_preference: wgpu::PowerPreference::HighPerformance,
        ..Default::default()
    }))
    .expect("a wgpu adapter");
    let info = adapter.get_info();
    eprintln!("wgpu adapter: {} ({:?})", info.name, info.backend);
    block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        required_limits: adapter.limits(),
        // u64 word products where the adapter has them (BENCH_INT64=0: 16-bit).
        required_features: adapter.features() & wgpu::Features::SHADER_INT64,
        ..Default::default()
    }))
    .expect("a device with the adapter's limits")
}

fn bench(c: &mut Criterion) {
    let npow = env_usize("BENCH_NPOW", 16);
    let n = 1usize << npow;
    let window = std::env::var("BENCH_WINDOW")
        .ok()
        .and_then(|v| v.parse().ok());
    let mut rng = ChaCha8Rng::seed_from_u64(42);
    let bases = points(n, &mut rng);
    let scalars: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut rng)).collect();
    let limbs_: Vec<[u64; 4]> = scalars.iter().map(limbs).collect();

    let (device, queue) = device();
    let msm = G1Msm::with_config(
        &device,
        MsmConfig {
            window_bits: window,
            workgroup_size: std::env::var("BENCH_WG").ok().and_then(|v| v.parse().ok()),
            int64_products: (env_usize("BENCH_INT64", 1) == 0).then_some(false),
            ..Default::default()
        },
    )
    .expect("MSM pipelines");
    let on_device = msm.upload(&device, &queue, &bases).expect("bases uploaded");
    // Checked once against blst before timing.
    let got = msm.msm(&device, &queue, &on_device, &limbs_).expect("MSM");
    let proj: Vec<G1Projective> = bases.iter().map(G1Projective::from).collect();
    let want = G1Projective::multi_exp(&proj, &scalars);
    assert_eq!(got, want, "the GPU MSM disagrees with blst");

    let mut group = c.benchmark_group(format!("2^{npow}"));
    group.sample_size(10);
    group.bench_function("wgpu_g1", |b| {
        b.iter(|| msm.msm(&device, &queue, &on_device, &limbs_).unwrap())
    });

    // 45% zeros, 45% ones, 10% random: the split form.
    let mut ones = Density::new(0);
    let (mut idx, mut tail) = (Vec::new(), Vec::new());
    for i in 0..n {
        let r = rng.next_u32() % 20;
        ones.push((9..18).contains(&r));
        if r >= 18 {
            idx.push(i as u32);
            tail.push(limbs_[i]);
        }
    }
    let split = SplitScalars::from_parts(n, ones, idx, tail).expect("a split");
    group.bench_function("wgpu_g1_split", |b| {
        b.iter(|| {
            msm.split_msm(&device, &queue, &on_device, split.as_ref())
                .unwrap()
        })
    });
    if env_usize("BENCH_BLST", 1) != 0 {
        group.bench_function("blst_g1", |b| {
            b.iter(|| G1Projective::multi_exp(&proj, &scalars))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
