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
    // Evict frees the circuit's parameters once; a second evict finds nothing.
    let evict = |what: &str| {
        let out = Command::new(exe)
            .args(["client", "--addr", &addr, "evict", what])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let first = evict("synthetic-mul-10");
    assert!(first.contains("synthetic-mul-10: evicted, "), "{first}");
    assert!(!first.contains("evicted, 0 bytes"), "{first}");
    assert_eq!(
        evict("synthetic-mul-10"),
        "synthetic-mul-10: was not loaded\n"
    );

    let kill = Command::new("kill")
        .args(["-TERM", &daemon.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let exit = daemon.wait().unwrap();
    assert_eq!(exit.code(), Some(0), "{exit:?}");
    assert!(!sock.exists(), "the socket file is left behind");
}

/// A `cuzk serve` process on `cfg`, its address, and where its stderr goes.
struct Serve {
    child: std::process::Child,
    addr: String,
    stderr: std::path::PathBuf,
}

impl Serve {
    fn start(dir: &std::path::Path, name: &str, daemon_toml: &str) -> Serve {
        let sock = dir.join(format!("{name}.sock"));
        let cfg = dir.join(format!("{name}.toml"));
        // An empty parameter directory: a timing-only circuit needs no file.
        let params = dir.join("no-params");
        std::fs::create_dir_all(&params).unwrap();
        std::fs::write(
            &cfg,
            format!(
                "[engine]\nsynth_threads = 2\ngpu_threads = 1\nmemory_budget_gib = 8.0\n\
                 [daemon]\nlisten = \"unix://{}\"\nparam_cache = \"{}\"\n{daemon_toml}\n",
                sock.display(),
                params.display()
            ),
        )
        .unwrap();
        let stderr = dir.join(format!("{name}.err"));
        let mut child = Command::new(env!("CARGO_BIN_EXE_cuzk"))
            .args(["serve", "--config"])
            .arg(&cfg)
            .env("FIL_PROOFS_PARAMETER_CACHE", &params)
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("{line}: {}", std::fs::read_to_string(&stderr).unwrap()))
            .to_owned();
        Serve {
            child,
            addr,
            stderr,
        }
    }

    fn client(&self, args: &[&str]) -> std::process::Output {
        let out = Command::new(env!("CARGO_BIN_EXE_cuzk"))
            .args(["client", "--addr", &self.addr])
            .args(args)
            .output()
            .unwrap();
        eprintln!(
            "$ cuzk client {}\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    fn stop(mut self) -> String {
        let kill = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(kill.success());
        assert_eq!(self.child.wait().unwrap().code(), Some(0));
        std::fs::read_to_string(&self.stderr).unwrap()
    }
}

fn shape_only_envelope(dir: &std::path::Path, proof: &str) -> std::path::PathBuf {
    let c1 = dir.join(format!("{proof}.json"));
    let env = dir.join(format!("{proof}-envelope.json"));
    let out = Command::new(env!("CARGO_BIN_EXE_cuzk"))
        .args([
            "c1",
            "--shape-only",
            "--proof",
            proof,
            "--sector",
            "3",
            "-o",
        ])
        .arg(&c1)
        .arg("--envelope")
        .arg(&env)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    env
}

/// `timing_only_circuits = ["porep-2k"]`: a shape-only 2 KiB C1 is proved through
/// SubmitProof + AwaitProof (`cuzk client bench`) with no parameter file, COMPLETED
/// with the bytes of its partitions and marked timing-only in the answer, the
/// manifest, the status and the metrics; a circuit not listed (`porep-8m`) keeps
/// the real path and refuses shape-only input. The same daemon without the setting
/// refuses the 2 KiB one too (INVALID_ARGUMENT, saying why) and keeps serving, and
/// an id no kind knows stops the daemon at start.
#[test]
fn timing_only_circuits_prove_shape_only_c1s_unverified_and_only_those() {
    let dir = tempfile::tempdir().unwrap();
    let env_2k = shape_only_envelope(dir.path(), "StackedDrg2KiBV1_1");
    let env_8m = shape_only_envelope(dir.path(), "StackedDrg8MiBV1_1");
    let proof_len =
        cuzk_filecoin::PorepKind::new(cuzk_filecoin::RegisteredSealProof::StackedDrg2KiBV1_1)
            .unwrap()
            .proof_len();

    let d = Serve::start(
        dir.path(),
        "timing",
        "timing_only_circuits = [\"porep-2k\"]",
    );
    let bench_out = dir.path().join("bench");
    let out = d.client(&[
        "bench",
        "--c1",
        env_2k.to_str().unwrap(),
        "--jobs",
        "1",
        "--out",
        bench_out.to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{text}");
    assert!(text.contains("COMPLETED TIMING-ONLY"), "{text}");
    assert!(text.contains("s/proof"), "{text}");
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(bench_out.join("manifest.json")).unwrap()).unwrap();
    let job = &manifest["results"][0];
    assert_eq!(job["status"], "COMPLETED", "{manifest}");
    assert_eq!(job["timing_only"], true, "{manifest}");
    assert_eq!(job["proof_bytes"], proof_len, "{manifest}");
    assert_eq!(manifest["daemon_timing_only_circuits"][0], "porep-2k");
    assert_eq!(
        std::fs::read(bench_out.join("proof-1.bin")).unwrap().len(),
        proof_len
    );

    let status = d.client(&["status"]);
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(text.contains("TIMING-ONLY circuits"), "{text}");
    assert!(
        text.contains("porep-2k: ") && text.contains("(TIMING-ONLY: random points)"),
        "{text}"
    );
    let metrics = d.client(&["metrics"]);
    let text = String::from_utf8_lossy(&metrics.stdout);
    assert!(
        text.contains("cuzk_timing_only_circuit{circuit_id=\"porep-2k\"} 1"),
        "{text}"
    );
    assert!(text.contains("cuzk_timing_only_proofs_total 1"), "{text}");

    // porep-8m is not listed: real parameters, so a shape-only C1 is refused.
    let out = d.client(&[
        "prove",
        "--c1",
        env_8m.to_str().unwrap(),
        "--miner-id",
        "1000",
    ]);
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        text.contains("invalid argument")
            && text.contains("shape-only")
            && text.contains("porep-8m"),
        "{text}"
    );
    let log = d.stop();
    assert!(
        log.contains("WARNING: circuits porep-2k are TIMING-ONLY"),
        "{log}"
    );

    // The same daemon without the setting: refused before any work, still serving.
    let d = Serve::start(dir.path(), "real", "");
    let out = d.client(&[
        "prove",
        "--c1",
        env_2k.to_str().unwrap(),
        "--miner-id",
        "1000",
    ]);
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        text.contains("invalid argument")
            && text.contains("shape-only")
            && text.contains("porep-2k"),
        "{text}"
    );
    let status = d.client(&["status"]);
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(
        status.status.success() && !text.contains("TIMING-ONLY"),
        "{text}"
    );
    let log = d.stop();
    assert!(!log.contains("TIMING-ONLY"), "{log}");

    // An id no Filecoin kind knows: the daemon does not start.
    let cfg = dir.path().join("bad.toml");
    std::fs::write(
        &cfg,
        "[daemon]\nlisten = \"127.0.0.1:0\"\ntiming_only_circuits = [\"porep-3k\"]\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_cuzk"))
        .args(["serve", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        text.contains("porep-3k") && text.contains("timing_only_circuits"),
        "{text}"
    );
}

/// SIGTERM while a PreloadSRS is compiling a 32 GiB circuit (minutes on two cores):
/// the daemon stops `shutdown_timeout_s` after the signal with exit status 0, not
/// when the compile ends (before, the server's drain waited for that call and the
/// runtime for its blocking task: on the H200 it had to be killed).
#[test]
fn sigterm_during_a_long_preload_stops_the_daemon_at_its_shutdown_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let mut d = Serve::start(
        dir.path(),
        "preload",
        "timing_only_circuits = [\"porep-32g\"]\nshutdown = \"cancel\"\nshutdown_timeout_s = 2",
    );
    let mut preload = Command::new(env!("CARGO_BIN_EXE_cuzk"))
        .args(["client", "--addr", &d.addr, "preload", "porep-32g"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The compile is under way (it takes minutes here); then the signal.
    std::thread::sleep(std::time::Duration::from_secs(2));
    assert!(
        preload.try_wait().unwrap().is_none(),
        "the preload ended already"
    );
    let kill = Command::new("kill")
        .args(["-TERM", &d.child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    // Liveness, not speed: 2 s of drain and the engine's stop, well inside a minute.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let exit = loop {
        if let Some(s) = d.child.try_wait().unwrap() {
            break Some(s);
        }
        if std::time::Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let _ = preload.kill();
    let _ = preload.wait();
    let Some(exit) = exit else {
        let _ = d.child.kill();
        let _ = d.child.wait();
        panic!(
            "the daemon did not stop within 60 s of SIGTERM: {}",
            std::fs::read_to_string(&d.stderr).unwrap()
        );
    };
    assert_eq!(exit.code(), Some(0), "{exit:?}");
    let log = std::fs::read_to_string(&d.stderr).unwrap();
    assert!(log.contains("stopping without them"), "{log}");
}
