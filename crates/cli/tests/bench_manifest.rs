//! `cuzk bench` through a backend plugin: the run's manifest names every parameter
//! the plugin declares with the value the run used, the given ones over the
//! plugin's defaults (every knob of a run in its manifest).

use std::path::Path;
use std::process::Command;

/// Runs a one-partition `cuzk bench` at 2^10 with `config` (its cache and runs under
/// `dir`), asserts it succeeded, and returns its output and its run's manifest.
fn bench(dir: &Path, config: &Path) -> (String, serde_json::Value) {
    let out_dir = dir.join("runs");
    let out = Command::new(env!("CARGO_BIN_EXE_cuzk"))
        .args(["bench", "--config", config.to_str().unwrap()])
        .args(["--log", "10", "--jobs", "1", "--partitions", "1"])
        .args(["--cache-dir", dir.join("cache").to_str().unwrap()])
        .args(["--out", out_dir.to_str().unwrap()])
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    let run = std::fs::read_dir(&out_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.join("manifest.json").exists())
        .unwrap_or_else(|| panic!("no run folder with a manifest in {out_dir:?}: {text}"));
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.join("manifest.json")).unwrap()).unwrap();
    (text, manifest)
}

#[test]
fn the_manifest_resolves_a_plugins_parameters() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("cuzk.toml");
    std::fs::write(
        &config,
        "[backend]\nplugin = \"cpu\"\nparams = { threads = 1 }\n",
    )
    .unwrap();
    let (_, manifest) = bench(dir.path(), &config);
    let backend = manifest["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["slot"] == "backend")
        .unwrap_or_else(|| panic!("no backend in {manifest}"));
    assert_eq!(backend["plugin"], "cpu", "{manifest}");
    assert_eq!(backend["params"]["threads"], "1", "{manifest}");
    let resolved = backend["params_resolved"].as_object().unwrap();
    // The given value, and the declared ones the configuration left at their
    // defaults (the cpu plugin's `device` is 0 unless given).
    assert_eq!(resolved["threads"], "1", "{manifest}");
    assert_eq!(resolved["device"], "0", "{manifest}");
    assert!(resolved.contains_key("tables_mib"), "{manifest}");
    // The planner's view of the run: its knobs, each given, applied or planned.
    let plan = &manifest["plan"];
    assert!(
        plan["plan"]["knobs"]["synth_jobs"]["value"].is_u64(),
        "{manifest}"
    );
    assert!(
        plan["applied"].is_array() && plan["given"].is_array(),
        "{manifest}"
    );
    // How streamed sets go up, and whether the parameters were mapped (this run
    // decodes them: no --points-dir).
    assert!(
        plan["plan"]["knobs"]["stream_staging"]["value"].is_string(),
        "{manifest}"
    );
    assert_eq!(plan["plan"]["hardware"]["mapped"], false, "{manifest}");
    assert!(
        plan["planned"]
            .as_array()
            .unwrap()
            .iter()
            .any(|k| k == "synth_jobs"),
        "{manifest}"
    );
}

/// `cuzk bench` with the wgpu plugin's shipped configuration (README: "the
/// portable backend") runs: the planner, which models the CUDA backend, applies
/// none of its knobs to it (it once set `abc_on_backend = true`, which the wgpu
/// backend cannot honour, and the run refused to start). On the software Vulkan
/// the suite runs with (lavapipe), or a real GPU's.
#[test]
fn the_wgpu_plugins_shipped_config_runs_unplanned() {
    let dir = tempfile::tempdir().unwrap();
    // The shipped file, on a machine described as an 80 GiB card (what the
    // planner saw on the H100 where the run refused to start).
    let shipped = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs/wgpu.toml");
    let config = dir.path().join("wgpu.toml");
    std::fs::write(
        &config,
        std::fs::read_to_string(shipped).unwrap() + "\n[plan]\ndevice_memory_gib = 80\n",
    )
    .unwrap();
    let (text, manifest) = bench(dir.path(), &config);
    assert!(text.contains("s/proof"), "{text}");
    assert!(
        text.contains("the planner models the CUDA backend"),
        "{text}"
    );
    assert_eq!(
        manifest["plan"]["applied"],
        serde_json::json!([]),
        "{manifest}"
    );
}
