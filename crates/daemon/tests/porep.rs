//! A real 2 KiB sector, sealed here by filecoin-proofs, its C2 proven through the
//! daemon (`Prove`, and `SubmitProof` + `AwaitProof`) by the Filecoin kind and
//! checked with filecoin-proofs' `verify_seal`; a wrong sector number fails it; bad
//! envelopes are INVALID_ARGUMENT. cuzk's own kinds on a daemon serving every
//! Filecoin kind: a non-interactive 2 KiB sector's C2 (`NI_POREP_SEAL_COMMIT`,
//! 1000) verified by `verify_seal`, and a SnarkPack aggregate of two interactive
//! sectors' C2 outputs (`SEAL_AGGREGATE`, 1001) equal to filecoin-proofs'
//! `aggregate_seal_commit_proofs` byte for byte; hostile requests of both kinds
//! refused, an aggregation cancelled, and the daemon serving on. Parameters and
//! SnarkPack's SRS are generated once per build directory (shared with
//! cuzk-filecoin's tests), never downloaded.

mod common;

use std::{
    path::{Path, PathBuf},
    sync::{Arc, OnceLock},
};

use common::{start, Opts};
use cuzk_daemon::wire as pb;
use cuzk_filecoin::{
    aggregate::{ensure_srs, srs_file, verify_aggregate},
    check_aggregate_request, ensure_params, parse_c1, prover_id_from_miner,
    reference::filecoin_proofs_aggregate,
    seal_test_sector,
    service_kind::{PorepService, ServiceProvers},
    verify_proof, AggregateRequest, AggregateSector, Envelope, FilecoinProver, PorepKind,
    ProverConfig, RegisteredAggregationProof, RegisteredSealProof,
};
use tonic::Code;

const PROOF: RegisteredSealProof = RegisteredSealProof::StackedDrg2KiBV1_1;
const NI: RegisteredSealProof = RegisteredSealProof::StackedDrg2KiBV1_2_Feat_NonInteractivePoRep;
const MINER: u64 = 1000;
const SECTOR: u64 = 7;

/// Set as FIL_PROOFS_PARAMETER_CACHE before filecoin-proofs reads its settings.
fn param_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("filecoin-params");
        std::env::set_var(cuzk_filecoin::PARAMETER_CACHE_VAR, &dir);
        ensure_params(&PorepKind::new(PROOF).unwrap(), &dir, 2026).unwrap();
        // The seed and size cuzk-filecoin's tests use: the same file.
        ensure_srs(&dir, 2027, 64).unwrap();
        dir
    })
}

fn envelope() -> Vec<u8> {
    sealed(PROOF, SECTOR, 11)
}

/// A 2 KiB sector of `proof` sealed here, its C1 output in Curio's envelope.
fn sealed(proof: RegisteredSealProof, sector: u64, seed: u64) -> Vec<u8> {
    param_dir();
    let work = tempfile::tempdir().unwrap();
    let s = seal_test_sector(
        proof,
        prover_id_from_miner(MINER),
        sector,
        seed,
        work.path(),
    )
    .unwrap();
    serde_json::to_vec(&Envelope::wrap(&s.c1_json, sector, 2048)).unwrap()
}

fn request(kind: pb::ProofKind, vanilla_proof: &[u8], sector: u64) -> pb::SubmitProofRequest {
    pb::SubmitProofRequest {
        proof_kind: kind as i32,
        vanilla_proof: vanilla_proof.to_vec(),
        miner_id: MINER,
        sector_number: sector,
        ..Default::default()
    }
}

