//! Non-interactive PoRep and aggregation on real 2 KiB sectors sealed here by
//! filecoin-proofs. An NI-PoRep sector's C2 (13 partitions through cuzk's engine,
//! then filecoin-proofs' SnarkPack aggregate) is verified by filecoin-proofs and is
//! byte-identical to filecoin-proofs' aggregate of bellperson's partition proofs at
//! the same `r, s`; three interactive sectors' C2 outputs aggregate into what
//! filecoin-proofs' `aggregate_seal_commit_proofs` makes of them, byte for byte; bad
//! inputs are typed errors. A timing-only prover streams a shape-only NI-PoRep sector
//! through the engine and aggregates it with an SRS of its own, made in memory, that
//! never lands in the parameter cache.
//!
//! Parameters are generated once per build directory (`target/tmp/filecoin-params`,
//! shared with `c2.rs` and the CLI's tests: NI-PoRep proves the interactive circuit,
//! so the files are the same), and so is SnarkPack's SRS (bellperson's
//! `setup_fake_srs`, as filecoin-proofs' tests make it); nothing is downloaded.

mod common;

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use blstrs::Scalar;
use common::{engine, engine_with, param_dir, seal, MINER};
use cuzk_filecoin::aggregate::{aggregate, check_srs, ensure_srs, srs_file, verify_aggregate};
use cuzk_filecoin::reference::{filecoin_proofs_aggregate, prove_with_bellperson};
use cuzk_filecoin::{
    check_aggregate_request, parse_c1, prover_id_from_miner, verify_proof, AggregateRequest,
    AggregateSector, Blinding, FilecoinError, FilecoinProver, PorepKind, PorepRequest, Priority,
    ProverConfig, RegisteredAggregationProof, RegisteredSealProof, SealedSector,
};
use cuzk_gpu_backend::{BackendError, Capabilities, GpuBackend, PartitionJob, PartitionResult};
use ff::Field;
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;

const NI: RegisteredSealProof = RegisteredSealProof::StackedDrg2KiBV1_2_Feat_NonInteractivePoRep;
const POREP: RegisteredSealProof = RegisteredSealProof::StackedDrg2KiBV1_1;

/// The 2 KiB parameters (the same files as `c2.rs`'s: NI-PoRep proves the interactive
/// circuit) and the SRS.
fn params_path() -> &'static Path {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        let p = common::params(&PorepKind::new(POREP).unwrap());
        let t = Instant::now();
        ensure_srs(param_dir(), 2027, 64).unwrap();
        eprintln!("SRS ready in {:.1} s", t.elapsed().as_secs_f64());
        p
    })
}

/// A backend that answers every partition with fixed sums (the generators) at once:
/// timing-only proofs verify with no backend, so the test of what happens after the
/// engine (the aggregation) does not wait minutes for the MSMs of 13 partitions.
struct FixedSums;

impl GpuBackend for FixedSums {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            name: "fixed-sums (test)".into(),
            max_log_domain: 30,
            g2: true,
            g2_preferred: true,
            devices: Vec::new(),
        }
    }
    fn prove_partition(&self, job: PartitionJob<'_>) -> Result<PartitionResult, BackendError> {
        use group::Group;
        let g1 = blstrs::G1Projective::generator();
        Ok(PartitionResult {
            h: g1,
            l: g1.double(),
            a: g1 + g1.double(),
            b_g1: g1.double().double(),
            b_g2: job.b_g2.map(|_| blstrs::G2Projective::generator()),
        })
    }
}

