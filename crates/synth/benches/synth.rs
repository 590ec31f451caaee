//! Synthesis bench: witness-only synthesis, the parallel mat-vec (`spmv`) and, for
//! scale, the one-off `compile` and bellperson-style synthesis (the test oracle), on a multiplication chain and on SHA-256, each of
//! about 2^BENCH_NPOW constraints.
//!
//! Run: `BENCH_NPOW=16 cargo bench --release -p cuzk-synth --bench synth`
//! (BENCH_THREADS sets the spmv pool size, default: all cores).

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::Duration;

use bellpepper_core::Circuit;
use blstrs::Scalar;
use common::{MulChain, Sha};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use cuzk_synth::{compile, spmv_parallel, synthesize_witness_for, NoThrottle};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn bench_circuit<C: Circuit<Scalar>>(
    c: &mut Criterion,
    npow: usize,
    name: &str,
    make: impl Fn(u64) -> C,
    pool: &rayon::ThreadPool,
) {
    let compiled = compile(make(1)).unwrap();
    let r1cs = &compiled.r1cs;
    let mut g = c.benchmark_group(format!("2^{npow}"));
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .throughput(Throughput::Elements(r1cs.num_constraints() as u64));
    eprintln!("{name}: {r1cs:?}, {} MiB", r1cs.heap_size() >> 20);

    // The baseline: bellperson's per-proof synthesis (the test oracle mirrors it).
    g.bench_function(BenchmarkId::new("bellperson_synthesis", name), |b| {
        b.iter(|| common::reference(make(2)).unwrap())
    });
    g.bench_function(BenchmarkId::new("compile", name), |b| {
        b.iter(|| compile(make(2)).unwrap())
    });
    g.bench_function(BenchmarkId::new("synthesize_witness", name), |b| {
        b.iter(|| synthesize_witness_for(r1cs, make(2)).unwrap())
    });
    let witness = synthesize_witness_for(r1cs, make(2)).unwrap();
    g.bench_function(BenchmarkId::new("spmv_parallel", name), |b| {
        b.iter(|| spmv_parallel(r1cs, &witness, pool, &NoThrottle).unwrap())
    });
    g.finish();
}

fn synth(c: &mut Criterion) {
    let npow = env_usize("BENCH_NPOW", 16);
    let threads = env_usize("BENCH_THREADS", 0);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    let n = 1usize << npow;

    // MulChain(len, 4 publics) has len + 6 constraints.
    bench_circuit(
        c,
        npow,
        "mul_chain",
        |seed| MulChain::new(n.saturating_sub(6).max(1), 4, seed),
        &pool,
    );

    let per_block = compile(Sha { blocks: 2, seed: 0 })
        .unwrap()
        .r1cs
        .num_constraints()
        / 2;
    let blocks = n.div_ceil(per_block).max(1);
    bench_circuit(c, npow, "sha256", |seed| Sha { blocks, seed }, &pool);
}

criterion_group!(benches, synth);
criterion_main!(benches);
