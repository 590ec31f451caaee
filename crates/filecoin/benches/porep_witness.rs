//! A PoRep partition's witness: filecoin-proofs' circuit through bellperson's gadgets
//! (one thread, what every prover's synthesis runs) against cuzk's witness with the
//! labels' SHA-256 and the trees' Poseidon computed natively (on a pool of one thread,
//! so the ratio is the per-core saving; the split's parallelism comes on top). The
//! name `cuzk_native_labels_1_thread` is kept from when only the labels were native,
//! so that BENCHMARKS.md's rows compare.
//!
//! The circuit is the real 32 GiB structure (a shape-only C1, random values), its
//! first partition cut to BENCH_CHALLENGES challenges (default 1; a partition has 18).
//!
//! Run: `cargo bench --release -p cuzk-filecoin --bench porep_witness`

mod common;

use criterion::{criterion_group, criterion_main, Criterion};
use cuzk_filecoin::reference::WitnessPair;
use cuzk_filecoin::RegisteredSealProof;

fn bench(c: &mut Criterion) {
    let challenges = std::env::var("BENCH_CHALLENGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let c1 = cuzk_filecoin::shape_only_c1(RegisteredSealProof::StackedDrg32GiBV1_1, 3)
        .expect("a 32 GiB shape-only C1");
    let pair = WitnessPair::first_partition(c1, challenges).expect("the first partition");
    common::compare(
        c,
        &format!("porep_32g_witness_{challenges}_challenges"),
        &pair,
        "bellperson_gadgets",
        "cuzk_native_labels_1_thread",
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
