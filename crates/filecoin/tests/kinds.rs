//! The other kinds at 2 KiB: a SnapDeals update, a WindowPoSt partition and a
//! WinningPoSt, each from vanilla proofs made here by filecoin-proofs (a sector
//! sealed, updated, challenged), proven by cuzk's engine through `cuzk-filecoin`,
//! verified by filecoin-proofs and compared byte for byte with bellperson's prover at
//! the same `r, s`; and every kind of bad input, each a typed error.
//!
//! Parameters are generated once per build directory (`target/tmp/filecoin-params`,
//! shared with the PoRep tests and the CLI's), never downloaded.

mod common;

use std::sync::OnceLock;
use std::time::Instant;

use common::{blinding, engine, param_dir, params, MINER};
use cuzk_filecoin::reference_kinds::{
    snap_with_bellperson, window_post_with_bellperson, winning_post_with_bellperson,
};
use cuzk_filecoin::{
    parse_post_proof, parse_update_proof, post_test_inputs, snap_test_inputs, verify_snap_proof,
    verify_window_post_partition, verify_winning_post_proof, Blinding, FilecoinError,
    FilecoinProver, PostInputs, PostKind, Priority, ProverConfig, RegisteredPoStProof,
    RegisteredUpdateProof, SnapRequest, UpdateKind, WindowPostRequest, WinningPostRequest,
    MAX_PARTITIONS_PER_DEADLINE,
};

const UPDATE: RegisteredUpdateProof = RegisteredUpdateProof::StackedDrg2KiBV1;
const WINDOW: RegisteredPoStProof = RegisteredPoStProof::StackedDrgWindow2KiBV1_2;
const WINNING: RegisteredPoStProof = RegisteredPoStProof::StackedDrgWinning2KiBV1;

fn snap_inputs() -> &'static SnapRequest {
    static S: OnceLock<SnapRequest> = OnceLock::new();
    S.get_or_init(|| {
        param_dir();
        let work = tempfile::tempdir().unwrap();
        snap_test_inputs(UPDATE, MINER, 21, work.path()).unwrap()
    })
}

fn window_inputs() -> &'static PostInputs {
    static S: OnceLock<PostInputs> = OnceLock::new();
    S.get_or_init(|| {
        param_dir();
        let work = tempfile::tempdir().unwrap();
        post_test_inputs(WINDOW, MINER, 2, 31, work.path()).unwrap()
    })
}

fn winning_inputs() -> &'static PostInputs {
    static S: OnceLock<PostInputs> = OnceLock::new();
    S.get_or_init(|| {
        param_dir();
        let work = tempfile::tempdir().unwrap();
        post_test_inputs(WINNING, MINER, 1, 41, work.path()).unwrap()
    })
}

fn window_request(inputs: &PostInputs, blinding: Blinding) -> WindowPostRequest {
    WindowPostRequest {
        proof: inputs.proof,
        randomness: inputs.randomness.to_vec(),
        prover_id: inputs.prover_id,
        partition_index: 0,
        vanilla_proofs: inputs.vanilla_proofs.clone(),
        blinding,
    }
}

fn winning_request(inputs: &PostInputs, blinding: Blinding) -> WinningPostRequest {
    WinningPostRequest {
        proof: inputs.proof,
        randomness: inputs.randomness.to_vec(),
        prover_id: inputs.prover_id,
        vanilla_proofs: inputs.vanilla_proofs.clone(),
        blinding,
    }
}

