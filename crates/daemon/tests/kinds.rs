//! SnapDeals, WindowPoSt and WinningPoSt through the daemon at 2 KiB: vanilla proofs
//! made here by filecoin-proofs (a sector sealed, then updated or challenged), each
//! kind proven through `Prove` as Curio sends it (the Go enum's registered-proof
//! number, bincode vanilla proofs, raw 32-byte values), the bytes checked with
//! filecoin-proofs' verifiers; the parameters resident under Curio's circuit ids;
//! malformed requests (wrong lengths, undecodable bincode, a proof type of the other
//! kind, a partition index out of range) INVALID_ARGUMENT, and the daemon keeps
//! serving. Parameters are generated once per build directory (shared with
//! cuzk-filecoin's tests), never downloaded.

mod common;

use std::{
    path::{Path, PathBuf},
    sync::{Arc, OnceLock},
};

use common::{start, Opts};
use cuzk_daemon::wire as pb;
use cuzk_filecoin::{
    ensure_params, post_test_inputs, prover_id_from_miner, service_kinds::KindService,
    snap_test_inputs, verify_snap_proof, verify_window_post_partition, verify_winning_post_proof,
    Blinding, FilecoinProver, PostKind, ProverConfig, RegisteredPoStProof, RegisteredUpdateProof,
    UpdateKind, WindowPostRequest, WinningPostRequest,
};
use tonic::Code;

const MINER: u64 = 1000;
/// Go's numbers: update 2 KiB V1 = 0, Window 2 KiB V1_1 (filecoin-proofs' V1_2) = 10,
/// Winning 2 KiB = 0.
const SNAP_2K: u64 = 0;
const WINDOW_2K: u64 = 10;
const WINNING_2K: u64 = 0;

/// Set as FIL_PROOFS_PARAMETER_CACHE before filecoin-proofs reads its settings.
fn param_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("filecoin-params");
        std::env::set_var(cuzk_filecoin::PARAMETER_CACHE_VAR, &dir);
        let update = UpdateKind::new(RegisteredUpdateProof::StackedDrg2KiBV1).unwrap();
        ensure_params(&update, &dir, 2026).unwrap();
        for p in [
            RegisteredPoStProof::StackedDrgWindow2KiBV1_2,
            RegisteredPoStProof::StackedDrgWinning2KiBV1,
        ] {
            ensure_params(&PostKind::new(p).unwrap(), &dir, 2026).unwrap();
        }
        dir
    })
}

fn completed(r: &pb::AwaitProofResponse) {
    assert_eq!(
        r.status,
        pb::await_proof_response::Status::Completed as i32,
        "{r:?}"
    );
}

