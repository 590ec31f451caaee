//! What the witness benches share: one criterion group timing filecoin-proofs'
//! circuit through its gadgets against cuzk's split witness, both on one thread,
//! checked equal before timing.

use criterion::Criterion;
use cuzk_filecoin::reference::WitnessPair;

/// Benches `pair`'s two witnesses in the group `group`, cuzk's on a pool of one
/// thread (the ratio is the per-core saving; the parts' parallelism comes on top).
pub fn compare(c: &mut Criterion, group: &str, pair: &WitnessPair, gadget: &str, native: &str) {
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

    let mut group = c.benchmark_group(group);
    group.sample_size(10);
    group.bench_function(gadget, |b| b.iter(|| pair.gadget().expect("gadget")));
    group.bench_function(native, |b| b.iter(|| pair.native(&pool).expect("native")));
    group.finish();
}
