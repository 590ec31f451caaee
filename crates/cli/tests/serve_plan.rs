//! A daemon (`cuzk serve`) and a queue worker (`cuzk worker`) plan at start for
//! the shapes they serve: they log the plan `cuzk plan --config` prints for the
//! same configuration, word for word, take its knobs where the configuration is
//! silent and keep the ones it gives. On the CPU backend (no device) through
//! `[plan] device_memory_gib`, which plans for a described card.

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

const EXE: &str = env!("CARGO_BIN_EXE_cuzk");

/// A daemon configuration on the CPU backend: `engine` under `[engine]`, a 16 GiB
/// card described for the plan of PoRep and WinningPoSt. `a, b, c` stay on the
/// host (the CPU backend evaluates them nowhere else): given.
fn write_config(dir: &Path, name: &str, engine: &str) -> PathBuf {
    let params = dir.join("no-params");
    std::fs::create_dir_all(&params).unwrap();
    let cfg = dir.join(format!("{name}.toml"));
    std::fs::write(
        &cfg,
        format!(
            "[engine]\nsynth_threads = 2\ngpu_threads = 1\nabc_on_backend = false\n{engine}\n\
             [daemon]\nlisten = \"unix://{}\"\nparam_cache = \"{}\"\n\
             [plan]\nkinds = [\"porep\", \"winning\"]\ndevice_memory_gib = 16\n",
            dir.join(format!("{name}.sock")).display(),
            params.display()
        ),
    )
    .unwrap();
    cfg
}

/// `cuzk plan --config cfg`'s served block (from its heading to the end).
fn planned_block(cfg: &Path) -> String {
    planned_block_with(cfg, &[])
}

/// [`planned_block`] with more flags.
fn planned_block_with(cfg: &Path, flags: &[&str]) -> String {
    let out = Command::new(EXE)
        .args(["plan", "--config"])
        .arg(cfg)
        .args(flags)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    eprintln!(
        "$ cuzk plan --config\n{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success());
    let at = text
        .find("served together by cuzk serve and cuzk worker")
        .unwrap_or_else(|| panic!("no served block: {text}"));
    text[at..].to_string()
}

/// Runs `cuzk args…` with `cfg` and reads its stderr up to the line that names
/// the knobs taken from the plan, and the line after it (a daemon's: the engine
/// it started with); with `status`, a daemon's `cuzk client status` is appended
/// once it listens. Then kills it; what it logged.
fn logged_plan(args: &[&str], cfg: &Path, params: &Path, status: bool) -> String {
    let mut child = Command::new(EXE)
        .args(args)
        .arg("--config")
        .arg(cfg)
        .env("FIL_PROOFS_PARAMETER_CACHE", params)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut log = String::new();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    loop {
        let mut line = String::new();
        if err.read_line(&mut line).unwrap() == 0 {
            break;
        }
        log.push_str(&line);
        if line.contains("planned for this machine") {
            line.clear();
            err.read_line(&mut line).unwrap();
            log.push_str(&line);
            break;
        }
    }
    if status {
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("{line}: {log}"))
            .to_owned();
        let out = Command::new(EXE)
            .args(["client", "--addr", &addr, "status"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        log.push_str("$ cuzk client status\n");
        log.push_str(&String::from_utf8_lossy(&out.stdout));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    eprintln!("$ cuzk {}\n{log}", args.join(" "));
    log
}

/// The value and source of `knob` in a served block.
fn knob<'a>(block: &'a str, knob: &str) -> (&'a str, &'a str) {
    let row = block
        .lines()
        .find(|l| l.split_whitespace().next() == Some(knob))
        .unwrap_or_else(|| panic!("no {knob} row: {block}"));
    let cols: Vec<&str> = row.split_whitespace().collect();
    (cols[1], cols[2])
}

#[test]
fn the_daemon_logs_the_plan_cuzk_plan_prints_and_takes_its_unset_knobs() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_config(dir.path(), "silent", "");
    let block = planned_block(&cfg);
    assert!(block.contains("porep, winning at 32 GiB"), "{block}");
    assert!(block.contains("1 device(s) of 16.0 GiB"), "{block}");
    assert_eq!(knob(&block, "abc_on_backend"), ("false", "given"));
    let (workers, source) = knob(&block, "gpu_workers_per_device");
    assert_eq!(source, "planned");

    let log = logged_plan(&["serve"], &cfg, &dir.path().join("no-params"), true);
    let (logged, status) = log.split_once("$ cuzk client status").unwrap();
    assert!(logged.contains(&block), "the daemon's plan differs:\n{log}");
    assert!(
        status.contains(&format!("plan at start:\n{block}")),
        "GetStatus reports the plan: {status}"
    );
    let applied = log
        .lines()
        .find(|l| l.contains("planned for this machine"))
        .unwrap();
    assert!(applied.contains("gpu_workers_per_device"), "{applied}");
    assert!(!applied.contains("abc_on_backend"), "{applied}");
    assert!(
        log.contains(&format!("gpu_workers_per_device: {workers},")),
        "the engine runs with the planned workers: {log}"
    );
}

#[test]
fn an_explicit_knob_wins_over_the_daemons_plan() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_config(dir.path(), "given", "gpu_workers_per_device = 3");
    let block = planned_block(&cfg);
    assert_eq!(knob(&block, "gpu_workers_per_device"), ("3", "given"));
    let log = logged_plan(&["serve"], &cfg, &dir.path().join("no-params"), false);
    assert!(log.contains(&block), "the daemon's plan differs:\n{log}");
    let applied = log
        .lines()
        .find(|l| l.contains("planned for this machine"))
        .unwrap();
    assert!(!applied.contains("gpu_workers_per_device"), "{applied}");
    assert!(log.contains("gpu_workers_per_device: 3,"), "{log}");
}

/// A daemon whose `[daemon] points_dir` maps its parameters plans them mapped
/// (page cache, not anonymous memory), as `cuzk plan --config` does.
#[test]
fn a_daemon_with_points_dir_plans_its_parameters_mapped() {
    let dir = tempfile::tempdir().unwrap();
    let points = dir.path().join("points");
    let cfg = write_config(dir.path(), "mapped", "");
    let text = std::fs::read_to_string(&cfg).unwrap().replace(
        "[daemon]\n",
        &format!("[daemon]\npoints_dir = \"{}\"\n", points.display()),
    );
    std::fs::write(&cfg, text).unwrap();
    let block = planned_block(&cfg);
    assert!(block.contains("memory-mapped from points files"), "{block}");
    let log = logged_plan(&["serve"], &cfg, &dir.path().join("no-params"), false);
    assert!(log.contains(&block), "the daemon's plan differs:\n{log}");
}

/// A queue worker plans as the daemon does, before it reaches its queue (here one
/// that does not answer): with `--points-dir`, mapped, as `cuzk plan --points-dir`.
#[test]
fn the_worker_logs_the_same_plan() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_config(dir.path(), "worker", "");
    let params = dir.path().join("no-params");
    let points = dir.path().join("points");
    let points = points.to_str().unwrap();
    for flags in [&[][..], &["--points-dir", points][..]] {
        let block = planned_block_with(&cfg, flags);
        assert_eq!(
            block.contains("memory-mapped from points files"),
            !flags.is_empty(),
            "{block}"
        );
        let mut args = vec![
            "worker",
            "--queue",
            "postgres://cuzk@127.0.0.1:1/none",
            "--param-cache",
            params.to_str().unwrap(),
        ];
        args.extend_from_slice(flags);
        let log = logged_plan(&args, &cfg, &params, false);
        assert!(log.contains(&block), "the worker's plan differs:\n{log}");
    }
}