fn completed(r: &pb::AwaitProofResponse) {
    assert_eq!(
        r.status,
        pb::await_proof_response::Status::Completed as i32,
        "{r:?}"
    );
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

/// cuzk's kinds 1000 and 1001 through a daemon serving every Filecoin kind (as
/// `cuzk serve` registers them): an NI-PoRep C2 that filecoin-proofs verifies; an
/// aggregate of two interactive sectors' C2 outputs (proved by the same daemon)
/// equal to filecoin-proofs' own; hostile requests of both kinds refused with
/// their codes, an aggregation cancelled without leaking its slot, and the daemon
/// serving a normal job after all of it.
#[test]
fn ni_porep_and_aggregation_are_kinds_of_their_own_through_the_daemon() {
    let dir = param_dir();
    let prover = Arc::new(FilecoinProver::new(ProverConfig {
        parameter_dir: dir.to_path_buf(),
        verify: true,
        check_digest: false,
    }));
    let d = start(Opts {
        kinds: ServiceProvers::new(prover).kinds(),
        memory_budget: Some(8 << 30),
        ..Opts::default()
    });
    let mut c = d.client();
    let code = |c: &mut cuzk_daemon::client::Client, r: pb::SubmitProofRequest| {
        let e = d.rt.block_on(c.submit_proof(r)).unwrap_err();
        (e.code(), e.message().to_owned())
    };
    let t = std::time::Instant::now();
    let ni = sealed(NI, 9, 31);
    let interactive = [sealed(PROOF, 21, 40), sealed(PROOF, 22, 41)];
    eprintln!(
        "three 2 KiB sectors sealed in {:.1} s",
        t.elapsed().as_secs_f64()
    );

    // Each PoRep kind refuses the other's registered proofs, naming the kind to use.
    let (k, m) = code(&mut c, request(pb::ProofKind::PorepSealCommit, &ni, 9));
    assert_eq!(k, Code::InvalidArgument, "{m}");
    assert!(
        m.contains("NI_POREP_SEAL_COMMIT") && m.contains("1000"),
        "{m}"
    );
    let (k, m) = code(
        &mut c,
        request(pb::ProofKind::NiPorepSealCommit, &interactive[0], 21),
    );
    assert_eq!(k, Code::InvalidArgument, "{m}");
    assert!(m.contains("POREP_SEAL_COMMIT (proof kind 1)"), "{m}");

    // The NI sector's C2: 13 partitions and their aggregate, verified by verify_seal.
    let t = std::time::Instant::now();
    let r =
        d.rt.block_on(c.prove(pb::ProveRequest {
            submit: Some(request(pb::ProofKind::NiPorepSealCommit, &ni, 9)),
        }))
        .unwrap()
        .into_inner()
        .result
        .unwrap();
    completed(&r);
    eprintln!(
        "NI-PoRep 2 KiB C2 through the daemon: {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let input = parse_c1(&ni).unwrap();
    let me = prover_id_from_miner(MINER);
    verify_proof(&input, me, Some(9), &r.proof, dir).unwrap();
    assert!(verify_proof(&input, me, Some(10), &r.proof, dir).is_err());

    // Two interactive C2 outputs, then their aggregate request as `cuzk aggregate
    // request` writes it (pretty JSON).
    let ids: Vec<String> = interactive
        .iter()
        .zip([21, 22])
        .map(|(env, sector)| {
            d.rt.block_on(c.submit_proof(request(pb::ProofKind::PorepSealCommit, env, sector)))
                .unwrap()
                .into_inner()
                .job_id
        })
        .collect();
    let sectors: Vec<AggregateSector> = ids
        .iter()
        .zip(&interactive)
        .map(|(id, env)| {
            let r =
                d.rt.block_on(c.await_proof(pb::AwaitProofRequest {
                    job_id: id.clone(),
                    timeout_ms: 0,
                }))
                .unwrap()
                .into_inner();
            completed(&r);
            AggregateSector::from_c1(&parse_c1(env).unwrap(), None, r.proof).unwrap()
        })
        .collect();
    let req = AggregateRequest {
        prover_id: MINER.to_string(),
        aggregation: RegisteredAggregationProof::SnarkPackV2,
        sectors: sectors.clone(),
    };
    let json = serde_json::to_vec_pretty(&req).unwrap();
    let aggregate = |c: &mut cuzk_daemon::client::Client, r: pb::SubmitProofRequest| {
        d.rt.block_on(c.prove(pb::ProveRequest { submit: Some(r) }))
            .unwrap()
            .into_inner()
            .result
            .unwrap()
    };
    // Curio's registered_proof numbering (Go's: StackedDrg2KiBV1_1 is 5), the
    // size and the miner may be given; they must agree with the request.
    let agg_request = |json: &[u8]| pb::SubmitProofRequest {
        registered_proof: 5,
        sector_size: 2048,
        ..request(pb::ProofKind::SealAggregate, json, 0)
    };
    let t = std::time::Instant::now();
    let r = aggregate(&mut c, agg_request(&json));
    completed(&r);
    eprintln!(
        "aggregate of two sectors through the daemon: {:.2} s",
        t.elapsed().as_secs_f64()
    );
    let comm_rs: Vec<_> = sectors.iter().map(|s| s.comm_r).collect();
    let seeds: Vec<_> = sectors.iter().map(|s| s.seed).collect();
    let proofs: Vec<_> = sectors.iter().map(|s| s.proof.clone()).collect();
    let theirs = filecoin_proofs_aggregate(
        PROOF,
        RegisteredAggregationProof::SnarkPackV2,
        &comm_rs,
        &seeds,
        &proofs,
    )
    .unwrap();
    assert_eq!(
        r.proof, theirs,
        "the daemon's aggregate differs from filecoin-proofs'"
    );
    let checked = check_aggregate_request(req.clone()).unwrap();
    verify_aggregate(&checked, &r.proof).unwrap();
    let mut swapped = checked.clone();
    swapped.sectors.swap(0, 1);
    assert!(verify_aggregate(&swapped, &r.proof).is_err());
    // The SRS is the kind's parameter set, counted as 0 bytes (filecoin-proofs
    // keeps what it reads of it).
    let st = d.wait_idle();
    let srs = st
        .loaded_srs
        .iter()
        .find(|p| p.circuit_id == srs_file())
        .expect("the SRS listed");
    assert_eq!(srs.size_bytes, 0);

    // Hostile aggregation requests: never queued, never a panic.
    for (bad, want) in [
        (b"not json".to_vec(), "aggregate request"),
        (json[..json.len() / 2].to_vec(), "aggregate request"),
        (Vec::new(), "aggregate request"),
        (
            b"{\"prover_id\":\"1000\",\"sectors\":[]}".to_vec(),
            "nothing to aggregate",
        ),
    ] {
        let (k, m) = code(&mut c, request(pb::ProofKind::SealAggregate, &bad, 0));
        assert_eq!(k, Code::InvalidArgument, "{m}");
        assert!(m.contains(want), "{want}: {m}");
    }
    // The NI registered proof's number (15) for an interactive request; a size
    // and a miner that are not the request's.
    for (r, want) in [
        (
            pb::SubmitProofRequest {
                registered_proof: 15,
                ..agg_request(&json)
            },
            "registered_proof 15 contradicts",
        ),
        (
            pb::SubmitProofRequest {
                sector_size: 1 << 35,
                ..agg_request(&json)
            },
            "sector_size",
        ),
        (
            pb::SubmitProofRequest {
                miner_id: MINER + 1,
                ..agg_request(&json)
            },
            "miner_id",
        ),
    ] {
        let (k, m) = code(&mut c, r);
        assert_eq!(k, Code::InvalidArgument, "{m}");
        assert!(m.contains(want), "{want}: {m}");
    }
    // Over the kind's 8 MiB.
    let mut big = json.clone();
    big.resize((8 << 20) + 1, b' ');
    let (k, m) = code(&mut c, request(pb::ProofKind::SealAggregate, &big, 0));
    assert_eq!(k, Code::ResourceExhausted, "{m}");
    assert!(m.contains("SEAL_AGGREGATE"), "{m}");

    // An aggregation cancelled at once (queued, loading or aggregating: it cannot
    // be interrupted, so it may finish and be discarded) ends cancelled and gives
    // its slot back.
    let id =
        d.rt.block_on(c.submit_proof(agg_request(&json)))
            .unwrap()
            .into_inner()
            .job_id;
    d.rt.block_on(c.cancel_proof(pb::CancelProofRequest { job_id: id.clone() }))
        .unwrap();
    let r =
        d.rt.block_on(c.await_proof(pb::AwaitProofRequest {
            job_id: id,
            timeout_ms: 0,
        }))
        .unwrap()
        .into_inner();
    assert_eq!(
        r.status,
        pb::await_proof_response::Status::Cancelled as i32,
        "{r:?}"
    );
    assert!(r.proof.is_empty());
    d.wait_idle();

    // And the daemon still serves: the same aggregate again, the same bytes.
    let r = aggregate(&mut c, agg_request(&json));
    completed(&r);
    assert_eq!(r.proof, theirs);
    assert_eq!(
        d.metric(r#"cuzk_proofs_completed_by_kind_total{kind="SEAL_AGGREGATE"}"#),
        2.0
    );
    d.wait_idle();
}