/// A shape-only NI-PoRep sector (random vanilla proofs, 13 partitions) through a
/// timing-only prover: the partitions go through the engine, the aggregate is made with
/// the prover's own SRS (none in the parameter directory, which stays empty: nothing
/// is ever written under the official name), of SnarkPack's format over 16 proofs, and
/// nothing is marked verified. The SRS is made once for the prover.
#[test]
fn timing_only_ni_porep_aggregates_without_an_srs_file() {
    param_dir();
    let shape = cuzk_filecoin::shape_only_c1(NI, 3).unwrap();
    let input = parse_c1(&serde_json::to_vec(&shape).unwrap()).unwrap();
    let empty = tempfile::tempdir().unwrap();
    assert!(matches!(
        check_srs(empty.path()),
        Err(FilecoinError::SrsMissing { .. })
    ));
    let prover = FilecoinProver::timing_only(
        ProverConfig {
            parameter_dir: empty.path().to_path_buf(),
            verify: false,
            check_digest: false,
        },
        7,
    );
    let engine = engine_with(Arc::new(FixedSums));
    let t = Instant::now();
    let jobs: Vec<_> = (0..2)
        .map(|i| {
            prover
                .submit_porep(
                    &engine,
                    PorepRequest {
                        input: input.clone(),
                        prover_id: prover_id_from_miner(MINER),
                        sector: Some(40 + i),
                        blinding: Blinding::Random,
                    },
                    Priority::Normal,
                )
                .unwrap()
        })
        .collect();
    for job in jobs {
        let out = job.wait_output().unwrap();
        assert!(!out.verified && out.timing_only_aggregate);
        assert!(out.aggregate_time.is_some());
        assert_eq!(out.partition_proofs.as_ref().map(Vec::len), Some(13 * 192));
        let aggregate =
            bellperson::groth16::aggregate::AggregateProof::<blstrs::Bls12>::read(&out.proof[..])
                .unwrap();
        assert_eq!(aggregate.tmipp.gipa.nproofs, 16);
        // SnarkPack's size grows with the log of the count (its GT commitments, 576
        // bytes each, dominate): 14,164 bytes for 16 proofs, written once, nothing
        // after it. The slow test above checks that it is exactly the length of
        // filecoin-proofs' aggregate of the same 13 partitions.
        assert!(
            (12_000..16_000).contains(&out.proof.len()),
            "{} bytes",
            out.proof.len()
        );
        let mut again = Vec::new();
        aggregate.write(&mut again).unwrap();
        assert_eq!(again, out.proof);
    }
    eprintln!(
        "two timing-only NI-PoRep 2 KiB sectors (fixed-sum backend): {:.2} s",
        t.elapsed().as_secs_f64()
    );
    let srs = prover.timing_only_srs(13);
    assert!(Arc::ptr_eq(&srs, &prover.timing_only_srs(13)), "made once");
    assert_eq!(srs.max_proofs(), 16);
    assert!(
        std::fs::read_dir(empty.path()).unwrap().next().is_none(),
        "a timing-only prover wrote into its parameter directory"
    );
}

fn request(s: &SealedSector, blinding: Blinding) -> PorepRequest {
    PorepRequest {
        input: parse_c1(&s.c1_json).unwrap(),
        prover_id: prover_id_from_miner(MINER),
        sector: Some(s.sector),
        blinding,
    }
}

