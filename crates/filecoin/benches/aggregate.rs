//! SnarkPack aggregation of a non-interactive PoRep sector's partition proofs on the
//! CPU: bellperson's `aggregate_proofs` (what filecoin-proofs' `seal_commit_phase2`
//! runs after the partitions) over BENCH_PROOFS proofs (default 128: a 32 GiB or
//! 64 GiB sector's 126 partitions padded to a power of two; 16 for the test sizes'
//! 13), through cuzk's timing-only SRS (made in memory, specialised once before the
//! measurement, as filecoin-proofs keeps its specialised key). The proofs are random
//! points: SnarkPack's cost does not depend on whether they verify.
//!
//! Run: `BENCH_PROOFS=128 cargo bench -p cuzk-filecoin --bench aggregate`

use criterion::{criterion_group, criterion_main, Criterion};
use cuzk_filecoin::aggregate::TimingOnlySrs;
use cuzk_filecoin::{PorepKind, RegisteredSealProof};
use group::{Curve, Group};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;

fn bench(c: &mut Criterion) {
    let proofs: usize = std::env::var("BENCH_PROOFS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(128);
    let kind = PorepKind::new(RegisteredSealProof::StackedDrg32GiBV1_2_Feat_NonInteractivePoRep)
        .expect("NI-PoRep 32 GiB");
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let mut bytes = Vec::with_capacity(proofs * cuzk_filecoin::PARTITION_PROOF_LEN);
    for _ in 0..proofs {
        bellperson::groth16::Proof::<blstrs::Bls12> {
            a: blstrs::G1Projective::random(&mut rng).to_affine(),
            b: blstrs::G2Projective::random(&mut rng).to_affine(),
            c: blstrs::G1Projective::random(&mut rng).to_affine(),
        }
        .write(&mut bytes)
        .expect("writing to a vector");
    }
    let t = std::time::Instant::now();
    let srs = TimingOnlySrs::generate(7, proofs);
    eprintln!(
        "timing-only SRS for {} proofs: {:.2} s",
        srs.max_proofs(),
        t.elapsed().as_secs_f64()
    );
    let t = std::time::Instant::now();
    srs.aggregate(&kind, &bytes)
        .expect("a first aggregate (specialises the key)");
    eprintln!(
        "first aggregate (key specialised): {:.2} s",
        t.elapsed().as_secs_f64()
    );
    let mut group = c.benchmark_group("snarkpack_aggregate");
    group.sample_size(10);
    group.bench_function(format!("{proofs}_proofs"), |b| {
        b.iter(|| srs.aggregate(&kind, &bytes).expect("aggregate"))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
