//! A SnapDeals partition's witness: storage-proofs-update's `EmptySectorUpdateCircuit`
//! through bellperson's and neptune's gadgets (one thread, what every prover's
//! synthesis runs) against cuzk's, its challenges as parts with SHA-256 and Poseidon
//! computed natively (on a pool of one thread, so the ratio is the per-core saving;
//! the parts' parallelism comes on top).
//!
//! The circuit is the real 32 GiB structure (a shape-only update, random values), its
//! first partition cut to BENCH_CHALLENGES challenges (default 8; a partition has 86).
//! With BENCH_ONCE set, each witness is timed once instead (a whole partition's
//! gadget witness is ~30-40 s, too long for criterion's ten samples), checked equal,
//! and the native one also on BENCH_THREADS threads (default: the machine's).
//!
//! Run: `cargo bench --release -p cuzk-filecoin --bench snap_witness`
//! or:  `BENCH_ONCE=1 BENCH_CHALLENGES=86 cargo bench --release -p cuzk-filecoin --bench snap_witness`

mod common;

use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion};
use cuzk_filecoin::reference::WitnessPair;
use cuzk_filecoin::RegisteredUpdateProof;

fn env(name: &str) -> Option<usize> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

fn once(pair: &WitnessPair) {
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("pool");
    let threads = env("BENCH_THREADS").unwrap_or_else(num_cpus);
    let many = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("pool");
    let t = Instant::now();
    let g = pair.gadget().expect("gadget");
    let gadget = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let n = pair.native(&one).expect("native");
    let native = t.elapsed().as_secs_f64();
    // The two witnesses are the same, value for value (as `common::compare` checks).
    assert!(g.aux == n.aux && g.input == n.input, "witnesses differ");
    drop((g, n));
    let t = Instant::now();
    let n = pair.native(&many).expect("native");
    let parallel = t.elapsed().as_secs_f64();
    drop(n);
    println!(
        "{} aux: gadgets {gadget:.2} s, native 1 thread {native:.2} s ({:.1}x), \
         native {threads} threads {parallel:.2} s",
        pair.r1cs.num_aux(),
        gadget / native
    );
}

fn num_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn bench(c: &mut Criterion) {
    let challenges = env("BENCH_CHALLENGES").unwrap_or(8);
    let pair = WitnessPair::snap_partition(RegisteredUpdateProof::StackedDrg32GiBV1, 0, challenges)
        .expect("the first partition");
    if std::env::var_os("BENCH_ONCE").is_some() {
        return once(&pair);
    }
    common::compare(
        c,
        &format!("snap_32g_witness_{challenges}_challenges"),
        &pair,
        "storage_proofs_update_gadgets",
        "cuzk_native_1_thread",
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
