//! The other kinds through the binary, at 2 KiB: `cuzk <kind> inputs` makes real
//! vanilla proofs (a sector sealed, updated or challenged by filecoin-proofs), `cuzk
//! snap` / `cuzk post window` / `cuzk post winning` prove them (verified by
//! filecoin-proofs before the proof is written), `verify` accepts the proof and
//! refuses it for other inputs; and bad input per kind is a clear error with a
//! non-zero exit and no proof written.
//!
//! Parameters: generated once per build directory (`target/tmp/filecoin-params`,
//! shared with cuzk-filecoin's tests).

mod common;

use common::{cuzk, param_dir, text};
use cuzk_filecoin::{
    ensure_params, CircuitKind, PostKind, RegisteredPoStProof, RegisteredUpdateProof, UpdateKind,
    PARAMETER_CACHE_VAR,
};
use std::path::Path;

fn params<K: CircuitKind>(kind: &K) {
    std::env::set_var(PARAMETER_CACHE_VAR, param_dir());
    ensure_params(kind, &param_dir(), 2026).unwrap();
}

/// The engine flags of every proving run: two cores.
const ENGINE: [&str; 8] = [
    "--synth-threads",
    "2",
    "--gpu-threads",
    "2",
    "--synth-jobs",
    "1",
    "--gpu-workers",
    "1",
];

/// Runs `cuzk <cmd> [args] ENGINE` and checks it failed with `expect` in its error,
/// writing no proof.
fn refused(cmd: &[&str], args: &[&str], expect: &str, out: &Path) {
    let mut all: Vec<&str> = cmd.to_vec();
    all.extend_from_slice(args);
    let o_flag = out.display().to_string();
    all.extend_from_slice(&["-o", &o_flag]);
    all.extend_from_slice(&ENGINE);
    let o = cuzk(&all);
    assert!(!o.status.success(), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("error:") && t.contains(expect), "{t}");
    assert!(!out.exists(), "a refused request wrote {}", out.display());
}

/// inputs → prove → verify for one kind, then its bad inputs. Returns the work dir.
fn round_trip(cmd: &[&str], proof_len: usize) -> tempfile::TempDir {
    let work = tempfile::tempdir().unwrap();
    let p = |name: &str| work.path().join(name).display().to_string();
    let (input, proof) = (p("in.json"), p("proof.bin"));

    let mut a: Vec<&str> = cmd.to_vec();
    a.extend_from_slice(&["inputs", "-o", &input]);
    let o = cuzk(&a);
    assert!(o.status.success());
    assert!(!text(&o).contains("SHAPE-ONLY"), "{}", text(&o));

    let mut a: Vec<&str> = cmd.to_vec();
    a.extend_from_slice(&["-i", &input, "-o", &proof]);
    a.extend_from_slice(&ENGINE);
    let o = cuzk(&a);
    assert!(o.status.success());
    let out = text(&o);
    assert!(out.contains("verified by filecoin-proofs"), "{out}");
    assert!(out.contains("synthesis"), "no stage table: {out}");
    assert_eq!(std::fs::read(&proof).unwrap().len(), proof_len);

    let mut a: Vec<&str> = cmd.to_vec();
    a.extend_from_slice(&["verify", "-i", &input, "--proof-file", &proof]);
    let o = cuzk(&a);
    assert!(o.status.success());

    // Another proof's bytes (one byte changed) are refused.
    let mut bytes = std::fs::read(&proof).unwrap();
    bytes[proof_len - 1] ^= 1;
    let tampered = p("tampered.bin");
    std::fs::write(&tampered, &bytes).unwrap();
    let mut a: Vec<&str> = cmd.to_vec();
    a.extend_from_slice(&["verify", "-i", &input, "--proof-file", &tampered]);
    let o = cuzk(&a);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("error:"), "{}", text(&o));

    // Undecodable bincode, through the `--vanilla` flag.
    let junk = p("junk.bin");
    std::fs::write(&junk, b"not a vanilla proof").unwrap();
    refused(
        cmd,
        &["-i", &input, "--vanilla", &junk],
        "does not decode",
        &work.path().join("none.bin"),
    );
    work
}

