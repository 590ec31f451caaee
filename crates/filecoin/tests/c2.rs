//! A 2 KiB sector sealed here by filecoin-proofs, its C2 proven by cuzk's engine
//! through `cuzk-filecoin`, verified by filecoin-proofs' `verify_seal` and compared
//! byte for byte with bellperson's prover at the same `r, s`; and every kind of bad
//! input, each a typed error after which the prover goes on.
//!
//! Parameters are generated once per build directory (`target/tmp/filecoin-params`,
//! shared with the CLI's tests), never downloaded.

mod common;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Instant;

use common::{blinding, engine, param_dir, seal, MINER};
use cuzk_filecoin::reference::prove_with_bellperson;
use cuzk_filecoin::{
    parse_c1, prover_id_from_miner, verify_proof, Blinding, Envelope, FilecoinError,
    FilecoinProver, PorepKind, PorepRequest, Priority, ProverConfig, RegisteredSealProof,
    SealedSector,
};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;

const PROOF: RegisteredSealProof = RegisteredSealProof::StackedDrg2KiBV1_1;
const SECTOR: u64 = 7;

fn kind() -> PorepKind {
    param_dir();
    PorepKind::new(PROOF).unwrap()
}

/// The 2 KiB test parameters, generated on first use in this build directory.
fn params_path() -> &'static Path {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| common::params(&kind()))
}

fn sealed() -> &'static SealedSector {
    static S: OnceLock<SealedSector> = OnceLock::new();
    S.get_or_init(|| seal(PROOF, SECTOR, 11))
}

fn envelope_bytes() -> Vec<u8> {
    let s = sealed();
    serde_json::to_vec(&Envelope::wrap(&s.c1_json, SECTOR, 2048)).unwrap()
}

fn request(bytes: &[u8], blinding: Blinding) -> PorepRequest {
    PorepRequest {
        input: parse_c1(bytes).unwrap(),
        prover_id: prover_id_from_miner(MINER),
        sector: None,
        blinding,
    }
}

