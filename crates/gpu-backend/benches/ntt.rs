//! NTT and H benches: cuzk's blocked DIF/DIT transforms beside bellperson's
//! `EvaluationDomain` (the CPU path of `bellperson::groth16::create_proof`).
//!
//! Run: `BENCH_NPOW=16 CARGO_TARGET_DIR=target-backend cargo bench -p cuzk-gpu-backend --bench ntt`
//! (BENCH_NPOW defaults to 16; one group `2^N` per run).
//!
//! Peers, in group `2^N`:
//! - `fft/cuzk`: `Domain::fft` (natural order in and out) on a rayon pool of
//!   `BENCH_THREADS` threads (default: every core);
//! - `fft_to_bitrev/cuzk`: the same transform without the bit-reversal permutation,
//!   the form the H chain uses;
//! - `fft/bellperson`: `EvaluationDomain::fft` on ec-gpu-gen's global pool (one thread
//!   per core, `EC_GPU_NUM_THREADS` changes it): compare at equal thread counts;
//! - `compute_h/cuzk` and `compute_h/bellperson`: the whole H chain from `a, b, c`
//!   (2^N constraints) to the `2^N − 1` coefficients, bellperson's being the steps of
//!   its `execute_fft`. The inputs' clone is outside the timing.

use bellperson::domain::EvaluationDomain;
use blstrs::Scalar;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use cuzk_gpu_backend::ntt::Domain;
use cuzk_gpu_backend::{compute_h, Abc};
use ec_gpu_gen::threadpool::Worker;
use ff::Field;
use rand_chacha::ChaCha8Rng;
use rand_core::SeedableRng;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn random(rng: &mut ChaCha8Rng, n: usize) -> Vec<Scalar> {
    (0..n).map(|_| Scalar::random(&mut *rng)).collect()
}

fn bellperson_h(abc: Abc, worker: &Worker) -> Vec<Scalar> {
    let mut a = EvaluationDomain::from_coeffs(abc.a).unwrap();
    let mut b = EvaluationDomain::from_coeffs(abc.b).unwrap();
    let mut c = EvaluationDomain::from_coeffs(abc.c).unwrap();
    EvaluationDomain::ifft_many(&mut [&mut a, &mut b, &mut c], worker, &mut None).unwrap();
    EvaluationDomain::coset_fft_many(&mut [&mut a, &mut b, &mut c], worker, &mut None).unwrap();
    a.mul_assign(worker, &b);
    drop(b);
    a.sub_assign(worker, &c);
    drop(c);
    a.divide_by_z_on_coset(worker);
    a.icoset_fft(worker, &mut None).unwrap();
    let mut h = a.into_coeffs();
    h.pop();
    h
}

fn bench(c: &mut Criterion) {
    let log_n = env_usize("BENCH_NPOW", 16) as u32;
    let threads = env_usize("BENCH_THREADS", num_cpus());
    let n = 1usize << log_n;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    let worker = Worker::new();
    let mut rng = ChaCha8Rng::seed_from_u64(42);
    let x = random(&mut rng, n);
    let abc = Abc {
        a: random(&mut rng, n),
        b: random(&mut rng, n),
        c: random(&mut rng, n),
    };
    let dom = Domain::new(log_n).unwrap();

    let mut g = c.benchmark_group(format!("2^{log_n}"));
    g.sample_size(10);
    let mut v = x.clone();
    g.bench_function("fft/cuzk", |b| b.iter(|| dom.fft(&mut v, &pool).unwrap()));
    g.bench_function("fft_to_bitrev/cuzk", |b| {
        b.iter(|| dom.fft_to_bitrev(&mut v, &pool).unwrap())
    });
    let mut bp = EvaluationDomain::from_coeffs(x.clone()).unwrap();
    g.bench_function("fft/bellperson", |b| {
        b.iter(|| bp.fft(&worker, &mut None).unwrap())
    });
    g.bench_function("compute_h/cuzk", |b| {
        b.iter_batched(
            || abc.clone(),
            |abc| compute_h(abc, &pool).unwrap(),
            BatchSize::LargeInput,
        )
    });
    g.bench_function("compute_h/bellperson", |b| {
        b.iter_batched(
            || abc.clone(),
            |abc| bellperson_h(abc, &worker),
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

fn num_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

criterion_group!(benches, bench);
criterion_main!(benches);