#[test]
fn snapdeals_update_of_a_2kib_sector_verifies_and_matches_bellperson() {
    param_dir();
    let kind = UpdateKind::new(UPDATE).unwrap();
    let params = params(&kind);
    let mut request = snap_inputs().clone();
    assert_eq!(request.vanilla_proofs.len(), kind.partitions());
    let rs = blinding(5);
    request.blinding = Blinding::Fixed(vec![rs]);

    let prover = FilecoinProver::new(ProverConfig::default());
    let engine = engine();
    let t = Instant::now();
    let job = prover
        .submit_snap(&engine, request.clone(), Priority::Normal)
        .unwrap();
    // `wait` verifies with filecoin-proofs' verify_empty_sector_update_proof.
    let proof = job.wait().unwrap();
    eprintln!("cuzk SnapDeals {:.1} s", t.elapsed().as_secs_f64());
    assert_eq!(proof.len(), kind.proof_len());

    let t = Instant::now();
    let reference = snap_with_bellperson(&request, &params, &[rs]).unwrap();
    eprintln!("bellperson SnapDeals {:.1} s", t.elapsed().as_secs_f64());
    assert_eq!(
        proof, reference,
        "cuzk's update proof differs from bellperson's"
    );

    // Checked again, and refused for another comm_d_new or a flipped byte.
    verify_snap_proof(&request, &proof).unwrap();
    let mut other = request.clone();
    other.comm_d_new[0] ^= 1;
    let e = verify_snap_proof(&other, &proof);
    assert!(
        matches!(
            e,
            Err(FilecoinError::Rejected { .. }) | Err(FilecoinError::Verifier(_))
        ),
        "{e:?}"
    );
    let mut flipped = proof.clone();
    flipped[100] ^= 1;
    assert!(verify_snap_proof(&request, &flipped).is_err());

    // A submission with commitments that do not match the vanilla proofs never gives
    // bytes back: filecoin-proofs' update circuit itself refuses it while its witness
    // is computed (its `leaf_r_new` sanity check panics, which fails this job only),
    // or, had it been proven, its verifier would.
    let mut wrong = request.clone();
    wrong.comm_r_new = request.comm_r_old.clone();
    wrong.blinding = Blinding::Random;
    let e = prover
        .submit_snap(&engine, wrong, Priority::Normal)
        .unwrap()
        .wait();
    assert!(
        matches!(
            e,
            Err(FilecoinError::Rejected { .. }) | Err(FilecoinError::Job(_))
        ),
        "{e:?}"
    );
}

#[test]
fn window_post_partition_of_2kib_sectors_verifies_and_matches_bellperson() {
    param_dir();
    let kind = PostKind::new(WINDOW).unwrap();
    assert_eq!(kind.default_priority(), Priority::High);
    let params = params(&kind);
    let inputs = window_inputs();
    assert_eq!(inputs.vanilla_proofs.len(), 2);
    let rs = blinding(6);
    let request = window_request(inputs, Blinding::Fixed(vec![rs]));

    let prover = FilecoinProver::new(ProverConfig::default());
    let engine = engine();
    let proof = prover
        .submit_window_post(&engine, request.clone(), kind.default_priority())
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(proof.len(), 192);
    let reference = window_post_with_bellperson(&request, &params, rs).unwrap();
    assert_eq!(
        proof, reference,
        "cuzk's WindowPoSt differs from bellperson's"
    );

    verify_window_post_partition(&request, &proof).unwrap();
    let mut flipped = proof.clone();
    flipped[10] ^= 1;
    assert!(verify_window_post_partition(&request, &flipped).is_err());
    // Other randomness: refused (by filecoin-proofs' vanilla check or its verifier).
    let mut other = request.clone();
    other.randomness[0] ^= 1;
    let e = verify_window_post_partition(&other, &proof);
    assert!(
        matches!(
            e,
            Err(FilecoinError::VanillaRejected { .. }) | Err(FilecoinError::Rejected { .. })
        ),
        "{e:?}"
    );

    // A second proof reuses the compiled circuit and the loaded parameters.
    let again = prover
        .submit_window_post(
            &engine,
            window_request(inputs, Blinding::Random),
            Priority::High,
        )
        .unwrap()
        .wait()
        .unwrap();
    assert_ne!(again, proof);
    assert_eq!(prover.loaded().len(), 1);
}

