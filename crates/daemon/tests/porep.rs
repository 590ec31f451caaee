//! A real 2 KiB sector, sealed here by filecoin-proofs, its C2 proven through the
//! daemon (`Prove`, and `SubmitProof` + `AwaitProof`) by the Filecoin kind and
//! checked with filecoin-proofs' `verify_seal`; a wrong sector number fails it; bad
//! envelopes are INVALID_ARGUMENT. Parameters are generated once per build
//! directory (shared with cuzk-filecoin's tests), never downloaded.

mod common;

use std::{
    path::{Path, PathBuf},
    sync::{Arc, OnceLock},
};

use common::{start, Opts};
use cuzk_daemon::wire as pb;
use cuzk_filecoin::{
    ensure_params, parse_c1, prover_id_from_miner, seal_test_sector, service_kind::PorepService,
    verify_proof, Envelope, FilecoinProver, PorepKind, ProverConfig, RegisteredSealProof,
};
use tonic::Code;

const PROOF: RegisteredSealProof = RegisteredSealProof::StackedDrg2KiBV1_1;
const MINER: u64 = 1000;
const SECTOR: u64 = 7;

/// Set as FIL_PROOFS_PARAMETER_CACHE before filecoin-proofs reads its settings.
fn param_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("filecoin-params");
        std::env::set_var(cuzk_filecoin::PARAMETER_CACHE_VAR, &dir);
        ensure_params(&PorepKind::new(PROOF).unwrap(), &dir, 2026).unwrap();
        dir
    })
}

fn envelope() -> Vec<u8> {
    let work = tempfile::tempdir().unwrap();
    let s = seal_test_sector(PROOF, prover_id_from_miner(MINER), SECTOR, 11, work.path()).unwrap();
    serde_json::to_vec(&Envelope::wrap(&s.c1_json, SECTOR, 2048)).unwrap()
}

fn porep(envelope: &[u8]) -> pb::SubmitProofRequest {
    pb::SubmitProofRequest {
        proof_kind: pb::ProofKind::PorepSealCommit as i32,
        vanilla_proof: envelope.to_vec(),
        miner_id: MINER,
        sector_number: SECTOR,
        sector_size: 2048,
        ..Default::default()
    }
}

fn check(envelope: &[u8], proof: &[u8]) {
    let input = parse_c1(envelope).unwrap();
    let prover_id = prover_id_from_miner(MINER);
    verify_proof(&input, prover_id, Some(SECTOR), proof, param_dir()).unwrap();
    assert!(
        verify_proof(&input, prover_id, Some(SECTOR + 1), proof, param_dir()).is_err(),
        "the proof verifies for another sector"
    );
}

#[test]
fn a_2kib_sector_through_prove_and_submit_await_verifies_with_filecoin_proofs() {
    let dir = param_dir();
    let prover = Arc::new(FilecoinProver::new(ProverConfig {
        parameter_dir: dir.to_path_buf(),
        verify: true,
        check_digest: false,
    }));
    let d = start(Opts {
        unix: true,
        kinds: vec![Arc::new(PorepService::new(prover))],
        // A 2 KiB partition with its 1.1 GB of parameters needs about 2.2 GB.
        memory_budget: Some(8 << 30),
        ..Opts::default()
    });
    let env = envelope();
    let mut c = d.client();
    let r =
        d.rt.block_on(c.prove(pb::ProveRequest {
            submit: Some(porep(&env)),
        }))
        .unwrap()
        .into_inner()
        .result
        .unwrap();
    assert_eq!(
        r.status,
        pb::await_proof_response::Status::Completed as i32,
        "{r:?}"
    );
    check(&env, &r.proof);

    let id =
        d.rt.block_on(c.submit_proof(porep(&env)))
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
    assert_eq!(
        r.status,
        pb::await_proof_response::Status::Completed as i32,
        "{r:?}"
    );
    check(&env, &r.proof);

    // The parameters were loaded once and are shown under Curio's circuit id.
    let st = d.wait_idle();
    let p = st
        .loaded_srs
        .iter()
        .find(|p| p.circuit_id == "porep-2k")
        .expect("porep-2k resident");
    assert!(p.size_bytes > 0);
    assert_eq!(d.metric("cuzk_srs_load_seconds_count"), 2.0);

    // Bad envelopes: not JSON, JSON without Phase1Out, a C1 of garbage.
    for bad in [
        b"not json".to_vec(),
        br#"{"SectorNum":7,"SectorSize":2048}"#.to_vec(),
        br#"{"SectorNum":7,"Phase1Out":"AAAA","SectorSize":2048}"#.to_vec(),
    ] {
        let e = d.rt.block_on(c.submit_proof(porep(&bad))).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    }
    // A sector number that contradicts the envelope's.
    let mut wrong = porep(&env);
    wrong.sector_number = SECTOR + 5;
    let e = d.rt.block_on(c.submit_proof(wrong)).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    // Evicting frees the parameters (nothing uses them now): the service's set
    // and the Filecoin prover's cache, so the next proof loads them again.
    let evict = |c: &mut cuzk_daemon::client::Client| {
        d.rt.block_on(c.evict_srs(pb::EvictSrsRequest {
            circuit_id: "porep-2k".into(),
        }))
    };
    let e = evict(&mut c).unwrap().into_inner();
    assert!(e.was_loaded && e.freed_bytes == p.size_bytes, "{e:?}");
    let st = d.wait_idle();
    assert!(st.loaded_srs.iter().all(|p| p.circuit_id != "porep-2k"));
    let e = evict(&mut c).unwrap().into_inner();
    assert!(!e.was_loaded && e.freed_bytes == 0, "{e:?}");

    // A proof after the eviction reloads them and verifies; while it holds them
    // (its partition held in the gated backend), eviction is refused.
    d.gate.close();
    let mut req = porep(&env);
    req.request_id = "after-evict".into();
    d.rt.block_on(c.submit_proof(req)).unwrap();
    d.wait_status("porep-2k reloaded and in use", |s| {
        s.loaded_srs
            .iter()
            .any(|p| p.circuit_id == "porep-2k" && p.ref_count == 1)
    });
    let e = evict(&mut c).unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    assert!(e.message().contains("in use"), "{e:?}");
    d.gate.open();
    let r =
        d.rt.block_on(c.await_proof(pb::AwaitProofRequest {
            job_id: "after-evict".into(),
            timeout_ms: 0,
        }))
        .unwrap()
        .into_inner();
    assert_eq!(
        r.status,
        pb::await_proof_response::Status::Completed as i32,
        "{r:?}"
    );
    check(&env, &r.proof);
    assert_eq!(d.metric("cuzk_srs_load_seconds_count"), 3.0);
    d.wait_idle();
    let e = evict(&mut c).unwrap().into_inner();
    assert!(e.was_loaded && e.freed_bytes == p.size_bytes, "{e:?}");
}
