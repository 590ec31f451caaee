//! The provider's path through the binary: `cuzk c1` seals a 2 KiB sector and writes
//! its envelope, `cuzk c2` proves it (verified by filecoin-proofs before it is
//! written), `cuzk c2 verify` accepts the proof and refuses it for another miner.
//!
//! Parameters: generated once per build directory (`target/tmp/filecoin-params`,
//! shared with cuzk-filecoin's tests).

mod common;

use common::{cuzk, param_dir, text};
use cuzk_filecoin::{ensure_params, PorepKind, RegisteredSealProof, PARAMETER_CACHE_VAR};

#[test]
fn c1_then_c2_on_the_envelope_then_verify() {
    std::env::set_var(PARAMETER_CACHE_VAR, param_dir());
    let kind = PorepKind::new(RegisteredSealProof::StackedDrg2KiBV1_1).unwrap();
    ensure_params(&kind, &param_dir(), 2026).unwrap();

    let work = tempfile::tempdir().unwrap();
    let p = |name: &str| work.path().join(name).display().to_string();
    let (c1, env, proof) = (p("c1.json"), p("env.json"), p("proof.bin"));

    let o = cuzk(&[
        "c1",
        "--miner-id",
        "f01000",
        "--sector",
        "3",
        "-o",
        &c1,
        "--envelope",
        &env,
    ]);
    assert!(o.status.success());

    let o = cuzk(&[
        "c2",
        &env,
        "--miner-id",
        "f01000",
        "-o",
        &proof,
        "--synth-threads",
        "2",
        "--gpu-threads",
        "2",
        "--synth-jobs",
        "1",
        "--gpu-workers",
        "1",
    ]);
    assert!(o.status.success());
    let out = text(&o);
    assert!(out.contains("partition 1/1 proven"), "{out}");
    assert!(
        out.contains("verified by filecoin-proofs' verify_seal"),
        "{out}"
    );
    assert!(
        out.contains("synthesis"),
        "the per-stage table is missing: {out}"
    );
    assert_eq!(std::fs::read(&proof).unwrap().len(), 192);

    // The bare C1 output needs the sector number; the envelope carries it.
    let o = cuzk(&[
        "c2",
        "verify",
        &c1,
        "--miner-id",
        "1000",
        "--sector",
        "3",
        "--proof",
        &proof,
    ]);
    assert!(o.status.success());
    let o = cuzk(&[
        "c2",
        "verify",
        &env,
        "--miner-id",
        "1000",
        "--proof",
        &proof,
    ]);
    assert!(o.status.success());
    let o = cuzk(&[
        "c2",
        "verify",
        &env,
        "--miner-id",
        "1001",
        "--proof",
        &proof,
    ]);
    assert!(!o.status.success());
    assert!(text(&o).contains("does not verify"), "{}", text(&o));

    // Bad input: a clear error, no proof.
    let bad = p("bad.json");
    let json = std::fs::read(&c1).unwrap();
    std::fs::write(&bad, &json[..json.len() / 3]).unwrap();
    let o = cuzk(&[
        "c2",
        &bad,
        "--miner-id",
        "1000",
        "--sector",
        "3",
        "-o",
        &p("none.bin"),
    ]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("the C1 output is not valid"),
        "{}",
        text(&o)
    );
    assert!(!work.path().join("none.bin").exists());
}
