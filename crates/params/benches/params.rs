//! Reading a parameters file: cuzk-params' parallel memory-mapped reader against
//! bellperson's `Parameters::read` (unchecked), on the same file in the same run.
//!
//! Run: `BENCH_NPOW=12 cargo bench --release -p cuzk-params --bench params`
//! (BENCH_NPOW: log2 of the circuit's constraints, default 12; generating the
//! parameters first takes a while above 16).

#[path = "../tests/common/mod.rs"]
mod common;

use std::io::BufReader;

use blstrs::Bls12;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use cuzk_params::{read_params, summarize, write_params, Parameters, Validation};

fn bench(c: &mut Criterion) {
    let npow: u32 = std::env::var("BENCH_NPOW")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12);
    // The chain has one constraint per step plus one per input and `v0 = x0`.
    let steps = (1usize << npow) - 4;
    let params = common::params_for(2, steps, 1);
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("bench.params");
    write_params(&params, &path).expect("write");
    let bytes = summarize(&path).expect("summarize").file_bytes;

    let mut group = c.benchmark_group(format!("2^{npow}"));
    group.sample_size(10);
    group.throughput(Throughput::Bytes(bytes));
    for validation in [Validation::None, Validation::Subgroup] {
        group.bench_function(format!("cuzk read_params {validation:?}"), |b| {
            b.iter(|| read_params(&path, validation).expect("read"))
        });
    }
    group.bench_function("bellperson Parameters::read unchecked", |b| {
        b.iter(|| {
            let file = std::fs::File::open(&path).expect("open");
            Parameters::<Bls12>::read(BufReader::with_capacity(1 << 20, file), false).expect("read")
        })
    });
    group.bench_function("cuzk summarize", |b| {
        b.iter(|| summarize(&path).expect("summarize"))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