#[test]
fn snap_inputs_prove_verify_and_bad_commitments() {
    let kind = UpdateKind::new(RegisteredUpdateProof::StackedDrg2KiBV1).unwrap();
    params(&kind);
    let work = round_trip(&["snap"], kind.proof_len());
    let input = work.path().join("in.json").display().to_string();
    let none = work.path().join("none.bin");
    // A commitment of 31 bytes.
    refused(
        &["snap"],
        &["-i", &input, "--comm-r-new", &"ab".repeat(31)],
        "comm_r_new",
        &none,
    );
    // Another new data commitment: filecoin-proofs' update circuit refuses it.
    refused(
        &["snap"],
        &["-i", &input, "--comm-d-new", &"01".repeat(32)],
        "error:",
        &none,
    );
    // A PoSt input given to `snap`.
    let o = cuzk(&["snap", "-i", &input, "--proof", "99"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("registered update proof"), "{}", text(&o));
}

#[test]
fn window_post_from_flags_and_bad_partition_and_randomness() {
    let kind = PostKind::new(RegisteredPoStProof::StackedDrgWindow2KiBV1_2).unwrap();
    params(&kind);
    let work = round_trip(&["post", "window"], 192);
    let p = |name: &str| work.path().join(name).display().to_string();
    let none = work.path().join("none.bin");

    // The same request entirely from flags: Go's number 10 (Window 2 KiB V1_1), the
    // bincode files `inputs --bincode-dir` writes.
    let (input2, dir) = (p("in2.json"), p("vanilla"));
    let o = cuzk(&[
        "post",
        "window",
        "inputs",
        "--seed",
        "5",
        "--sectors",
        "2",
        "--bincode-dir",
        &dir,
        "-o",
        &input2,
    ]);
    assert!(o.status.success());
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&input2).unwrap()).unwrap();
    let randomness = json["randomness"].as_str().unwrap().to_string();
    let (v0, v1) = (
        format!("{dir}/vanilla-0.bin"),
        format!("{dir}/vanilla-1.bin"),
    );
    let proof2 = p("proof2.bin");
    let mut a = vec![
        "post",
        "window",
        "--proof",
        "10",
        "--miner-id",
        "f01000",
        "--randomness",
        &randomness,
        "--partition-index",
        "0",
        "--vanilla",
        &v0,
        "--vanilla",
        &v1,
        "-o",
        &proof2,
    ];
    a.extend_from_slice(&ENGINE);
    let o = cuzk(&a);
    assert!(o.status.success());
    assert!(
        text(&o).contains("verified by filecoin-proofs"),
        "{}",
        text(&o)
    );
    assert_eq!(std::fs::read(&proof2).unwrap().len(), 192);

    let input = p("in.json");
    refused(
        &["post", "window"],
        &["-i", &input, "--partition-index", "3000"],
        "partition index 3000 is out of range",
        &none,
    );
    refused(
        &["post", "window"],
        &["-i", &input, "--randomness", "00ff"],
        "randomness",
        &none,
    );
    // A Winning proof type given to `post window`.
    refused(
        &["post", "window"],
        &["-i", &input, "--proof", "0"],
        "is not a window PoSt proof type",
        &none,
    );
}

#[test]
fn winning_post_and_bad_randomness_and_wrong_size() {
    let kind = PostKind::new(RegisteredPoStProof::StackedDrgWinning2KiBV1).unwrap();
    params(&kind);
    let work = round_trip(&["post", "winning"], 192);
    let input = work.path().join("in.json").display().to_string();
    let none = work.path().join("none.bin");
    refused(
        &["post", "winning"],
        &["-i", &input, "--randomness", &"11".repeat(33)],
        "randomness",
        &none,
    );
    // Other randomness: the vanilla proof answers other challenges.
    refused(
        &["post", "winning"],
        &[
            "-i",
            &input,
            "--randomness",
            &format!("{}00", "12".repeat(31)),
        ],
        "error:",
        &none,
    );
    // A 2 KiB vanilla proof for the 8 MiB proof type.
    refused(
        &["post", "winning"],
        &["-i", &input, "--proof", "1"],
        "error:",
        &none,
    );
}

/// `cuzk post winning inputs --shape-only` (2 KiB) into `path`: nothing sealed,
/// no parameters needed.
fn shape_only_winning(path: &str) -> std::process::Output {
    cuzk(&[
        "post",
        "winning",
        "inputs",
        "--shape-only",
        "--proof",
        "0",
        "-o",
        path,
    ])
}

#[test]
fn shape_only_inputs_are_labelled_and_need_timing_only() {
    let work = tempfile::tempdir().unwrap();
    let input = work.path().join("w.json").display().to_string();
    let o = shape_only_winning(&input);
    assert!(o.status.success());
    assert!(text(&o).contains("SHAPE-ONLY"), "{}", text(&o));
    refused(
        &["post", "winning"],
        &["-i", &input],
        "--timing-only",
        &work.path().join("none.bin"),
    );
    let proof = work.path().join("p.bin").display().to_string();
    // Twice on one engine (`--repeat`): a line and a stage table for each run.
    let mut a = vec![
        "post",
        "winning",
        "-i",
        &input,
        "--timing-only",
        "--repeat",
        "2",
        "-o",
        &proof,
    ];
    a.extend_from_slice(&ENGINE);
    let o = cuzk(&a);
    assert!(o.status.success());
    let out = text(&o);
    assert!(out.contains("TIMING-ONLY"), "{out}");
    assert!(
        out.contains("(run 1 of 2)") && out.contains("(run 2 of 2)"),
        "{out}"
    );
    assert_eq!(out.matches("stage (ms)").count(), 2, "{out}");
    assert_eq!(std::fs::read(&proof).unwrap().len(), 192);
}

