//! `cuzk plan` for machines described by flags: with `--points-dir` (or `[daemon]
//! points_dir` in the --config) the parameters are planned as mapped, so a 64 GiB
//! host runs the 32 GiB PoRep shape on a 16 GB card, and the plan says how the
//! streamed sets go up; without it the plan says what --points-dir would give.

use std::process::{Command, Output};

fn cuzk(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_cuzk"))
        .args(args)
        .output()
        .unwrap();
    eprintln!(
        "$ cuzk {}\n{}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

const CELL: [&str; 9] = [
    "plan",
    "--kind",
    "porep",
    "--device-memory-gib",
    "16",
    "--cores",
    "16",
    "--host-memory-gib",
    "64",
];

fn cell(host_gib: &str, extra: &[&str]) -> Output {
    let mut args = CELL.to_vec();
    args[8] = host_gib;
    args.extend_from_slice(extra);
    cuzk(&args)
}

#[test]
fn a_64_gib_host_runs_porep_on_a_16_gb_card_with_points_dir() {
    let decoded = cell("64", &[]);
    assert!(decoded.status.success());
    let text = stdout(&decoded);
    assert!(text.contains("does not run: host memory"), "{text}");
    assert!(text.contains("with --points-dir"), "{text}");
    assert!(text.contains("parameters decoded into memory"), "{text}");

    let mapped = cell("64", &["--points-dir", "/nonexistent/points"]);
    assert!(mapped.status.success());
    let text = stdout(&mapped);
    assert!(!text.contains("does not run"), "{text}");
    assert!(text.contains("memory-mapped from points files"), "{text}");
    let row = text
        .lines()
        .find(|l| l.trim_start().starts_with("stream_staging"))
        .unwrap_or_else(|| panic!("no stream_staging row: {text}"));
    assert!(
        row.contains("copy") && row.contains("planned"),
        "short host: {row}"
    );
    assert!(text.contains("read back from disk"), "{text}");
    assert!(text.contains("s/proof"), "{text}");

    // The plan as a configuration to run with: the staging written out.
    let toml = cell("64", &["--points-dir", "/nonexistent/points", "--toml"]);
    assert!(toml.status.success());
    let text = stdout(&toml);
    assert!(
        text.contains("stream_staging = \"copy\" # planned"),
        "{text}"
    );
    assert!(text.contains("run with --points-dir"), "{text}");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cuzk.toml");
    std::fs::write(&path, &text).unwrap();
    cuzk_config::Config::load(&path).expect("the plan's cuzk.toml parses");
    // Decoded, the same cell has no configuration to give.
    assert!(!cell("64", &["--toml"]).status.success());

    // A 256 GiB host page-locks the streamed sets in place.
    let large = cell("256", &["--points-dir", "/p", "--json"]);
    assert!(large.status.success());
    let json: serde_json::Value = serde_json::from_slice(&large.stdout).unwrap();
    let p = &json["plans"][0];
    assert_eq!(p["hardware"]["mapped"], true, "{p}");
    assert_eq!(p["knobs"]["stream_staging"]["value"], "register", "{p}");
    assert_eq!(p["host"]["streamed_from"], "pinned", "{p}");
}

/// `[daemon] points_dir` in the --config plans as mapped, and the file's
/// `stream_staging` is given: kept, even where it does not fit.
#[test]
fn the_configs_points_dir_and_stream_staging_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cuzk.toml");
    std::fs::write(
        &path,
        "[backend]\nplugin = \"cuda\"\n\n[backend.params]\nstream_staging = \"register\"\n\n\
         [daemon]\npoints_dir = \"/var/tmp/cuzk-points\"\n",
    )
    .unwrap();
    let out = cell("64", &["--config", path.to_str().unwrap(), "--json"]);
    assert!(out.status.success());
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let p = &json["plans"][0];
    assert_eq!(p["hardware"]["mapped"], true, "{p}");
    assert_eq!(p["knobs"]["stream_staging"]["value"], "register", "{p}");
    assert_eq!(p["knobs"]["stream_staging"]["source"], "given", "{p}");
    let fails = p["fails"].as_str().unwrap_or_default();
    assert!(fails.contains("page-locked in place"), "{p}");
}

/// With no flags `cuzk plan` plans the CUDA backend's card (the backend its `--toml`
/// configures), not the embedded default's CPU backend, which drives none: the
/// H100 streams of 2026-12-07 ran with a host-only plan put in a CUDA
/// configuration because the script planned without a --config. A given --config
/// is planned as it is.
#[test]
fn with_no_config_the_plan_asks_the_cuda_backend_for_its_card() {
    let out = cuzk(&["plan", "--kind", "porep"]);
    assert!(out.status.success());
    let text = stdout(&out);
    assert!(
        text.contains("no --config: the CUDA backend's devices")
            || text.contains("no --config: the CUDA backend could not be opened either"),
        "{text}"
    );
    let cpu = concat!(env!("CARGO_MANIFEST_DIR"), "/../../configs/baseline.toml");
    let out = cuzk(&["plan", "--kind", "porep", "--config", cpu]);
    assert!(out.status.success());
    assert!(!stdout(&out).contains("no --config"), "{}", stdout(&out));
}