#[test]
fn ni_porep_c2_verifies_and_matches_filecoin_proofs() {
    let params = params_path();
    let dir = param_dir();
    let kind = PorepKind::new(NI).unwrap();
    assert!(kind.is_non_interactive());
    assert_eq!(kind.partitions(), 13);
    // The interactive circuit, more partitions of it.
    assert_eq!(kind.cache_id, PorepKind::new(POREP).unwrap().cache_id);
    assert_eq!(srs_file(), "v28-fil-inner-product-v1.srs");

    const SECTOR: u64 = 9;
    let sealed = seal(NI, SECTOR, 31);
    let input = parse_c1(&sealed.c1_json).unwrap();
    let prover = FilecoinProver::new(ProverConfig::default());
    let engine = engine();
    let mut rng = ChaCha20Rng::seed_from_u64(8);
    let blinding: Vec<_> = (0..13)
        .map(|_| (Scalar::random(&mut rng), Scalar::random(&mut rng)))
        .collect();
    let t = Instant::now();
    // `wait_output` aggregates and verifies with filecoin-proofs' verify_seal.
    let out = prover
        .submit_porep(
            &engine,
            request(&sealed, Blinding::Fixed(blinding.clone())),
            Priority::Normal,
        )
        .unwrap()
        .wait_output()
        .unwrap();
    eprintln!(
        "cuzk's NI-PoRep 2 KiB C2 (13 partitions, aggregate, verify_seal): {:.2} s",
        t.elapsed().as_secs_f64()
    );
    assert!(out.verified);
    let partitions = out
        .partition_proofs
        .clone()
        .expect("NI-PoRep keeps its partition proofs");
    assert_eq!(partitions.len(), 13 * 192);

    // The same partitions by bellperson, aggregated by filecoin-proofs: the same bytes.
    let t = Instant::now();
    let reference = prove_with_bellperson(&input, params, &blinding).unwrap();
    eprintln!(
        "bellperson's 13 partitions: {:.2} s",
        t.elapsed().as_secs_f64()
    );
    assert_eq!(
        partitions, reference,
        "cuzk's partition proofs differ from bellperson's"
    );
    let aggregate = filecoin_proofs_aggregate(
        NI,
        RegisteredAggregationProof::SnarkPackV2,
        &[input.c1.comm_r],
        &[input.c1.seed],
        &[reference],
    )
    .unwrap();
    assert_eq!(
        out.proof, aggregate,
        "cuzk's NI-PoRep C2 differs from filecoin-proofs' aggregate"
    );
    // A timing-only aggregate of the same partitions is as long as the real one (the
    // same count, padded the same way): timing-only runs time the same aggregation.
    let timing_only = cuzk_filecoin::aggregate::TimingOnlySrs::generate(7, 13)
        .aggregate(&kind, &partitions)
        .unwrap();
    assert_eq!(timing_only.len(), aggregate.len());
    assert_ne!(timing_only, aggregate);

    // Checked again; refused for another miner or sector.
    let me = prover_id_from_miner(MINER);
    verify_proof(&input, me, Some(SECTOR), &out.proof, dir).unwrap();
    let e = verify_proof(
        &input,
        prover_id_from_miner(MINER + 1),
        Some(SECTOR),
        &out.proof,
        dir,
    );
    assert!(
        matches!(e, Err(FilecoinError::NotVerified { sector: SECTOR })),
        "{e:?}"
    );
    let e = verify_proof(&input, me, Some(SECTOR + 1), &out.proof, dir);
    assert!(matches!(e, Err(FilecoinError::NotVerified { .. })), "{e:?}");

    // A prover reading parameters elsewhere than filecoin-proofs is refused before
    // proving: the aggregate reads the SRS and verifying key from filecoin-proofs' cache.
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::copy(params, elsewhere.path().join(kind.params_file())).unwrap();
    let other = FilecoinProver::new(ProverConfig {
        parameter_dir: elsewhere.path().to_path_buf(),
        ..ProverConfig::default()
    });
    let e = other
        .submit_porep(
            &engine,
            request(&sealed, Blinding::Random),
            Priority::Normal,
        )
        .unwrap_err();
    assert!(
        matches!(e, FilecoinError::ParameterDirConflict { .. }),
        "{e:?}"
    );
}

