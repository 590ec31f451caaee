//! `prep_msm` alone: one query split into zeros, ones and a tail, on two witnesses
//! of 2^BENCH_NPOW scalars: random ones (a Poseidon-heavy witness: WindowPoSt,
//! WinningPoSt, where the tail is almost everything) and 90% zeros and ones (a
//! SHA-256-heavy one: PoRep).
//!
//! Also `split_check_dense` and `split_check_porep`: the check a plugin runs on a
//! split that crossed the plugin boundary (`SplitRef::checked`, inside the host's
//! GPU lock), on the random witness's split, whose tail is everything, and on a
//! PoRep query's (a tail of 1 in 80); it uses the cores the process may run on, so
//! `taskset -c 0` gives the one-thread figure. `BENCH_NPOW=27` is the 32 GiB
//! PoRep partition's size.
//!
//! Run: `BENCH_NPOW=22 cargo bench -p cuzk-msm-cpu --bench prep` (BENCH_NPOW defaults
//! to 20; BENCH_THREADS to the machine's cores).

use blstrs::Scalar;
use criterion::{criterion_group, criterion_main, Criterion};
use cuzk_alloc::Density;
use cuzk_msm_cpu::{prep_msm, prep_msm_classified, ScalarClasses};
use ff::Field;
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn prep(c: &mut Criterion) {
    let npow = env_usize("BENCH_NPOW", 20);
    let threads = env_usize(
        "BENCH_THREADS",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
    );
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    let n = 1usize << npow;
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let dense: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut rng)).collect();
    let heavy: Vec<Scalar> = (0..n)
        .map(|_| match rng.next_u32() % 20 {
            0..=8 => Scalar::ZERO,
            9..=17 => Scalar::ONE,
            _ => Scalar::random(&mut rng),
        })
        .collect();
    let mut group = c.benchmark_group(format!("2^{npow}"));
    group.sample_size(10);
    group.bench_function("prep_msm_dense", |b| {
        b.iter(|| prep_msm(&[], None, &dense, None, &pool).unwrap())
    });
    group.bench_function("prep_msm_01heavy", |b| {
        b.iter(|| prep_msm(&[], None, &heavy, None, &pool).unwrap())
    });
    let split = prep_msm(&[], None, &dense, None, &pool).unwrap();
    bench_check(&mut group, "split_check_dense", &split);
    // A PoRep query's split: 1 value in 80 neither 0 nor 1, as a real 32 GiB
    // partition's 1.2-1.7 M tail terms of 2^27 bases are. Below 2^21 tail terms the
    // check ran on one thread, its bitmap lookups 16 MB apart at 2^27.
    let porep: Vec<Scalar> = (0..n)
        .map(|_| match rng.next_u32() % 80 {
            0 => Scalar::random(&mut rng),
            1..=40 => Scalar::ZERO,
            _ => Scalar::ONE,
        })
        .collect();
    let split = prep_msm(&[], None, &porep, None, &pool).unwrap();
    bench_check(&mut group, "split_check_porep", &split);
    // The three splits of a PoRep partition (L over all aux, A over 99.7% of them, B
    // over 25.4%: the 32 GiB densities), as the scheduler's prep stage makes them.
    let inputs: Vec<Scalar> = (0..328).map(|_| Scalar::random(&mut rng)).collect();
    let a_aux = random_density(n, 997, &mut rng);
    let b_aux = random_density(n, 254, &mut rng);
    let mut b_in = Density::new(inputs.len());
    b_in.set(0);
    group.bench_function("prep_porep_partition", |b| {
        b.iter(|| {
            let c_in = ScalarClasses::of(&inputs, &pool);
            let c_aux = ScalarClasses::of(&porep, &pool);
            let none = ScalarClasses::default();
            (
                prep_msm_classified(&none, None, &c_aux, None, &pool).unwrap(),
                prep_msm_classified(&c_in, None, &c_aux, Some(&a_aux), &pool).unwrap(),
                prep_msm_classified(&c_in, Some(&b_in), &c_aux, Some(&b_aux), &pool).unwrap(),
            )
        })
    });
    group.finish();
}

/// `len` variables, each present with probability `per_mille / 1000`.
fn random_density(len: usize, per_mille: u32, rng: &mut ChaCha8Rng) -> Density {
    let mut d = Density::new(len);
    for i in 0..len {
        if rng.next_u32() % 1000 < per_mille {
            d.set(i);
        }
    }
    d
}

/// Times `SplitRef::checked` on the parts of `split`.
fn bench_check(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    split: &cuzk_alloc::SplitScalars,
) {
    let v = split.as_ref();
    group.bench_function(name, |b| {
        b.iter(|| {
            cuzk_alloc::SplitRef::checked(
                v.num_bases(),
                v.ones_words(),
                v.tail_indices(),
                v.tail_scalars(),
            )
            .unwrap()
        })
    });
}

criterion_group!(benches, prep);
criterion_main!(benches);
