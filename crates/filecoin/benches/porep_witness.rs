//! A PoRep partition's witness: filecoin-proofs' circuit through bellperson's gadgets
//! (one thread, what every prover's synthesis runs) against cuzk's witness with the
//! labels' SHA-256 computed natively (on a pool of one thread, so the ratio is the
//! per-core saving; the split's parallelism comes on top).
//!
//! The circuit is the real 32 GiB structure (a shape-only C1, random values), its
//! first partition cut to BENCH_CHALLENGES challenges (default 1; a partition has 18).
//!
//! Run: `cargo bench --release -p cuzk-filecoin --bench porep_witness`

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
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("pool");
    // The two witnesses are the same, value for value (the tests check it on every
    // shape; here it guards the numbers).
    let (g, n) = (
        pair.gadget().expect("gadget"),
        pair.native(&pool).expect("native"),
    );
    assert!(g.aux == n.aux && g.input == n.input, "witnesses differ");
    drop((g, n));

    let mut group = c.benchmark_group(format!("porep_32g_witness_{challenges}_challenges"));
    group.sample_size(10);
    group.bench_function("bellperson_gadgets", |b| {
        b.iter(|| pair.gadget().expect("gadget"))
    });
    group.bench_function("cuzk_native_labels_1_thread", |b| {
        b.iter(|| pair.native(&pool).expect("native"))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