#[test]
fn each_kind_through_prove_verifies_with_filecoin_proofs_and_bad_requests_are_refused() {
    let dir = param_dir();
    let prover = Arc::new(FilecoinProver::new(ProverConfig {
        parameter_dir: dir.to_path_buf(),
        verify: true,
        check_digest: false,
    }));
    let d = start(Opts {
        unix: true,
        kinds: KindService::all(&prover),
        memory_budget: Some(8 << 30),
        ..Opts::default()
    });
    let work = tempfile::tempdir().unwrap();
    let snap = snap_test_inputs(
        RegisteredUpdateProof::StackedDrg2KiBV1,
        MINER,
        1,
        &work.path().join("snap"),
    )
    .unwrap();
    let window = post_test_inputs(
        RegisteredPoStProof::StackedDrgWindow2KiBV1_2,
        MINER,
        2,
        2,
        &work.path().join("window"),
    )
    .unwrap();
    let winning = post_test_inputs(
        RegisteredPoStProof::StackedDrgWinning2KiBV1,
        MINER,
        1,
        3,
        &work.path().join("winning"),
    )
    .unwrap();

    let snap_req = pb::SubmitProofRequest {
        proof_kind: pb::ProofKind::SnapDealsUpdate as i32,
        registered_proof: SNAP_2K,
        sector_size: 2048,
        vanilla_proofs: snap.vanilla_proofs.clone(),
        comm_r_old: snap.comm_r_old.clone(),
        comm_r_new: snap.comm_r_new.clone(),
        comm_d_new: snap.comm_d_new.clone(),
        ..Default::default()
    };
    let window_req = pb::SubmitProofRequest {
        proof_kind: pb::ProofKind::WindowPostPartition as i32,
        registered_proof: WINDOW_2K,
        vanilla_proofs: window.vanilla_proofs.clone(),
        randomness: window.randomness.to_vec(),
        miner_id: MINER,
        partition_index: 0,
        ..Default::default()
    };
    let winning_req = pb::SubmitProofRequest {
        proof_kind: pb::ProofKind::WinningPost as i32,
        registered_proof: WINNING_2K,
        vanilla_proofs: winning.vanilla_proofs.clone(),
        randomness: winning.randomness.to_vec(),
        miner_id: MINER,
        ..Default::default()
    };

    let mut c = d.client();
    let prove = |c: &mut cuzk_daemon::client::Client, r: &pb::SubmitProofRequest| {
        d.rt.block_on(c.prove(pb::ProveRequest {
            submit: Some(r.clone()),
        }))
        .unwrap()
        .into_inner()
        .result
        .unwrap()
    };

    let r = prove(&mut c, &snap_req);
    completed(&r);
    assert_eq!(r.proof.len(), 192);
    verify_snap_proof(&snap, &r.proof).unwrap();

    let window_request = WindowPostRequest {
        proof: window.proof,
        randomness: window.randomness.to_vec(),
        prover_id: prover_id_from_miner(MINER),
        partition_index: 0,
        vanilla_proofs: window.vanilla_proofs.clone(),
        blinding: Blinding::Random,
    };
    let r = prove(&mut c, &window_req);
    completed(&r);
    verify_window_post_partition(&window_request, &r.proof).unwrap();
    // Checked against other randomness, the proof is refused.
    let mut other = window_request.clone();
    other.randomness[0] ^= 1;
    assert!(verify_window_post_partition(&other, &r.proof).is_err());

    // WinningPoSt through SubmitProof + AwaitProof.
    let id =
        d.rt.block_on(c.submit_proof(winning_req.clone()))
            .unwrap()
            .into_inner()
            .job_id;
    let r =
        d.rt.block_on(c.await_proof(pb::AwaitProofRequest {
            job_id: id,
            timeout_ms: 0,
        }))
        .unwrap()
        .into_inner();
    completed(&r);
    let winning_request = WinningPostRequest {
        proof: winning.proof,
        randomness: winning.randomness.to_vec(),
        prover_id: prover_id_from_miner(MINER),
        vanilla_proofs: winning.vanilla_proofs.clone(),
        blinding: Blinding::Random,
    };
    verify_winning_post_proof(&winning_request, &r.proof).unwrap();

    // Each kind's parameters are resident under Curio's circuit id.
    let st = d.wait_idle();
    for id in ["snap-2k", "wpost-2k", "winning-2k"] {
        let p = st
            .loaded_srs
            .iter()
            .find(|p| p.circuit_id == id)
            .unwrap_or_else(|| panic!("{id} not resident: {:?}", st.loaded_srs));
        assert!(p.size_bytes > 0, "{p:?}");
    }

    // Malformed requests: INVALID_ARGUMENT with a message that names the fault.
    let refused = |c: &mut cuzk_daemon::client::Client, r: pb::SubmitProofRequest, says: &str| {
        let e = d.rt.block_on(c.submit_proof(r)).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
        assert!(e.message().contains(says), "{says}: {}", e.message());
    };
    let mut r = winning_req.clone();
    r.randomness.pop();
    refused(&mut c, r, "randomness must be 32 bytes");
    let mut r = window_req.clone();
    r.randomness.push(0);
    refused(&mut c, r, "randomness must be 32 bytes");
    let mut r = snap_req.clone();
    r.comm_d_new = vec![1; 31];
    refused(&mut c, r, "comm_d_new must be 32 bytes");
    let mut r = snap_req.clone();
    r.vanilla_proofs[0] = b"random bytes, not bincode".to_vec();
    refused(&mut c, r, "does not decode");
    let mut r = window_req.clone();
    r.vanilla_proofs[1].truncate(40);
    refused(&mut c, r, "does not decode");
    let mut r = winning_req.clone();
    r.vanilla_proofs = vec![vec![0xff; 100]];
    refused(&mut c, r, "does not decode");
    let mut r = window_req.clone();
    r.registered_proof = WINNING_2K;
    refused(&mut c, r, "not a WindowPoSt proof type");
    let mut r = winning_req.clone();
    r.registered_proof = 99;
    refused(&mut c, r, "not a registered PoSt proof");
    let mut r = window_req.clone();
    r.partition_index = 3000;
    refused(&mut c, r, "out of range");
    let mut r = snap_req.clone();
    r.sector_size = 8 << 20;
    refused(&mut c, r, "contradicts");
    let mut r = snap_req.clone();
    r.vanilla_proofs.push(r.vanilla_proofs[0].clone());
    refused(&mut c, r, "vanilla proofs");

    // Still serving: the WinningPoSt again, through Prove.
    let r = prove(&mut c, &winning_req);
    completed(&r);
    verify_winning_post_proof(&winning_request, &r.proof).unwrap();

    // Evict and preload by circuit id.
    let e =
        d.rt.block_on(c.evict_srs(pb::EvictSrsRequest {
            circuit_id: "winning-2k".into(),
        }))
        .unwrap()
        .into_inner();
    assert!(e.was_loaded && e.freed_bytes > 0, "{e:?}");
    let p =
        d.rt.block_on(c.preload_srs(pb::PreloadSrsRequest {
            circuit_id: "winning-2k".into(),
        }))
        .unwrap()
        .into_inner();
    assert!(!p.already_loaded, "{p:?}");
}
