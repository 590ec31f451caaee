//! What the Filecoin CLI tests share: the parameter directory (generated once per
//! build directory, shared with cuzk-filecoin's tests) and running the real binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use cuzk_filecoin::PARAMETER_CACHE_VAR;

pub fn param_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("filecoin-params")
}

/// Runs `cuzk args…` with the test parameter directory, echoing what it printed.
pub fn cuzk(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_cuzk"))
        .args(args)
        .env(PARAMETER_CACHE_VAR, param_dir())
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

/// Everything a run printed, stdout then stderr.
pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}
