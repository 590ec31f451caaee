//! `cuzk serve` as a process: `cuzk client` proves through it, and SIGTERM stops
//! it with exit status 0, its Unix socket removed.

use std::{
    io::{BufRead, BufReader},
    process::{Command, Stdio},
};

#[test]
fn serve_proves_for_the_client_and_exits_zero_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("cuzk.sock");
    let params = std::env::temp_dir().join("cuzk-daemon-test-params");
    let cfg = dir.path().join("cuzk.toml");
    std::fs::write(
        &cfg,
        format!(
            "[engine]\nsynth_threads = 2\ngpu_threads = 1\nmemory_budget_gib = 1.0\n\
             [daemon]\nlisten = \"unix://{}\"\nsynthetic = true\nparam_cache = \"{}\"\n",
            sock.display(),
            params.display()
        ),
    )
    .unwrap();
    let exe = env!("CARGO_BIN_EXE_cuzk");
    let mut daemon = Command::new(exe)
        .args(["serve", "--config"])
        .arg(&cfg)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(daemon.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap()
        .to_owned();
    assert_eq!(addr, format!("unix://{}", sock.display()));

    let proof = dir.path().join("proof.bin");
    let client = Command::new(exe)
        .args([
            "client",
            "--addr",
            &addr,
            "synthetic",
            "--log",
            "10",
            "--partitions",
            "2",
            "--out",
        ])
        .arg(&proof)
        .output()
        .unwrap();
    assert!(
        client.status.success(),
        "{}",
        String::from_utf8_lossy(&client.stderr)
    );
    assert_eq!(std::fs::read(&proof).unwrap().len(), 2 * 192);
    let status = Command::new(exe)
        .args(["client", "--addr", &addr, "status"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(text.contains("proofs completed 1"), "{text}");
    assert!(text.contains("synthetic-mul-10"), "{text}");

    let kill = Command::new("kill")
        .args(["-TERM", &daemon.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let exit = daemon.wait().unwrap();
    assert_eq!(exit.code(), Some(0), "{exit:?}");
    assert!(!sock.exists(), "the socket file is left behind");
}