#[test]
fn three_interactive_sectors_aggregate_as_filecoin_proofs_does() {
    params_path();
    let dir = param_dir();
    let prover = FilecoinProver::new(ProverConfig::default());
    let engine = engine();
    let sealed: Vec<_> = (0..3).map(|i| seal(POREP, 21 + i, 40 + i)).collect();
    let sectors: Vec<AggregateSector> = sealed
        .iter()
        .map(|s| {
            let proof = prover
                .submit_porep(&engine, request(s, Blinding::Random), Priority::Normal)
                .unwrap()
                .wait()
                .unwrap();
            AggregateSector::from_c1(&parse_c1(&s.c1_json).unwrap(), Some(s.sector), proof).unwrap()
        })
        .collect();
    let req = AggregateRequest {
        prover_id: MINER.to_string(),
        aggregation: RegisteredAggregationProof::SnarkPackV2,
        sectors: sectors.clone(),
    };
    // The JSON form round-trips.
    let json = serde_json::to_vec(&req).unwrap();
    let parsed = AggregateRequest::parse(&json).unwrap();
    assert_eq!(parsed.sectors, sectors);
    let checked = check_aggregate_request(parsed).unwrap();

    let t = Instant::now();
    let ours = aggregate(&checked, dir).unwrap();
    eprintln!("aggregate of 3 sectors: {:.2} s", t.elapsed().as_secs_f64());
    let comm_rs: Vec<_> = sectors.iter().map(|s| s.comm_r).collect();
    let seeds: Vec<_> = sectors.iter().map(|s| s.seed).collect();
    let proofs: Vec<_> = sectors.iter().map(|s| s.proof.clone()).collect();
    let theirs = filecoin_proofs_aggregate(
        POREP,
        RegisteredAggregationProof::SnarkPackV2,
        &comm_rs,
        &seeds,
        &proofs,
    )
    .unwrap();
    assert_eq!(
        ours, theirs,
        "cuzk's aggregate differs from filecoin-proofs'"
    );

    // The aggregate is of these sectors in this order: another order does not verify.
    verify_aggregate(&checked, &ours).unwrap();
    let mut swapped = checked.clone();
    swapped.sectors.swap(0, 1);
    let e = verify_aggregate(&swapped, &ours);
    assert!(
        matches!(
            e,
            Err(FilecoinError::AggregateNotVerified { sectors: 3, .. })
        ),
        "{e:?}"
    );

    // Bad inputs, each a typed error before anything is aggregated.
    let with = |f: &dyn Fn(&mut AggregateRequest)| {
        let mut r = req.clone();
        f(&mut r);
        check_aggregate_request(r)
    };
    let e = with(&|r| r.sectors[2].registered_proof = RegisteredSealProof::StackedDrg2KiBV1);
    assert!(
        matches!(e, Err(FilecoinError::MixedProofs { index: 2, .. })),
        "{e:?}"
    );
    let e = with(&|r| r.sectors.truncate(1));
    assert!(
        matches!(e, Err(FilecoinError::AggregateCount { count: 1, .. })),
        "{e:?}"
    );
    let e = with(&|r| r.sectors.clear());
    assert!(
        matches!(e, Err(FilecoinError::AggregateCount { count: 0, .. })),
        "{e:?}"
    );
    let e = with(&|r| r.sectors[1].proof.truncate(100));
    assert!(
        matches!(e, Err(FilecoinError::ProofLength { actual: 100, .. })),
        "{e:?}"
    );
    let e = with(&|r| r.prover_id = "not a miner".into());
    assert!(matches!(e, Err(FilecoinError::ProverId { .. })), "{e:?}");
    assert!(matches!(
        AggregateRequest::parse(b"{\"prover_id\": \"1000\""),
        Err(FilecoinError::Json { .. })
    ));
    // A proof that does not verify (sector 22's proof given for sector 21) is named.
    let bad = with(&|r| r.sectors[0].proof = r.sectors[1].proof.clone()).unwrap();
    let e = aggregate(&bad, dir);
    assert!(
        matches!(
            e,
            Err(FilecoinError::InputNotVerified {
                index: 0,
                sector: 21
            })
        ),
        "{e:?}"
    );
    // Without the SRS (here: a directory without it), nothing is made.
    let empty = tempfile::tempdir().unwrap();
    let e = check_srs(empty.path());
    assert!(matches!(e, Err(FilecoinError::SrsMissing { .. })), "{e:?}");
    let e = aggregate(&checked, empty.path());
    assert!(
        matches!(e, Err(FilecoinError::ParameterDirConflict { .. })),
        "{e:?}"
    );
}