/// `bench --mix` here: two WinningPoSt proofs of a 2 KiB sector (inputs made by
/// the run), each kind's latency row, the manifest, and the run's TIMELINE beside
/// it (where a latency goes), with both jobs from submission to done.
#[test]
fn a_mix_reports_latency_with_its_manifest_and_timeline() {
    let kind = PostKind::new(RegisteredPoStProof::StackedDrgWinning2KiBV1).unwrap();
    params(&kind);
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().display().to_string();
    let mut args = vec!["bench", "--mix", "winning:2", "--out", &dir];
    args.extend_from_slice(&ENGINE);
    let o = cuzk(&args);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(
        t.lines().any(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            w.len() == 5 && w[0] == "winning" && w[1] == "2"
        }),
        "no latency row for the two WinningPoSt jobs: {t}"
    );
    let named = |suffix: &str| {
        std::fs::read_dir(out.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.to_string_lossy().ends_with(suffix))
            .unwrap_or_else(|| panic!("no *{suffix} in {dir}: {t}"))
    };
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(named(".json")).unwrap()).unwrap();
    let kinds = manifest["kinds"].as_array().unwrap();
    assert_eq!(kinds.len(), 1, "{manifest}");
    // The strategies of the run, as `bench` records them (the builtin CPU backend
    // here: no plugin file, so no declared parameters to resolve).
    let slots: Vec<&str> = manifest["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["slot"].as_str().unwrap())
        .collect();
    assert!(slots.contains(&"backend"), "{manifest}");
    assert_eq!(kinds[0]["kind"], "winning");
    let latency = kinds[0]["latency_s"].as_array().unwrap();
    assert_eq!(latency.len(), 2);
    assert!(
        latency.iter().all(|s| s.as_f64().unwrap() > 0.0),
        "{manifest}"
    );
    let timeline = named(".timeline.jsonl");
    assert_eq!(
        manifest["timeline"].as_str(),
        Some(timeline.to_str().unwrap())
    );
    let events = cuzk_timeline::read_jsonl(&timeline).unwrap();
    let jobs = |kind: cuzk_timeline::EventKind| {
        let mut ids: Vec<u64> = events
            .iter()
            .filter(|e| e.event == kind)
            .map(|e| e.job)
            .collect();
        ids.sort_unstable();
        ids
    };
    let submitted = jobs(cuzk_timeline::EventKind::JobSubmit);
    assert_eq!(submitted.len(), 2, "{events:?}");
    assert_eq!(jobs(cuzk_timeline::EventKind::JobDone), submitted);
    assert!(!jobs(cuzk_timeline::EventKind::GpuStart).is_empty());
}

/// A hostile request is refused by the service's own check, in its words
/// (`the WINNING_POST request is malformed: …`), before anything is compiled or
/// loaded: a shape-only input without `--timing-only`, and one whose vanilla
/// proof is cut short (even with `--timing-only`, so no parameter file is
/// needed). A non-zero exit, no panic, no proof written.
#[test]
fn a_hostile_request_is_refused_by_the_service_s_check() {
    let work = tempfile::tempdir().unwrap();
    let p = |name: &str| work.path().join(name).display().to_string();
    let (input, cut) = (p("w.json"), p("cut.json"));
    let none = work.path().join("none.bin");
    let o = shape_only_winning(&input);
    assert!(o.status.success(), "{}", text(&o));
    let service_said = |t: &str, why: &str| {
        assert!(
            t.contains("error: the WINNING_POST request is malformed") && t.contains(why),
            "{t}"
        );
        assert!(!t.contains("panicked"), "{t}");
    };

    let mut a = vec![
        "post",
        "winning",
        "-i",
        &input,
        "-o",
        none.to_str().unwrap(),
    ];
    a.extend_from_slice(&ENGINE);
    let o = cuzk(&a);
    assert!(!o.status.success());
    service_said(&text(&o), "shape-only");
    assert!(text(&o).contains("--timing-only"), "{}", text(&o));

    let mut json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&input).unwrap()).unwrap();
    let vanilla = json["vanilla_proofs"][0].as_str().unwrap().to_string();
    // Half its bytes (whole bytes: the hex stays hex).
    let half = vanilla.len() / 4 * 2;
    json["vanilla_proofs"][0] = serde_json::Value::String(vanilla[..half].into());
    std::fs::write(&cut, serde_json::to_vec(&json).unwrap()).unwrap();
    let mut a = vec![
        "post",
        "winning",
        "-i",
        &cut,
        "--timing-only",
        "-o",
        none.to_str().unwrap(),
    ];
    a.extend_from_slice(&ENGINE);
    let o = cuzk(&a);
    assert!(!o.status.success());
    service_said(&text(&o), "vanilla proof");
    assert!(!none.exists(), "a refused request wrote {}", none.display());
}
