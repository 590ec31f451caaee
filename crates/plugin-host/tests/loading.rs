//! Finding and loading plugins, and every way a bad one is refused with a clear
//! error instead of a crash.

mod common;

use std::collections::BTreeMap;

use common::{lib_path, plugin_dir};
use cuzk_plugin_host::{
    check_plugin, list_plugins, load_backend, load_dealloc, load_gpu_lock, load_throttle,
    BackendNeeds, Kind, PluginError, PluginSpec, SearchPath, ABI_VERSION,
};

fn search() -> SearchPath {
    SearchPath::dir(plugin_dir())
}

#[test]
fn lists_every_shipped_plugin_and_no_fixture() {
    let listed = list_plugins(plugin_dir());
    let mut got: Vec<(String, String)> = Vec::new();
    for r in &listed {
        let info = r
            .as_ref()
            .unwrap_or_else(|e| panic!("a shipped plugin failed its check: {e}"));
        assert_eq!(info.abi_version, ABI_VERSION);
        assert!(!info.description.is_empty());
        assert_eq!(
            info.capabilities.is_some() || info.unavailable.is_some(),
            info.kind == Kind::BACKEND
        );
        got.push((info.kind.as_str().to_string(), info.name.clone()));
    }
    let want = [
        ("backend", "cpu"),
        ("backend", "cuda"),
        ("backend", "wgpu"),
        ("dealloc", "bounded"),
        ("dealloc", "detached"),
        ("dealloc", "inline"),
        ("gpu_lock", "single"),
        ("gpu_lock", "split"),
        ("throttle", "flag"),
        ("throttle", "off"),
    ];
    for (k, n) in want {
        assert!(
            got.contains(&(k.to_string(), n.to_string())),
            "{k}/{n} not listed in {got:?}"
        );
    }
    assert!(
        got.iter().all(|(_, n)| n != "faulty" && n != "future"),
        "fixtures listed: {got:?}"
    );

    let cpu = check_plugin(&lib_path("cuzk_plugin_backend_cpu")).unwrap();
    let caps = cpu.capabilities.unwrap();
    assert_eq!((caps.name.as_str(), caps.g2), ("cpu", true));
    assert_eq!(cpu.params[0].name, "threads");
}

#[test]
fn a_missing_file_or_name_says_where_it_looked() {
    let e = load_dealloc(
        &PluginSpec::new("/nonexistent/libcuzk_plugin_dealloc_x.so"),
        &search(),
    )
    .unwrap_err();
    assert!(matches!(e, PluginError::Missing { .. }), "{e}");
    assert!(e.to_string().contains("does not exist"), "{e}");

    let e = load_dealloc(&PluginSpec::new("nosuch"), &search()).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, PluginError::NotFound { .. }), "{msg}");
    assert!(msg.contains("libcuzk_plugin_dealloc_nosuch.so"), "{msg}");
    assert!(msg.contains(&plugin_dir().display().to_string()), "{msg}");

    let e = check_plugin(std::path::Path::new("/nonexistent.so")).unwrap_err();
    assert!(matches!(e, PluginError::Missing { .. }), "{e}");
}

#[test]
fn a_file_that_is_not_a_library_or_not_a_plugin_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("libcuzk_plugin_dealloc_fake.so");
    std::fs::write(&fake, b"this is not an ELF file").unwrap();
    let e = load_dealloc(&PluginSpec::new("fake"), &SearchPath::dir(dir.path())).unwrap_err();
    assert!(matches!(e, PluginError::Open { .. }), "{e}");
    assert!(
        e.to_string()
            .contains("could not be loaded as a shared library"),
        "{e}"
    );
    // A broken file in a plugin directory is listed with its error, not hidden.
    let listed = list_plugins(dir.path());
    assert_eq!(listed.len(), 1);
    assert!(listed[0].is_err());

    let e = check_plugin(&lib_path("cuzk_fixture_not_plugin")).unwrap_err();
    assert!(matches!(e, PluginError::NotAPlugin { .. }), "{e}");
    assert!(e.to_string().contains("is not a cuzk plugin"), "{e}");
}

#[test]
fn a_plugin_built_against_another_abi_version_is_refused_by_version() {
    let path = lib_path("cuzk_fixture_abi_mismatch");
    let e = check_plugin(&path).unwrap_err();
    match &e {
        PluginError::AbiVersion {
            found, expected, ..
        } => {
            assert_eq!((*found, *expected), (ABI_VERSION + 1, ABI_VERSION));
        }
        other => panic!("expected an ABI version error, got: {other}"),
    }
    let msg = e.to_string();
    assert!(
        msg.contains(&format!("ABI version {}", ABI_VERSION + 1)) && msg.contains("rebuild"),
        "{msg}"
    );
    let spec = PluginSpec::new(path.to_str().unwrap());
    assert!(matches!(
        load_dealloc(&spec, &search()),
        Err(PluginError::AbiVersion { .. })
    ));
}