#[test]
fn c2_of_a_sealed_2kib_sector_verifies_and_matches_bellperson() {
    let params = params_path();
    let prover = FilecoinProver::new(ProverConfig::default());
    let t = Instant::now();
    prover.preload(PROOF).unwrap();
    eprintln!(
        "preload (compile + load) {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let engine = engine();

    let blinding = vec![blinding(5)];
    let env = envelope_bytes();
    let t = Instant::now();
    let job = prover
        .submit_porep(
            &engine,
            request(&env, Blinding::Fixed(blinding.clone())),
            Priority::Normal,
        )
        .unwrap();
    assert_eq!(job.sector(), SECTOR);
    // `wait` verifies with filecoin-proofs' verify_seal before returning.
    let proof = job.wait().unwrap();
    eprintln!("cuzk C2 {:.1} s", t.elapsed().as_secs_f64());
    assert_eq!(proof.len(), 192);

    let input = parse_c1(&env).unwrap();
    let t = Instant::now();
    let reference = prove_with_bellperson(&input, params, &blinding).unwrap();
    eprintln!("bellperson C2 {:.1} s", t.elapsed().as_secs_f64());
    assert_eq!(
        proof, reference,
        "cuzk's partition proof differs from bellperson's"
    );

    // The same proof checked again, and refused for another miner or sector.
    let dir = param_dir();
    verify_proof(&input, prover_id_from_miner(MINER), None, &proof, dir).unwrap();
    let wrong_miner = verify_proof(&input, prover_id_from_miner(MINER + 1), None, &proof, dir);
    assert!(
        matches!(
            wrong_miner,
            Err(FilecoinError::NotVerified { sector: SECTOR })
        ),
        "{wrong_miner:?}"
    );
    assert!(matches!(
        verify_proof(
            &input,
            prover_id_from_miner(MINER),
            Some(SECTOR + 1),
            &proof,
            dir
        ),
        Err(FilecoinError::SectorMismatch { .. })
    ));
    let bare = parse_c1(&sealed().c1_json).unwrap();
    assert!(matches!(
        verify_proof(
            &bare,
            prover_id_from_miner(MINER),
            Some(SECTOR + 1),
            &proof,
            dir
        ),
        Err(FilecoinError::NotVerified { .. })
    ));
    let mut flipped = proof.clone();
    flipped[100] ^= 1;
    assert!(verify_proof(&input, prover_id_from_miner(MINER), None, &flipped, dir).is_err());

    // A submission with the wrong miner id is proven, then refused by verify_seal:
    // the bytes never come back.
    let mut wrong = request(&env, Blinding::Random);
    wrong.prover_id = prover_id_from_miner(MINER + 1);
    let e = prover
        .submit_porep(&engine, wrong, Priority::Normal)
        .unwrap()
        .wait();
    assert!(matches!(e, Err(FilecoinError::NotVerified { .. })), "{e:?}");

    // And the prover goes on: that second job reused the compiled circuit and the
    // loaded parameters (one slot, both filled).
    let loaded = prover.loaded();
    assert_eq!(loaded.len(), 1);
    assert!(loaded[0].params.is_some() && loaded[0].r1cs.is_some());
    assert!(prover.evict(PROOF).unwrap());
    assert!(prover.loaded()[0].params.is_none());
}

#[test]
fn bad_c1_inputs_are_typed_errors() {
    param_dir();
    let s = sealed();
    let json = &s.c1_json;

    let truncated = parse_c1(&json[..json.len() / 2]);
    assert!(
        matches!(
            truncated,
            Err(FilecoinError::Json {
                what: "C1 output",
                ..
            })
        ),
        "{truncated:?}"
    );
    assert!(matches!(
        parse_c1(b"{\"registered_proof\": 12"),
        Err(FilecoinError::Json { .. })
    ));
    assert!(matches!(
        parse_c1(b"not json at all"),
        Err(FilecoinError::Json { .. })
    ));

    // Envelopes: any key order; bad base64; a size that disagrees with the C1 output.
    let b64 = Envelope::wrap(json, SECTOR, 2048).phase1_out;
    let reordered =
        format!(r#"{{ "SectorSize": 2048, "Phase1Out": "{b64}", "SectorNum": {SECTOR} }}"#);
    let input = parse_c1(reordered.as_bytes()).unwrap();
    assert_eq!(input.sector(None).unwrap(), SECTOR);
    assert_eq!(input.c1.comm_r, s.c1.comm_r);
    let bad64 = format!(r#"{{"SectorNum": 1, "Phase1Out": "@@@{b64}", "SectorSize": 2048}}"#);
    assert!(matches!(
        parse_c1(bad64.as_bytes()),
        Err(FilecoinError::Base64(_))
    ));
    let size = format!(r#"{{"SectorNum": 1, "Phase1Out": "{b64}", "SectorSize": 34359738368}}"#);
    let e = parse_c1(size.as_bytes()).unwrap_err();
    assert!(matches!(
        e,
        FilecoinError::EnvelopeSizeMismatch {
            envelope: 34359738368,
            c1: 2048,
            ..
        }
    ));
    assert!(e.to_string().contains("StackedDrg2KiBV1_1"), "{e}");
    let truncated_env = format!(r#"{{"SectorNum": 1, "Phase1Out": "{b64}""#);
    assert!(matches!(
        parse_c1(truncated_env.as_bytes()),
        Err(FilecoinError::Json {
            what: "envelope",
            ..
        })
    ));
    // A bare C1 output has no sector number.
    assert!(matches!(
        parse_c1(json).unwrap().sector(None),
        Err(FilecoinError::NoSectorNumber)
    ));

    // An interactive C1 output relabelled non-interactive (1 partition of vanilla
    // proofs where NI-PoRep has 13), and a registered proof that does not exist.
    let text = String::from_utf8(json.clone()).unwrap();
    let ni = text.replace(
        "\"StackedDrg2KiBV1_1\"",
        "\"StackedDrg2KiBV1_2_Feat_NonInteractivePoRep\"",
    );
    let prover = FilecoinProver::new(ProverConfig::default());
    let engine = engine();
    let mut relabelled = request(ni.as_bytes(), Blinding::Random);
    relabelled.sector = Some(SECTOR);
    let e = prover
        .submit_porep(&engine, relabelled, Priority::Normal)
        .unwrap_err();
    assert!(
        matches!(&e, FilecoinError::Circuit { message, .. } if message.contains("13")),
        "{e:?}"
    );
    let unknown = text.replace("\"StackedDrg2KiBV1_1\"", "\"StackedDrg4KiBV1_1\"");
    assert!(matches!(
        parse_c1(unknown.as_bytes()),
        Err(FilecoinError::Json { .. })
    ));
    // Vanilla proofs of another shape than the registered proof says.
    let shape = text.replace("\"StackedDrg2KiBV1_1\"", "\"StackedDrg8MiBV1_1\"");
    let e = prover
        .submit_porep(
            &engine,
            request(shape.as_bytes(), Blinding::Random),
            Priority::Normal,
        )
        .err();
    assert!(e.is_some());
}

#[test]
fn bad_parameter_files_are_typed_errors() {
    let kind = kind();
    let input = || request(&envelope_bytes(), Blinding::Random);
    let engine = engine();
    let dir = tempfile::tempdir().unwrap();
    // One prover throughout: a failed load leaves nothing cached, so each bad file is
    // seen afresh (and the circuit is compiled once).
    let prover = FilecoinProver::new(ProverConfig {
        parameter_dir: dir.path().to_path_buf(),
        verify: false,
        check_digest: false,
    });

    // Missing: the error names the file and the variable.
    let e = prover
        .submit_porep(&engine, input(), Priority::Normal)
        .unwrap_err();
    assert!(matches!(e, FilecoinError::ParamsMissing { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.contains(&kind.params_file()) && msg.contains("FIL_PROOFS_PARAMETER_CACHE"),
        "{msg}"
    );
    assert!(kind.params_file().starts_with(
        "v28-stacked-proof-of-replication-merkletree-poseidon_hasher-8-0-0-sha256_hasher-"
    ));

    // Corrupted: not a parameter file at all.
    let path = dir.path().join(kind.params_file());
    std::fs::write(&path, vec![0x5a; 4096]).unwrap();
    let e = prover
        .submit_porep(&engine, input(), Priority::Normal)
        .unwrap_err();
    assert!(matches!(e, FilecoinError::ParamsRead { .. }), "{e:?}");
    assert!(e.to_string().contains(&kind.params_file()));

    // Another circuit's (valid) parameters under this circuit's name.
    let other = cuzk_params::generate_params(
        cuzk_circuits::MulChain::new(10, 2, None).unwrap(),
        &mut ChaCha20Rng::seed_from_u64(3),
    )
    .unwrap();
    cuzk_params::write_params(&other, &path).unwrap();
    let e = prover
        .submit_porep(&engine, input(), Priority::Normal)
        .unwrap_err();
    assert!(matches!(e, FilecoinError::ParamsMismatch { .. }), "{e:?}");

    // Test parameters are not Filecoin's: the digest check says so.
    let e = cuzk_filecoin::check_digest(&kind, dir.path(), false).unwrap_err();
    assert!(matches!(e, FilecoinError::DigestMismatch { .. }), "{e:?}");

    // A prover reading parameters elsewhere than filecoin-proofs' verifier is told so.
    let bare = parse_c1(&sealed().c1_json).unwrap();
    let e = verify_proof(&bare, [0; 32], Some(1), &[0; 192], dir.path()).unwrap_err();
    assert!(
        matches!(e, FilecoinError::ParameterDirConflict { .. }),
        "{e:?}"
    );
    assert!(matches!(
        verify_proof(&bare, [0; 32], Some(1), &[0; 100], param_dir()),
        Err(FilecoinError::ProofLength {
            expected: 192,
            actual: 100,
            ..
        })
    ));
}

/// Parameters memory-mapped from a points file prove the same bytes as
/// bellperson at the same `r, s` (verified by `verify_seal` in `wait`), hold no
/// anonymous memory the budget counts, and a second prover maps the file it
/// finds instead of decoding the parameters again.
#[test]
fn mapped_parameters_prove_the_same_bytes() {
    let params = params_path();
    let points = tempfile::tempdir().unwrap();
    let prover =
        FilecoinProver::new(ProverConfig::default()).with_points_dir(points.path().to_path_buf());
    let loaded = prover.params(&kind()).unwrap();
    assert!(loaded.mapped);
    assert_eq!(loaded.srs.host_bytes(), 0);
    assert_eq!(loaded.srs.mapped_bytes(), loaded.bytes);
    let file = points
        .path()
        .join(format!("{}.points", kind().params_file()));
    let written = std::fs::metadata(&file).unwrap().modified().unwrap();

    let engine = engine();
    let blinding = vec![blinding(9)];
    let env = envelope_bytes();
    let proof = prover
        .submit_porep(
            &engine,
            request(&env, Blinding::Fixed(blinding.clone())),
            Priority::Normal,
        )
        .unwrap()
        .wait()
        .unwrap();
    let reference = prove_with_bellperson(&parse_c1(&env).unwrap(), params, &blinding).unwrap();
    assert_eq!(proof, reference, "a proof with mapped parameters differs");

    let again =
        FilecoinProver::new(ProverConfig::default()).with_points_dir(points.path().to_path_buf());
    assert!(again.params(&kind()).unwrap().mapped);
    assert_eq!(
        std::fs::metadata(&file).unwrap().modified().unwrap(),
        written,
        "the points file was written again"
    );
}
