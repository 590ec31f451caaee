//! `apply_plan` on described machines: the knobs a run takes from the plan
//! where its configuration is silent, and the ones it keeps.

use super::*;
use crate::runtime::RunArgs;

fn configured(file: &str) -> crate::runtime::RunConfig {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs");
    RunArgs {
        config: Some(dir.join(file)),
        ..RunArgs::default()
    }
    .resolve()
    .unwrap()
}

fn porep_on(device_gib: u64, cfg: &crate::runtime::RunConfig) -> Plan {
    porep_mapped(device_gib, 128, false, cfg)
}

fn porep_mapped(
    device_gib: u64,
    host_gib: u64,
    mapped: bool,
    cfg: &crate::runtime::RunConfig,
) -> Plan {
    let hw = Hardware {
        device_memory: device_gib << 30,
        device_free: None,
        devices: 1,
        device_speed: None,
        host_memory: host_gib << 30,
        cgroup_limit: None,
        cores: 16,
        mapped,
        disk_read_bytes_per_s: None,
    };
    let given = given_of(&cfg.config).unwrap();
    cuzk_plan::plan(&Shape::filecoin_32gib(Kind::Porep), &hw, &given)
}

/// On a 16 GiB card the unset knobs that decide whether a PoRep partition
/// fits come from the plan (the CPU spmv, the NTT kernel without a table);
/// the file's own knobs stay.
#[test]
fn a_small_card_takes_the_plans_knobs_where_the_file_is_silent() {
    let mut cfg = configured("cuda.toml");
    let p = porep_on(16, &cfg);
    let (applied, reopen) = apply_plan(&mut cfg, &p);
    assert!(reopen);
    assert_eq!(applied, ["abc_on_backend", "ntt_kernel"]);
    assert_eq!(cfg.engine.abc_on_backend, Some(false));
    assert_eq!(cfg.engine.synth_jobs, Some(6), "the file's value stays");
    let params = cfg
        .config
        .backend
        .as_ref()
        .unwrap()
        .text_params("backend")
        .unwrap();
    assert_eq!(params["ntt_kernel"], "r2wf");
    // Given now: the plan made again keeps them.
    assert_eq!(given_of(&cfg.config).unwrap().abc_on_backend, Some(false));
}

/// On the H200 the plan is what the defaults already do: the backend is not
/// opened again.
#[test]
fn a_large_card_changes_no_backend_parameter() {
    let mut cfg = configured("cuda.toml");
    let p = porep_on(139, &cfg);
    let (applied, reopen) = apply_plan(&mut cfg, &p);
    assert!(!reopen, "{applied:?}");
    assert_eq!(applied, ["abc_on_backend"]);
    assert_eq!(cfg.engine.abc_on_backend, Some(true));
}

fn backend_params(cfg: &crate::runtime::RunConfig) -> std::collections::BTreeMap<String, String> {
    cfg.config
        .backend
        .as_ref()
        .unwrap()
        .text_params("backend")
        .unwrap()
}

/// Mapped parameters on a 64 GiB host with a 16 GB card: the streamed sets go
/// up by copy (page-locking them would pin the points file's pages beside
/// the partitions), set in the backend's parameters; the budget is the
/// engine's own. On 256 GiB they are page-locked in place (the backend's
/// default, not set) and the budget is cut by them, set in `[engine]`.
#[test]
fn mapped_parameters_take_the_planned_staging_and_budget() {
    let mut cfg = configured("cuda.toml");
    let p = porep_mapped(16, 64, true, &cfg);
    assert!(p.runs(), "{:?}", p.fails);
    let (applied, reopen) = apply_plan(&mut cfg, &p);
    assert!(reopen);
    assert!(applied.contains(&"stream_staging"), "{applied:?}");
    assert_eq!(backend_params(&cfg)["stream_staging"], "copy");
    let given = given_of(&cfg.config).unwrap();
    assert_eq!(given.stream_staging, Some(StreamStaging::Copy));

    let mut cfg = configured("cuda.toml");
    let p = porep_mapped(16, 256, true, &cfg);
    let (applied, _) = apply_plan(&mut cfg, &p);
    assert!(!applied.contains(&"stream_staging"), "{applied:?}");
    assert!(applied.contains(&"memory_budget_gib"), "{applied:?}");
    assert!(!backend_params(&cfg).contains_key("stream_staging"));
    let budget = cfg.engine.memory_budget.unwrap();
    assert!(budget <= p.knobs.memory_budget.value, "{budget}");
    assert!(budget + (1 << 20) > p.knobs.memory_budget.value, "{budget}");
    // Planned again with the applied knobs given, the same way still fits
    // (the budget read back is not a byte over the plan's).
    let q = porep_mapped(16, 256, true, &cfg);
    assert!(q.runs(), "{:?}", q.fails);
    assert_eq!(q.knobs.stream_staging.value, StreamStaging::Register);
}

/// The configuration's `stream_staging` is given, and a value that is not one
/// is refused by name.
#[test]
fn stream_staging_in_the_configuration_is_given() {
    let mut cfg = configured("cuda.toml");
    let slot = cfg.config.backend.as_mut().unwrap();
    slot.params
        .insert("stream_staging".into(), toml::Value::from("register"));
    let given = given_of(&cfg.config).unwrap();
    assert_eq!(given.stream_staging, Some(StreamStaging::Register));
    let p = porep_mapped(16, 64, true, &cfg);
    assert_eq!(p.knobs.stream_staging.source, Source::Given);
    assert!(
        !p.runs(),
        "register on 64 GiB pins 44 GB beside the partitions"
    );
    let slot = cfg.config.backend.as_mut().unwrap();
    slot.params
        .insert("stream_staging".into(), toml::Value::from("pinned"));
    let err = given_of(&cfg.config).unwrap_err().to_string();
    assert!(err.contains("stream_staging"), "{err}");
}

#[test]
fn a_card_held_by_another_process_is_named_in_the_plans_assumptions() {
    let gib = 1u64 << 30;
    let card = |free: u64| cuzk_gpu_backend::DeviceInfo {
        name: "NVIDIA H100 80GB HBM3".into(),
        total_memory: 80 * gib,
        free_memory: free,
    };
    // An idle card: only the CUDA context is missing from its free memory.
    assert_eq!(
        super::taken_by_others(&card(80 * gib - cuzk_plan::DEVICE_CONTEXT_BYTES)),
        None
    );
    assert_eq!(
        super::taken_by_others(&card(79 * gib + 512 * (1 << 20))),
        None
    );
    // The 2026-12-07 case: most of the card still held by a process that had exited.
    let note = super::taken_by_others(&card(22 * gib)).expect("58 GiB held by others");
    assert!(note.starts_with("57.4 of the card's 80.0 GiB"), "{note}");
    assert!(note.contains("--device-memory-gib"), "{note}");
}