#[test]
fn winning_post_of_a_2kib_sector_verifies_and_matches_bellperson() {
    param_dir();
    let kind = PostKind::new(WINNING).unwrap();
    assert_eq!(kind.default_priority(), Priority::Critical);
    let params = params(&kind);
    let inputs = winning_inputs();
    let rs = blinding(7);
    let request = winning_request(inputs, Blinding::Fixed(vec![rs]));

    let prover = FilecoinProver::new(ProverConfig::default());
    let engine = engine();
    let job = prover
        .submit_winning_post(&engine, request.clone(), Priority::Critical)
        .unwrap();
    assert_eq!(job.priority(), Priority::Critical);
    let proof = job.wait().unwrap();
    assert_eq!(proof.len(), 192);
    let reference = winning_post_with_bellperson(&request, &params, rs).unwrap();
    assert_eq!(
        proof, reference,
        "cuzk's WinningPoSt differs from bellperson's"
    );

    verify_winning_post_proof(&request, &proof).unwrap();
    let mut flipped = proof.clone();
    flipped[150] ^= 1;
    assert!(verify_winning_post_proof(&request, &flipped).is_err());
}

#[test]
fn bad_inputs_of_the_other_kinds_are_typed_errors() {
    param_dir();
    // No parameters are needed: every input is checked before any is loaded.
    let prover = FilecoinProver::new(ProverConfig::default());
    let engine = engine();
    let window = window_inputs();
    let snap = snap_inputs();

    // Wrong-length randomness and commitments.
    let mut r = window_request(window, Blinding::Random);
    r.randomness.pop();
    let e = prover.submit_window_post(&engine, r, Priority::High);
    assert!(
        matches!(
            e,
            Err(FilecoinError::InputLength {
                what: "randomness",
                expected: 32,
                actual: 31
            })
        ),
        "{e:?}"
    );
    let mut r = winning_request(winning_inputs(), Blinding::Random);
    r.randomness.push(0);
    let e = prover.submit_winning_post(&engine, r, Priority::Critical);
    assert!(
        matches!(e, Err(FilecoinError::InputLength { actual: 33, .. })),
        "{e:?}"
    );
    let mut s = snap.clone();
    s.comm_r_old.truncate(16);
    let e = prover.submit_snap(&engine, s, Priority::Normal);
    assert!(
        matches!(
            e,
            Err(FilecoinError::InputLength {
                what: "comm_r_old",
                actual: 16,
                ..
            })
        ),
        "{e:?}"
    );
    let mut s = snap.clone();
    s.comm_d_new = Vec::new();
    let e = prover.submit_snap(&engine, s, Priority::Normal);
    assert!(
        matches!(
            e,
            Err(FilecoinError::InputLength {
                what: "comm_d_new",
                ..
            })
        ),
        "{e:?}"
    );

    // Undecodable bincode.
    let mut r = window_request(window, Blinding::Random);
    r.vanilla_proofs[1] = b"not bincode of a vanilla proof".to_vec();
    let e = prover.submit_window_post(&engine, r, Priority::High);
    assert!(
        matches!(e, Err(FilecoinError::VanillaDecode { index: 1, .. })),
        "{e:?}"
    );
    let mut s = snap.clone();
    let half = s.vanilla_proofs[0].len() / 2;
    s.vanilla_proofs[0].truncate(half);
    let e = prover.submit_snap(&engine, s, Priority::Normal);
    assert!(
        matches!(e, Err(FilecoinError::VanillaDecode { index: 0, .. })),
        "{e:?}"
    );

    // A vanilla proof of another sector size (2 KiB and 8 MiB share the tree type,
    // so the bytes decode; their shape does not match).
    let mut r = window_request(window, Blinding::Random);
    r.proof = RegisteredPoStProof::StackedDrgWindow8MiBV1_2;
    let e = prover.submit_window_post(&engine, r, Priority::High);
    assert!(
        matches!(e, Err(FilecoinError::VanillaShape { .. })),
        "{e:?}"
    );
    // (8 MiB updates have 4 partitions: the count alone refuses one 2 KiB proof.)
    let mut s = snap.clone();
    s.proof = RegisteredUpdateProof::StackedDrg8MiBV1;
    let e = prover.submit_snap(&engine, s, Priority::Normal);
    assert!(
        matches!(e, Err(FilecoinError::VanillaCount { expected: 4, .. })),
        "{e:?}"
    );
    // And of another tree type (32 GiB's is 8-8-0): the bytes do not even decode.
    let mut r = window_request(window, Blinding::Random);
    r.proof = RegisteredPoStProof::StackedDrgWindow32GiBV1_2;
    let e = prover.submit_window_post(&engine, r, Priority::High);
    assert!(
        matches!(
            e,
            Err(FilecoinError::VanillaDecode { .. }) | Err(FilecoinError::VanillaShape { .. })
        ),
        "{e:?}"
    );

    // Counts: no vanilla proofs, or more sectors than a partition holds.
    let mut r = window_request(window, Blinding::Random);
    r.vanilla_proofs.clear();
    let e = prover.submit_window_post(&engine, r, Priority::High);
    assert!(
        matches!(e, Err(FilecoinError::VanillaCount { actual: 0, .. })),
        "{e:?}"
    );
    let mut s = snap.clone();
    s.vanilla_proofs.push(s.vanilla_proofs[0].clone());
    let e = prover.submit_snap(&engine, s, Priority::Normal);
    assert!(
        matches!(e, Err(FilecoinError::VanillaCount { actual: 2, .. })),
        "{e:?}"
    );

    // A partition index out of range.
    let mut r = window_request(window, Blinding::Random);
    r.partition_index = MAX_PARTITIONS_PER_DEADLINE;
    let e = prover.submit_window_post(&engine, r, Priority::High);
    assert!(
        matches!(
            e,
            Err(FilecoinError::PartitionIndex {
                index: MAX_PARTITIONS_PER_DEADLINE,
                ..
            })
        ),
        "{e:?}"
    );

    // A WinningPoSt type for a WindowPoSt request and the other way round.
    let mut r = window_request(window, Blinding::Random);
    r.proof = WINNING;
    assert!(matches!(
        prover.submit_window_post(&engine, r, Priority::High),
        Err(FilecoinError::Unsupported { .. })
    ));

    // Registered-proof numbers as Filecoin's Go enum gives them.
    assert_eq!(parse_post_proof("0").unwrap(), WINNING);
    assert_eq!(parse_post_proof("10").unwrap(), WINDOW);
    assert_eq!(
        parse_post_proof("StackedDrgWindow2KiBV1_1").unwrap(),
        WINDOW
    );
    assert_eq!(
        parse_post_proof("13").unwrap(),
        RegisteredPoStProof::StackedDrgWindow32GiBV1_2
    );
    assert_eq!(
        parse_post_proof("8").unwrap(),
        RegisteredPoStProof::StackedDrgWindow32GiBV1
    );
    assert!(matches!(
        parse_post_proof("15"),
        Err(FilecoinError::Unsupported { .. })
    ));
    assert_eq!(
        parse_update_proof("3").unwrap(),
        RegisteredUpdateProof::StackedDrg32GiBV1
    );
    assert!(parse_update_proof("5").is_err());

    // Every kind's parameter file is named by its own circuit (never the PoRep's).
    let update = UpdateKind::new(RegisteredUpdateProof::StackedDrg32GiBV1).unwrap();
    assert!(
        update.cache_id.starts_with("empty-sector-update-"),
        "{}",
        update.cache_id
    );
    assert_eq!(update.partitions(), 16);
    let post = PostKind::new(RegisteredPoStProof::StackedDrgWinning32GiBV1).unwrap();
    assert!(
        post.cache_id.starts_with("proof-of-spacetime-fallback-"),
        "{}",
        post.cache_id
    );
}
