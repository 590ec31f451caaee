//! Locating (and if needed building) the real plugin libraries for the tests.
//!
//! Tests load the `.so` files cargo builds, from the target directory this test
//! binary lives in (`<target>/<profile>/deps/<test>`). Cargo is asked to build them
//! once per test binary: a no-op when `cargo build --workspace` already did, and it
//! keeps a stale library from being tested after its source changed.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Every plugin and fixture package the tests load.
pub const PACKAGES: &[&str] = &[
    "cuzk-plugin-backend-cpu",
    "cuzk-plugin-backend-cuda",
    "cuzk-plugin-backend-wgpu",
    "cuzk-plugin-dealloc-inline",
    "cuzk-plugin-dealloc-detached",
    "cuzk-plugin-dealloc-bounded",
    "cuzk-plugin-throttle-off",
    "cuzk-plugin-throttle-flag",
    "cuzk-plugin-gpu-lock-single",
    "cuzk-plugin-gpu-lock-split",
    "cuzk-fixture-not-plugin",
    "cuzk-fixture-abi-mismatch",
    "cuzk-fixture-faulty-backend",
];

/// `<target>/<profile>`, where cargo put this test binary and the plugins.
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    exe.parent()
        .and_then(Path::parent)
        .expect("<target>/<profile>/deps/<test>")
        .to_path_buf()
}

pub fn target_dir() -> PathBuf {
    profile_dir()
        .parent()
        .expect("<target>/<profile>")
        .to_path_buf()
}

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

/// The directory holding freshly built plugins and fixtures.
pub fn plugin_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = profile_dir();
        let profile = match dir.file_name().and_then(|n| n.to_str()) {
            Some("debug") => "dev".to_string(),
            Some(p) => p.to_string(),
            None => "release".to_string(),
        };
        let mut cmd = cargo();
        cmd.current_dir(workspace_root())
            .args(["build", "--quiet", "--profile", &profile, "--target-dir"])
            .arg(target_dir());
        for p in PACKAGES {
            cmd.args(["-p", p]);
        }
        let status = cmd.status().expect("run cargo to build the plugins");
        assert!(status.success(), "building the plugins failed: {cmd:?}");
        dir
    })
}

/// The path of a built library, `lib<crate>.so`.
pub fn lib_path(crate_name: &str) -> PathBuf {
    plugin_dir().join(format!(
        "{}{crate_name}{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ))
}

/// Builds the out-of-tree vendor example the way its README says, into
/// `<target>/vendor-backend`, and returns the library.
pub fn vendor_example() -> PathBuf {
    let target = target_dir().join("vendor-backend");
    let manifest = workspace_root().join("examples/vendor-backend/Cargo.toml");
    let mut cmd = cargo();
    cmd.args(["build", "--quiet", "--release", "--manifest-path"])
        .arg(&manifest)
        .arg("--target-dir")
        .arg(&target)
        // The example is its own workspace; keep the outer build's settings out.
        .env_remove("CARGO_TARGET_DIR");
    let status = cmd.status().expect("run cargo to build the vendor example");
    assert!(
        status.success(),
        "building the vendor example failed: {cmd:?}"
    );
    target.join("release").join(format!(
        "{}cuzk_plugin_backend_vendor_example{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ))
}
