//! A WindowPoSt partition's witness: filecoin-proofs' `FallbackPoStCircuit` through
//! bellperson's and neptune's gadgets (what every prover's synthesis runs) against
//! cuzk's, one part a sector with each Poseidon hash computed natively, both on one
//! thread (so the ratio is the per-core saving; the parts' parallelism comes on top,
//! and filecoin-proofs' own extendable synthesis is parallel too).
//!
//! The circuit is the real 32 GiB structure (shape-only vanilla proofs, random
//! values), its partition cut to BENCH_SECTORS sectors (default 8; a partition has
//! 2349).
//!
//! Run: `cargo bench --release -p cuzk-filecoin --bench post_witness`

mod common;

use criterion::{criterion_group, criterion_main, Criterion};
use cuzk_filecoin::reference::WitnessPair;
use cuzk_filecoin::RegisteredPoStProof;

fn bench(c: &mut Criterion) {
    // One thread for both: filecoin-proofs' circuit synthesizes its sectors on
    // rayon's global pool (`synthesize_extendable`), made one thread here
    // before anything else starts it.
    rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build_global()
        .expect("a global pool of one thread");
    let sectors = std::env::var("BENCH_SECTORS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8);
    let pair = WitnessPair::post_partition(RegisteredPoStProof::StackedDrgWindow32GiBV1_2, sectors)
        .expect("the first partition");
    common::compare(
        c,
        &format!("window_post_32g_witness_{sectors}_sectors"),
        &pair,
        "filecoin_proofs_gadgets",
        "cuzk_native_poseidon_1_thread",
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
