//! The native SnapDeals witness against storage-proofs-update's circuit.

use super::*;
use crate::reference::WitnessPair;
use crate::snap::{snap_circuits, UpdateKind, UpdatePublic};
use crate::SnapRequest;
use filecoin_proofs::constants::SectorShape2KiB;
use filecoin_proofs_api::RegisteredUpdateProof;
use std::sync::OnceLock;

fn pool() -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(3)
        .build()
        .expect("pool")
}

/// The gadget's witness and the split native one are the same, value for value,
/// for the shape compiled from filecoin-proofs' circuit (whose counts of inputs,
/// aux variables and constraints the split witness is checked against).
fn same(pair: &WitnessPair) -> usize {
    let whole = pair.gadget().expect("gadget");
    let native = pair.native(&pool()).expect("native");
    assert_eq!(native.input, whole.input, "public inputs");
    assert_eq!(native.aux.len(), whole.aux.len(), "aux variables");
    assert!(native.aux == whole.aux, "aux values differ");
    assert_eq!(whole.input.len(), pair.r1cs.num_inputs());
    whole.aux.len()
}

/// A 2 KiB sector sealed and updated by filecoin-proofs, once per test binary.
fn real_2kib() -> &'static SnapRequest {
    static R: OnceLock<SnapRequest> = OnceLock::new();
    R.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        crate::snap_test_inputs(
            RegisteredUpdateProof::StackedDrg2KiBV1,
            1000,
            21,
            dir.path(),
        )
        .expect("a 2 KiB update")
    })
}

#[test]
fn native_witness_of_a_real_2kib_update_is_filecoin_proofs_witness() {
    let pair = WitnessPair::snap_request_partition(real_2kib(), 0, usize::MAX).expect("pair");
    let aux = same(&pair);
    // 10 challenges, each two 8-ary Poseidon paths and a 3-level SHA-256 path.
    assert!(aux > 100_000, "a real partition: {aux} aux values");
}

/// The 32 GiB shape (8-8-0 trees, 128 apex leaves, 4 partition bits), cut to ten
/// challenges (two digests of nine) so that the gadget's witness stays seconds.
#[test]
fn native_witness_of_the_32gib_shape_is_filecoin_proofs_witness() {
    let pair =
        WitnessPair::snap_partition(RegisteredUpdateProof::StackedDrg32GiBV1, 0, 10).expect("pair");
    assert!(same(&pair) > 1_000_000);
}

/// The 64 GiB shape (8-8-2 trees: a top tree too), two challenges.
#[test]
fn native_witness_of_the_64gib_shape_is_filecoin_proofs_witness() {
    let pair =
        WitnessPair::snap_partition(RegisteredUpdateProof::StackedDrg64GiBV1, 0, 2).expect("pair");
    same(&pair);
}

/// A whole partition past the first, uncut (8 MiB: 10 challenges of 16 random
/// bits from one digest; partition 3 of 4, so its digest's index and partition
/// bits are not zero).
#[test]
fn native_witness_of_a_whole_8mib_partition_is_filecoin_proofs_witness() {
    let pair =
        WitnessPair::snap_partition(RegisteredUpdateProof::StackedDrg8MiBV1, 3, 10).expect("pair");
    same(&pair);
}

/// The real 2 KiB update's first partition, as the engine builds it.
fn real_circuit() -> SnapCircuit<SectorShape2KiB> {
    let request = real_2kib();
    let kind = UpdateKind::new(request.proof).expect("kind");
    let public = UpdatePublic::new(request).expect("public");
    snap_circuits::<SectorShape2KiB>(&kind, &public, &request.vanilla_proofs)
        .expect("circuits")
        .swap_remove(0)
        .circuit
}

fn native_of(
    shape: &cuzk_synth::R1cs,
    c: SnapCircuit<SectorShape2KiB>,
) -> Result<cuzk_synth::Witness, cuzk_synth::SynthError> {
    cuzk_synth::synthesize_witness_split(shape, c, &pool())
}

/// One sibling of one replica path changed: the native witness follows its
/// input, and the comparison with the gadget's witness sees the difference.
#[test]
fn a_changed_path_value_changes_the_witness() {
    let good = real_circuit();
    let shape = cuzk_synth::compile_shape(good.clone()).expect("shape");
    let want = cuzk_synth::synthesize_witness_for(&shape, good.clone()).expect("gadget");
    let mut bad = good;
    let sibling = &mut bad.whole.priv_inputs.challenge_proofs[4].path_r_new[1][6];
    *sibling = sibling.map(|s| s + Scalar::ONE);
    let got = native_of(&shape, bad).expect("native");
    assert_eq!(got.aux.len(), want.aux.len());
    let differ = got
        .aux
        .iter()
        .zip(&want.aux)
        .filter(|(a, b)| a != b)
        .count();
    assert!(differ > 0 && got.aux != want.aux);
}

/// A new leaf that is not the encoding of its old leaf and new data (the
/// circuit's own sanity check, a panic there) is an error here.
#[test]
fn a_new_leaf_that_is_not_the_encoding_is_an_error() {
    let good = real_circuit();
    let shape = cuzk_synth::compile_shape(good.clone()).expect("shape");
    assert!(native_of(&shape, good.clone()).is_ok());
    let mut bad = good;
    let leaf = &mut bad.whole.priv_inputs.challenge_proofs[7].leaf_r_new;
    *leaf = leaf.map(|l| l + Scalar::ONE);
    let e = native_of(&shape, bad).expect_err("a wrong encoding");
    assert!(e.to_string().contains("encoding"), "{e}");
}

/// The challenges of a partition must share its path above the apex tree (the
/// circuit asserts it): 8 MiB partitions have two levels of it.
#[test]
fn challenges_that_disagree_on_the_partition_path_are_an_error() {
    use filecoin_proofs::constants::SectorShape8MiB;
    let request =
        crate::shape_only_snap(RegisteredUpdateProof::StackedDrg8MiBV1, 4).expect("request");
    let kind = UpdateKind::new(request.proof).expect("kind");
    let public = UpdatePublic::new(&request).expect("public");
    let mut c = snap_circuits::<SectorShape8MiB>(&kind, &public, &request.vanilla_proofs)
        .expect("circuits")
        .swap_remove(1)
        .circuit;
    let shape = cuzk_synth::compile_shape(c.clone()).expect("shape");
    assert!(cuzk_synth::synthesize_witness_split(&shape, c.clone(), &pool()).is_ok());
    let path = &mut c.whole.priv_inputs.challenge_proofs[2].path_d_new;
    let top = path.len() - 1;
    path[top][0] = path[top][0].map(|s| s + Scalar::ONE);
    assert!(cuzk_synth::synthesize_witness_split(&shape, c, &pool()).is_err());
}

/// The parts are told their sizes (so the engine writes each into its window of the
/// witness, copying none): one apex part, then challenges of one size, together the
/// shape's aux variables less the head's.
#[test]
fn the_parts_are_told_their_sizes() {
    use cuzk_synth::SplitCircuit;
    let c = real_circuit();
    let shape = cuzk_synth::compile_shape(c.clone()).expect("shape");
    let (prefix, parts) = c.split().expect("split");
    let mut head = Detached::default();
    prefix.synthesize(&mut head).expect("head");
    let own = shape.num_aux() - head.aux;
    let sizes = SnapCircuit::part_sizes(&parts, own).expect("sizes");
    assert_eq!(sizes.len(), parts.len());
    assert_eq!(sizes.iter().sum::<usize>(), own);
    assert!(sizes[1..].iter().all(|s| *s == sizes[1]));
    assert!(sizes[0] > sizes[1], "the apex part is the larger");
}