#[test]
fn a_plugin_of_another_kind_is_refused() {
    let path = lib_path("cuzk_plugin_dealloc_inline");
    let spec = PluginSpec::new(path.to_str().unwrap());
    let e = load_backend(&spec, &search(), &BackendNeeds::default()).unwrap_err();
    assert!(
        e.to_string()
            .contains("is a dealloc plugin, but a backend plugin was asked for"),
        "{e}"
    );
    assert!(matches!(
        load_throttle(&spec, &search()),
        Err(PluginError::WrongKind { .. })
    ));
    assert!(matches!(
        load_gpu_lock(&spec, &search()),
        Err(PluginError::WrongKind { .. })
    ));
}

#[test]
fn unknown_and_invalid_parameters_are_errors() {
    let e = load_dealloc(
        &PluginSpec::new("bounded").with_param("dpeth", "3"),
        &search(),
    )
    .unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, PluginError::UnknownParameter { .. }), "{msg}");
    assert!(msg.contains("`dpeth`") && msg.contains("depth"), "{msg}");

    let e = load_dealloc(
        &PluginSpec::new("inline").with_param("depth", "3"),
        &search(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("takes no parameters"), "{e}");

    let e = load_dealloc(
        &PluginSpec::new("bounded").with_param("depth", "lots"),
        &search(),
    )
    .unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, PluginError::Rejected { .. }), "{msg}");
    assert!(msg.contains("`depth` = `lots`"), "{msg}");

    let e = load_throttle(
        &PluginSpec::new("flag").with_param("check_every", "0"),
        &search(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("at least 1"), "{e}");
}

#[test]
fn a_backend_lacking_a_needed_capability_is_refused() {
    let needs = BackendNeeds {
        log_domain: Some(63),
        ..Default::default()
    };
    let e = load_backend(&PluginSpec::new("cpu"), &search(), &needs).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, PluginError::MissingCapability { .. }), "{msg}");
    assert!(msg.contains("2^63"), "{msg}");

    let faulty = PluginSpec::new(lib_path("cuzk_fixture_faulty_backend").to_str().unwrap());
    let needs = BackendNeeds {
        g2: true,
        ..Default::default()
    };
    let e = load_backend(&faulty, &search(), &needs).unwrap_err();
    assert!(e.to_string().contains("G2"), "{e}");
    let needs = BackendNeeds {
        resident_bases: true,
        ..Default::default()
    };
    assert!(load_backend(&PluginSpec::new("cpu"), &search(), &needs).is_err());
    // What it does offer loads.
    let needs = BackendNeeds {
        log_domain: Some(10),
        ..Default::default()
    };
    load_backend(&faulty, &search(), &needs).unwrap();
}

#[test]
fn a_plugin_that_panics_while_being_created_is_an_error() {
    let spec = PluginSpec::new(lib_path("cuzk_fixture_faulty_backend").to_str().unwrap())
        .with_param("mode", "panic_on_new");
    let e = load_backend(&spec, &search(), &BackendNeeds::default()).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, PluginError::Panicked { .. }), "{msg}");
    assert!(
        msg.contains("panicked in instantiate") && msg.contains("while being created"),
        "{msg}"
    );
}

/// Each slot's plugin loads by name from a directory, with its parameters (what
/// `cuzk-config` does for a `cuzk.toml`).
#[test]
fn every_kind_loads_by_name_with_params() {
    let s = SearchPath::dir(plugin_dir());
    let b = load_backend(
        &PluginSpec::new("cpu").with_param("threads", "1"),
        &s,
        &BackendNeeds::default(),
    )
    .unwrap();
    assert_eq!(b.plugin_name(), "cpu");
    let spec = PluginSpec::new("bounded").with_param("depth", "2");
    assert_eq!(load_dealloc(&spec, &s).unwrap().plugin_name(), "bounded");
    let spec = PluginSpec::new("off");
    assert_eq!(load_throttle(&spec, &s).unwrap().plugin_name(), "off");
    let spec = PluginSpec::new("single");
    assert_eq!(load_gpu_lock(&spec, &s).unwrap().plugin_name(), "single");
    let _: BTreeMap<String, String> = spec.params;
}
