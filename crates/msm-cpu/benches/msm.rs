//! MSM benches: cuzk's batch-affine Pippenger against blst's.
//!
//! Run: `BENCH_NPOW=16 CARGO_TARGET_DIR=target-msm cargo bench -p cuzk-msm-cpu --bench msm`
//! (BENCH_NPOW defaults to 16; one group `2^N` per run; `BENCH_NPOW=20` takes minutes).
//!
//! Peers, all on the same number of threads:
//! - `cuzk_g1` / `cuzk_g2`: `msm_g1` / `msm_g2` on a rayon pool of `BENCH_THREADS` threads
//!   (default: every core, as blst uses).
//! - `blstrs_multi_exp_g1` / `_g2`: `G1Projective::multi_exp`, what bellperson calls; it
//!   takes projective points and normalises them to affine on every call, so it includes
//!   that conversion.
//! - `blst_affine_g1` / `_g2`: blst's Pippenger (`MultiPoint::mult`) directly on affine
//!   points, the fair peer. blst runs on its own global pool of one thread per core
//!   (`threadpool::ThreadPool::default()`); it cannot be given a thread count, so
//!   compare with `BENCH_THREADS` equal to the core count.
//! - `cuzk_g1_table` / `cuzk_g2_table`: the same MSMs over fixed-base tables of the bases
//!   (`precompute_g1` / `_g2`, made before the timing; 16× the bases' memory).
//! - `split_g1_01heavy`: `prep_msm` + `split_msm_g1` on scalars of which 90% are 0 or 1,
//!   against `cuzk_g1_01heavy` (plain `msm_g1` on the same scalars).

use blst::{blst_p1_affine, blst_p2_affine, MultiPoint};
use blstrs::{G1Projective, G2Projective, Scalar};
use criterion::{criterion_group, criterion_main, Criterion};
use cuzk_msm_cpu::{msm_g1, msm_g2, prep_msm, split_msm_g1};
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

/// Random-looking distinct points without hashing each one to the curve (too slow at
/// 2^20): a random walk over sums of a few random points, normalised in one batch.
fn points<P: Group + Curve>(n: usize, rng: &mut ChaCha8Rng) -> Vec<P::AffineRepr>
where
    P::AffineRepr: Default + Clone,
{
    let seeds: Vec<P> = (0..16).map(|_| P::random(&mut *rng)).collect();
    let mut acc = P::random(&mut *rng);
    let proj: Vec<P> = (0..n)
        .map(|_| {
            acc += seeds[(rng.next_u32() % 16) as usize];
            acc
        })
        .collect();
    let mut out = vec![<P::AffineRepr as Default>::default(); n];
    P::batch_normalize(&proj, &mut out);
    out
}

fn scalar_bytes(scalars: &[Scalar]) -> Vec<u8> {
    scalars.iter().flat_map(|s| s.to_bytes_le()).collect()
}

fn bench(c: &mut Criterion) {
    let npow = env_usize("BENCH_NPOW", 16);
    let threads = env_usize(
        "BENCH_THREADS",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
    );
    let n = 1usize << npow;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(42);
    let scalars: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut rng)).collect();
    let bytes = scalar_bytes(&scalars);
    let g1 = points::<G1Projective>(n, &mut rng);
    let g2 = points::<G2Projective>(n, &mut rng);

    let mut group = c.benchmark_group(format!("2^{npow}"));
    group.sample_size(10);

    group.bench_function("cuzk_g1", |b| {
        b.iter(|| msm_g1(&g1, &scalars, &pool).unwrap())
    });
    // Fixed-base tables (made once, outside the timing): what the CPU backend uses for
    // the bases of small circuits proved again and again.
    let t1 = cuzk_msm_cpu::precompute_g1(&g1, threads, &pool, &|| true).unwrap();
    group.bench_function("cuzk_g1_table", |b| {
        b.iter(|| cuzk_msm_cpu::msm_g1_table(&t1, &g1, &scalars, &pool).unwrap())
    });
    drop(t1);
    let t2 = cuzk_msm_cpu::precompute_g2(&g2, threads, &pool, &|| true).unwrap();
    group.bench_function("cuzk_g2_table", |b| {
        b.iter(|| cuzk_msm_cpu::msm_g2_table(&t2, &g2, &scalars, &pool).unwrap())
    });
    drop(t2);
    let g1_proj: Vec<G1Projective> = g1.iter().map(G1Projective::from).collect();
    group.bench_function("blstrs_multi_exp_g1", |b| {
        b.iter(|| G1Projective::multi_exp(&g1_proj, &scalars))
    });
    drop(g1_proj);
    let g1_blst: Vec<blst_p1_affine> = g1
        .iter()
        .map(|p| *AsRef::<blst_p1_affine>::as_ref(p))
        .collect();
    group.bench_function("blst_affine_g1", |b| {
        b.iter(|| g1_blst.as_slice().mult(&bytes, 255))
    });
    drop(g1_blst);

    group.bench_function("cuzk_g2", |b| {
        b.iter(|| msm_g2(&g2, &scalars, &pool).unwrap())
    });
    let g2_proj: Vec<G2Projective> = g2.iter().map(G2Projective::from).collect();
    group.bench_function("blstrs_multi_exp_g2", |b| {
        b.iter(|| G2Projective::multi_exp(&g2_proj, &scalars))
    });
    drop(g2_proj);
    let g2_blst: Vec<blst_p2_affine> = g2
        .iter()
        .map(|p| *AsRef::<blst_p2_affine>::as_ref(p))
        .collect();
    group.bench_function("blst_affine_g2", |b| {
        b.iter(|| g2_blst.as_slice().mult(&bytes, 255))
    });
    drop(g2_blst);

    // 90% zero or one (half each), 10% random: the shape of a boolean-heavy witness.
    let heavy: Vec<Scalar> = (0..n)
        .map(|_| match rng.next_u32() % 20 {
            0..=8 => Scalar::ZERO,
            9..=17 => Scalar::ONE,
            _ => Scalar::random(&mut rng),
        })
        .collect();
    group.bench_function("split_g1_01heavy", |b| {
        b.iter(|| {
            let split = prep_msm(&[], None, &heavy, None, &pool).unwrap();
            split_msm_g1(&g1, split.as_ref(), &pool).unwrap()
        })
    });
    group.bench_function("cuzk_g1_01heavy", |b| {
        b.iter(|| msm_g1(&g1, &heavy, &pool).unwrap())
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
