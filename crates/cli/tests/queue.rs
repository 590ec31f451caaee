//! `cuzk worker` processes against a real PostgreSQL (the server of
//! `CUZK_TEST_PG_URL`, from `scripts/ci-postgres.sh`): many workers proving many
//! jobs once each (holding nothing per job once it is written back), a worker
//! killed with SIGKILL mid-job, a worker stopped with SIGTERM mid-job (finishing
//! or releasing its job, exiting 0), a bad job failing after its retries, and
//! workers riding out a restart of the server (on a private cluster, so other
//! tests' server is left alone). Every proof is checked with
//! bellperson's verifier here, and a wrong public input must fail.

#[path = "../../queue/tests/common/mod.rs"]
mod common;

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::OnceLock,
    time::{Duration, Instant},
};

use bellperson::groth16::{Parameters, Proof};
use blstrs::Bls12;
use cuzk_circuits::{AnyCircuit, Builtin};
use cuzk_queue::{JobState, JobStatus, Queue};

const LOG: u32 = 10;
/// Long enough for anything these tests do to finish on a loaded 2-core
/// machine; a test that reaches it failed.
const PATIENCE: Duration = Duration::from_secs(300);

fn cuzk() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cuzk"))
}

/// A parameter cache every worker of this test binary shares, filled once (by
/// `cuzk prove`, the same code the workers use), and the parameters in it.
fn cache() -> &'static (PathBuf, Parameters<Bls12>) {
    static C: OnceLock<(PathBuf, Parameters<Bls12>)> = OnceLock::new();
    C.get_or_init(|| {
        let dir =
            std::env::temp_dir().join(format!("cuzk-queue-test-cache-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let out = cuzk()
            .args([
                "prove",
                "--circuit",
                "mul",
                "--log",
                &LOG.to_string(),
                "--cache-dir",
            ])
            .arg(&dir)
            .arg("--out")
            .arg(dir.join("warmup.proof"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "cuzk prove: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let params = cuzk_params::read_params(
            &dir.join(format!("cuzk-mul-2^{LOG}.params")),
            cuzk_params::Validation::None,
        )
        .unwrap();
        (dir, params)
    })
}

/// A `cuzk worker` process, killed when dropped; its stderr goes to a file.
struct WorkerProc {
    child: Child,
    id: String,
    log: PathBuf,
}

impl WorkerProc {
    fn start(url: &str, id: &str, lease_secs: f64) -> WorkerProc {
        Self::start_in(url, id, lease_secs, &[], &[])
    }

    /// With extra environment (Filecoin's parameter folder) and flags.
    fn start_in(
        url: &str,
        id: &str,
        lease_secs: f64,
        env: &[(&str, &Path)],
        flags: &[&str],
    ) -> WorkerProc {
        // Tests run in parallel and reuse worker ids ("w1"): each worker gets a
        // log of its own, or one test's workers write into another's log.
        static STARTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (dir, _) = cache();
        let log = dir.join(format!("{id}-{}-{n}.log", std::process::id()));
        let child = cuzk()
            .envs(env.iter().map(|(k, v)| (*k, v.as_os_str())))
            .args(["worker", "--queue", url, "--id", id])
            .args(["--lease-secs", &lease_secs.to_string(), "--poll-ms", "100"])
            .args([
                "--jobs-in-flight",
                "1",
                "--synth-jobs",
                "1",
                "--synth-threads",
                "1",
            ])
            .args(["--gpu-workers", "1", "--gpu-threads", "1"])
            .args(flags)
            .arg("--cache-dir")
            .arg(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        WorkerProc {
            child,
            id: id.into(),
            log,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Sends `signal` (`TERM`, `INT`) and waits for the process to exit.
    fn signal_and_wait(&mut self, signal: &str) -> std::process::ExitStatus {
        let ok = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(ok.success(), "kill -{signal}");
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                start.elapsed() < PATIENCE,
                "worker {} still running {PATIENCE:?} after SIG{signal}:\n{}",
                self.id,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn kill(&mut self) {
        // SIGKILL: no chance to finish, write back or release anything.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for WorkerProc {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_file(&self.log);
    }
}

/// `cuzk queue submit synthetic ...`: the new jobs' ids.
fn submit(url: &str, seed: u64, partitions: u32, count: u32, extra: &[&str]) -> Vec<i64> {
    let out = cuzk()
        .args(["queue", "submit", "--queue", url])
        .args(extra)
        .args(["synthetic", "--circuit", "mul", "--log", &LOG.to_string()])
        .args([
            "--seed",
            &seed.to_string(),
            "--partitions",
            &partitions.to_string(),
        ])
        .args(["--count", &count.to_string()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cuzk queue submit: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect()
}

/// Waits until `ids` are all final, or fails the test with the workers' logs.
fn wait_all(q: &mut Queue, ids: &[i64], workers: &[&WorkerProc]) -> Vec<JobStatus> {
    q.wait(ids, Duration::from_millis(100), Some(PATIENCE))
        .unwrap()
        .unwrap_or_else(|| {
            let logs: Vec<String> = workers.iter().map(|w| w.log()).collect();
            panic!(
                "jobs not finished after {PATIENCE:?}; worker logs:\n{}",
                logs.join("\n---\n")
            )
        })
}

/// Checks a synthetic job's proof bytes: `partitions` proofs, each verifying for
/// its own public inputs and not for another partition's.
fn check_proof(bytes: &[u8], seed: u64, partitions: u32) {
    let (_, params) = cache();
    assert_eq!(bytes.len(), 192 * partitions as usize);
    for p in 0..partitions {
        let proof = Proof::<Bls12>::read(&bytes[192 * p as usize..]).unwrap();
        let inputs = |s: u64| {
            AnyCircuit::new(Builtin::MulChain, LOG, Some(s))
                .unwrap()
                .public_inputs()
                .unwrap()
        };
        let s = seed + p as u64;
        assert!(
            cuzk::verify(&params.vk, &proof, &inputs(s)).unwrap(),
            "seed {s}"
        );
        assert!(!cuzk::verify(&params.vk, &proof, &inputs(s + 1_000_000)).unwrap());
    }
}

fn job_seed(status: &JobStatus, first_seed: u64, first_id: i64, partitions: u32) -> u64 {
    first_seed + (status.id - first_id) as u64 * partitions as u64
}

#[test]
fn three_workers_prove_thirty_jobs_each_once() {
    let Some(url) = common::fresh_database("three") else {
        return;
    };
    cache();
    let workers: Vec<WorkerProc> = (0..3)
        .map(|i| WorkerProc::start(&url, &format!("w{i}"), 10.0))
        .collect();
    let ids = submit(&url, 1, 1, 30, &[]);
    assert_eq!(ids.len(), 30);
    let mut q = Queue::connect(&url).unwrap();
    let refs: Vec<&WorkerProc> = workers.iter().collect();
    let all = wait_all(&mut q, &ids, &refs);
    let mut by_worker: HashMap<String, usize> = HashMap::new();
    for s in &all {
        assert_eq!(s.state, JobState::Done, "job {}: {:?}", s.id, s.errors);
        // Done once: one claim, one write, no errors.
        assert_eq!((s.attempts, s.writes), (1, 1), "job {}", s.id);
        assert!(s.errors.is_empty(), "{:?}", s.errors);
        check_proof(s.proof.as_ref().unwrap(), job_seed(s, 1, ids[0], 1), 1);
        *by_worker.entry(s.done_by.clone().unwrap()).or_default() += 1;
    }
    eprintln!("jobs per worker: {by_worker:?}");
    for w in by_worker.keys() {
        assert!(workers.iter().any(|p| &p.id == w), "unknown worker {w}");
    }
    // Nothing per job is kept once it is written back: after every job (30 over
    // the three), each worker holds no TIMELINE events and no engine job.
    for w in &workers {
        let log = w.log();
        let done: Vec<&str> = log.lines().filter(|l| l.contains(" done in ")).collect();
        assert_eq!(
            done.len(),
            by_worker.get(&w.id).copied().unwrap_or(0),
            "{log}"
        );
        for line in done {
            assert!(
                line.ends_with("(held: 0 timeline events, 0 engine jobs)"),
                "{line}"
            );
        }
    }

    // `cuzk queue wait` writes the same proofs and exits 0.
    let out_dir = cache().0.join(format!("three-{}", std::process::id()));
    let out = cuzk()
        .args(["queue", "wait", "--queue", &url, "--out"])
        .arg(&out_dir)
        .args(ids.iter().map(|i| i.to_string()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for s in &all {
        let written = std::fs::read(out_dir.join(format!("{}.proof", s.id))).unwrap();
        assert_eq!(Some(&written), s.proof.as_ref());
    }
    std::fs::remove_dir_all(&out_dir).unwrap();
}

#[test]
fn a_worker_killed_mid_job_loses_it_to_another_after_its_lease() {
    let Some(url) = common::fresh_database("kill") else {
        return;
    };
    cache();
    let seed = 5000;
    let (mut doomed, long, short) = worker_mid_job(&url, "doomed", 2.0, seed, &[]);
    let mut q = Queue::connect(&url).unwrap();
    doomed.kill();
    let s = q.status(long).unwrap();
    assert_eq!(
        s.state,
        JobState::Running,
        "the job finished before the kill; make it longer. Log:\n{}",
        doomed.log()
    );
    // Two more workers; small jobs go on meanwhile.
    let others = [
        WorkerProc::start(&url, "w1", 2.0),
        WorkerProc::start(&url, "w2", 2.0),
    ];
    let mut small = submit(&url, 2, 1, 4, &[]);
    small.insert(0, short);
    let refs: Vec<&WorkerProc> = others.iter().collect();
    let s = &wait_all(&mut q, &[long], &refs)[0];
    assert_eq!(s.state, JobState::Done, "{:?}", s.errors);
    assert_eq!(s.attempts, 2);
    assert!(
        matches!(s.done_by.as_deref(), Some("w1" | "w2")),
        "{:?}",
        s.done_by
    );
    assert_eq!(s.writes, 1);
    assert_eq!(s.errors.len(), 1);
    assert!(
        s.errors[0].contains("attempt 1 on doomed: lease expired"),
        "{:?}",
        s.errors
    );
    check_proof(s.proof.as_ref().unwrap(), seed, 64);
    // The short job (seed 1), then four more from seed 2.
    for s in wait_all(&mut q, &small, &refs) {
        assert_eq!(s.state, JobState::Done);
        check_proof(s.proof.as_ref().unwrap(), job_seed(&s, 1, small[0], 1), 1);
    }
}

/// Starts worker `id` alone, submits a long job (64 partitions, seconds of
/// proving; seed `seed`) and a short one (seed 1), and returns once the worker
/// is proving the long one: (worker, long job, short job).
fn worker_mid_job(
    url: &str,
    id: &str,
    lease_secs: f64,
    seed: u64,
    flags: &[&str],
) -> (WorkerProc, i64, i64) {
    let w = WorkerProc::start_in(url, id, lease_secs, &[], flags);
    let long = submit(url, seed, 64, 1, &["--priority", "high"])[0];
    let short = submit(url, 1, 1, 1, &[])[0];
    let mut q = Queue::connect(url).unwrap();
    let start = Instant::now();
    loop {
        let s = q.status(long).unwrap();
        if s.state == JobState::Running {
            assert_eq!(s.worker.as_deref(), Some(id));
            break;
        }
        assert!(start.elapsed() < PATIENCE, "never claimed: {}", w.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    // Mid-job: claimed, proving, not finished.
    std::thread::sleep(Duration::from_millis(300));
    (w, long, short)
}

#[test]
fn a_worker_stopped_by_sigterm_mid_job_finishes_it_and_exits_0() {
    let Some(url) = common::fresh_database("sigterm_finish") else {
        return;
    };
    cache();
    let seed = 9000;
    let (mut w, long, short) = worker_mid_job(&url, "w", 10.0, seed, &[]);
    let status = w.signal_and_wait("TERM");
    let log = w.log();
    assert!(status.success(), "{status:?}\n{log}");
    assert!(
        log.contains("stopping: claiming nothing more; 1 job(s) held, on stop finish"),
        "{log}"
    );
    let mut q = Queue::connect(&url).unwrap();
    let s = q.status(long).unwrap();
    // Done once, by the stopped worker, before it exited.
    assert_eq!(
        (s.state, s.attempts, s.writes),
        (JobState::Done, 1, 1),
        "{:?}\n{log}",
        s.errors
    );
    assert_eq!(s.done_by.as_deref(), Some("w"));
    assert!(s.errors.is_empty(), "{:?}", s.errors);
    check_proof(s.proof.as_ref().unwrap(), seed, 64);
    // It claimed nothing after the signal.
    let s = q.status(short).unwrap();
    assert_eq!((s.state, s.attempts), (JobState::Queued, 0), "{log}");
}

#[test]
fn a_worker_stopped_by_sigterm_mid_job_releases_it_as_configured_and_exits_0() {
    let Some(url) = common::fresh_database("sigterm_release") else {
        return;
    };
    cache();
    // `[queue] on_stop = "release"` from cuzk.toml, as a provider would set it.
    let config = cache()
        .0
        .join(format!("release-{}.toml", std::process::id()));
    std::fs::write(&config, "[queue]\non_stop = \"release\"\n").unwrap();
    let config_arg = config.to_str().unwrap();
    let seed = 9100;
    let (mut w, long, short) = worker_mid_job(&url, "w", 10.0, seed, &["--config", config_arg]);
    let status = w.signal_and_wait("TERM");
    let log = w.log();
    assert!(status.success(), "{status:?}\n{log}");
    assert!(
        log.contains(&format!("job {long} released to the queue unfinished")),
        "{log}"
    );
    let mut q = Queue::connect(&url).unwrap();
    // Back in the queue, its attempt not counted, nothing written.
    let s = q.status(long).unwrap();
    assert_eq!(
        (s.state, s.attempts, s.writes),
        (JobState::Queued, 0, 0),
        "{log}"
    );
    assert!(s.worker.is_none() && s.errors.is_empty(), "{s:?}");
    // Another worker proves both, each once.
    let next = WorkerProc::start(&url, "next", 10.0);
    let all = wait_all(&mut q, &[long, short], &[&next]);
    for s in &all {
        assert_eq!(
            (s.state, s.attempts, s.writes),
            (JobState::Done, 1, 1),
            "{:?}",
            s.errors
        );
        assert_eq!(s.done_by.as_deref(), Some("next"));
    }
    check_proof(all[0].proof.as_ref().unwrap(), seed, 64);
    check_proof(all[1].proof.as_ref().unwrap(), 1, 1);
    std::fs::remove_file(&config).unwrap();
}

#[test]
fn a_bad_job_fails_with_its_error_after_its_retries() {
    let Some(url) = common::fresh_database("bad") else {
        return;
    };
    cache();
    let w = WorkerProc::start(&url, "w", 10.0);
    let mut q = Queue::connect(&url).unwrap();
    // log 3: below the circuits' smallest size; the input is JSON, but bad.
    let bad_input = cache().0.join(format!("bad-{}.json", std::process::id()));
    std::fs::write(
        &bad_input,
        r#"{"circuit":"mul","log":3,"seed":1,"partitions":1}"#,
    )
    .unwrap();
    let out = cuzk()
        .args(["queue", "submit", "--queue", &url, "--max-attempts", "3"])
        .args(["raw", "--kind", "synthetic"])
        .arg(&bad_input)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bad: i64 = String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let good = submit(&url, 77, 2, 1, &[])[0];
    let all = wait_all(&mut q, &[bad, good], &[&w]);
    let (b, g) = (&all[0], &all[1]);
    assert_eq!(
        (b.state, b.attempts),
        (JobState::Failed, 3),
        "{:?}",
        b.errors
    );
    assert_eq!(b.errors.len(), 3);
    for (i, e) in b.errors.iter().enumerate() {
        assert!(
            e.starts_with(&format!(
                "attempt {} on w: the synthetic job's circuit",
                i + 1
            )),
            "{e}"
        );
        assert!(e.contains("10"), "the circuit's error names its range: {e}");
    }
    assert!(b.proof.is_none());
    assert_eq!(g.state, JobState::Done);
    check_proof(g.proof.as_ref().unwrap(), 77, 2);
    // `cuzk queue wait` reports the failure with a non-zero exit.
    let out = cuzk()
        .args([
            "queue",
            "wait",
            "--queue",
            &url,
            &bad.to_string(),
            &good.to_string(),
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("1 of 2 jobs failed"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::remove_file(&bad_input).unwrap();
}

/// A PostgreSQL cluster of this test's own (so restarting it disturbs no other
/// test), stopped and removed when dropped.
struct PrivateServer {
    dir: PathBuf,
    url: String,
}

fn ci_postgres(cmd: &str, dir: &Path) -> String {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/ci-postgres.sh");
    let out = Command::new("bash")
        .args([script, cmd])
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ci-postgres.sh {cmd}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

impl PrivateServer {
    fn start() -> PrivateServer {
        let dir = std::env::temp_dir().join(format!("cuzk-pg-restart-{}", std::process::id()));
        let url = ci_postgres("start", &dir);
        PrivateServer { dir, url }
    }
    fn restart(&self) {
        ci_postgres("restart", &self.dir);
    }
}

impl Drop for PrivateServer {
    fn drop(&mut self) {
        ci_postgres("stop", &self.dir);
    }
}

#[test]
fn workers_ride_out_a_postgres_restart() {
    // The shared server's presence says whether this machine runs the queue's
    // tests at all.
    if common::fresh_database("restart_probe").is_none() {
        return;
    }
    cache();
    let server = PrivateServer::start();
    let url = server.url.clone();
    let workers = [
        WorkerProc::start(&url, "w1", 5.0),
        WorkerProc::start(&url, "w2", 5.0),
    ];
    let refs: Vec<&WorkerProc> = workers.iter().collect();
    let before = submit(&url, 1, 2, 10, &[]);
    let mut q = Queue::connect(&url).unwrap();
    // Some done, some not, when the server goes down.
    let start = Instant::now();
    while q.counts().unwrap()[2] < 2 {
        assert!(start.elapsed() < PATIENCE, "{}", workers[0].log());
        std::thread::sleep(Duration::from_millis(50));
    }
    server.restart();
    // The old connection is gone; a new one sees the same queue.
    let mut q = Queue::connect(&url).unwrap();
    let after = submit(&url, 1001, 1, 5, &[]);
    let all: Vec<i64> = before.iter().chain(&after).copied().collect();
    let statuses = wait_all(&mut q, &all, &refs);
    for s in &statuses {
        assert_eq!(s.state, JobState::Done, "job {}: {:?}", s.id, s.errors);
        let (seed, parts) = if s.id <= *before.last().unwrap() {
            (job_seed(s, 1, before[0], 2), 2)
        } else {
            (job_seed(s, 1001, after[0], 1), 1)
        };
        check_proof(s.proof.as_ref().unwrap(), seed, parts);
    }
    let reconnected = workers
        .iter()
        .filter(|w| w.log().contains("reconnected"))
        .count();
    assert!(
        reconnected >= 1,
        "no worker reconnected: {}",
        workers
            .iter()
            .map(|w| w.log())
            .collect::<Vec<_>>()
            .join("\n---\n")
    );
    drop(workers);
}

/// Filecoin's 2 KiB test parameters, generated once per build directory (shared
/// with cuzk-filecoin's tests), never downloaded.
fn filecoin_params() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("filecoin-params");
        // Before filecoin-proofs reads its settings (this process seals a sector).
        std::env::set_var(cuzk_filecoin::PARAMETER_CACHE_VAR, &dir);
        let kind = cuzk_filecoin::PorepKind::new(POREP).unwrap();
        cuzk_filecoin::ensure_params(&kind, &dir, 2026).unwrap();
        dir
    })
}

const POREP: cuzk_filecoin::RegisteredSealProof =
    cuzk_filecoin::RegisteredSealProof::StackedDrg2KiBV1_1;

#[test]
fn a_real_2kib_sectors_c2_goes_through_the_queue_and_verifies() {
    let Some(url) = common::fresh_database("porep") else {
        return;
    };
    cache();
    let params = filecoin_params();
    let work = tempfile::tempdir().unwrap();
    // A sector sealed here by filecoin-proofs, its C1 in the envelope Curio sends.
    let miner = 1000;
    let sealed = cuzk_filecoin::seal_test_sector(
        POREP,
        cuzk_filecoin::prover_id_from_miner(miner),
        7,
        11,
        work.path(),
    )
    .unwrap();
    let envelope =
        serde_json::to_vec(&cuzk_filecoin::Envelope::wrap(&sealed.c1_json, 7, 2048)).unwrap();
    let c1_path = work.path().join("c1-envelope.json");
    std::fs::write(&c1_path, &envelope).unwrap();

    let w = WorkerProc::start_in(
        &url,
        "fil",
        30.0,
        &[(cuzk_filecoin::PARAMETER_CACHE_VAR, params)],
        &[],
    );
    let out = cuzk()
        .args(["queue", "submit", "--queue", &url, "--priority", "high"])
        .args(["porep-c2", "--miner-id", &miner.to_string()])
        .arg(&c1_path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id: i64 = String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // A C1 that is not one is refused at submission.
    let out = cuzk()
        .args([
            "queue",
            "submit",
            "--queue",
            &url,
            "porep-c2",
            "--miner-id",
            "1000",
        ])
        .arg(work.path().join("nothing-here.json"))
        .output()
        .unwrap();
    assert!(!out.status.success());

    let mut q = Queue::connect(&url).unwrap();
    let s = &wait_all(&mut q, &[id], &[&w])[0];
    assert_eq!(s.state, JobState::Done, "{:?}\n{}", s.errors, w.log());
    assert_eq!((s.kind.as_str(), s.priority), ("porep-c2", 1));
    let proof = s.proof.as_ref().unwrap();
    assert_eq!(proof.len(), 192); // 2 KiB: one partition
    let input = cuzk_filecoin::parse_c1(&envelope).unwrap();
    cuzk_filecoin::verify_proof(
        &input,
        cuzk_filecoin::prover_id_from_miner(miner),
        None,
        proof,
        params,
    )
    .unwrap();
    // Not for another miner.
    assert!(cuzk_filecoin::verify_proof(
        &input,
        cuzk_filecoin::prover_id_from_miner(miner + 1),
        None,
        proof,
        params,
    )
    .is_err());
}
