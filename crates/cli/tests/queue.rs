//! `cuzk worker` processes against a real PostgreSQL (the server of
//! `CUZK_TEST_PG_URL`, from `scripts/ci-postgres.sh`): many workers proving many
//! jobs once each (holding nothing per job once it is written back), a worker
//! killed with SIGKILL mid-job, a worker stopped with SIGTERM mid-job (finishing
//! or releasing its job, exiting 0), a bad job failing after its retries, and
//! workers riding out a restart of the server (on a private cluster, so other
//! tests' server is left alone); every Filecoin kind (PoRep, SnapDeals,
//! WindowPoSt, WinningPoSt at 2 KiB, real sectors) submitted with `cuzk queue
//! submit` and proved by two workers at once through the proving service, then
//! cuzk's SEAL_AGGREGATE of two of those PoRep proofs, equal to `cuzk
//! aggregate`'s; a
//! worker paused past its lease losing its job (cancelled, its write refused);
//! idempotent submission; hostile payloads failing their job with a clear error.
//! Every proof is checked here (bellperson's verifier, filecoin-proofs' for the
//! Filecoin kinds), and a wrong public input must fail.

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
use cuzk_daemon::payload;
use cuzk_queue::{JobState, JobStatus, Queue, Submission};
use cuzk_service::{synthetic::SynthCircuit, ProofKind, ProofRequest};

/// Short synthetic jobs: 2^10 constraints a partition.
const LOG: u32 = 10;
/// Long synthetic jobs: 16 partitions (the synthetic kind's most) of 2^12, seconds
/// of proving on two cores.
const LONG_LOG: u32 = 12;
const LONG_PARTS: u32 = 16;
/// Long enough for anything these tests do to finish on a loaded 2-core
/// machine; a test that reaches it failed.
const PATIENCE: Duration = Duration::from_secs(300);

fn cuzk() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cuzk"))
}

/// A parameter cache every synthetic worker of this test binary shares, filled
/// once here by the synthetic kind itself (the code the workers run), and the
/// parameters in it, by log.
fn cache() -> &'static (PathBuf, HashMap<u32, Parameters<Bls12>>) {
    static C: OnceLock<(PathBuf, HashMap<u32, Parameters<Bls12>>)> = OnceLock::new();
    C.get_or_init(|| {
        let dir =
            std::env::temp_dir().join(format!("cuzk-queue-test-cache-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let kind = cuzk_service::synthetic::SyntheticKind::new(dir.clone());
        let params = [LOG, LONG_LOG]
            .into_iter()
            .map(|log| {
                let p = kind.params(&format!("synthetic-mul-{log}")).unwrap();
                (log, (*p.params).clone())
            })
            .collect();
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
        Self::start_in(url, id, lease_secs, &cache().0, &[])
    }

    /// With a parameter folder (Filecoin's, for the Filecoin kinds) and flags.
    fn start_in(
        url: &str,
        id: &str,
        lease_secs: f64,
        param_cache: &Path,
        flags: &[&str],
    ) -> WorkerProc {
        // Tests run in parallel and reuse worker ids ("w1"): each worker gets a
        // log of its own, or one test's workers write into another's log.
        static STARTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (dir, _) = cache();
        let log = dir.join(format!("{id}-{}-{n}.log", std::process::id()));
        let child = cuzk()
            .env(cuzk_filecoin::PARAMETER_CACHE_VAR, param_cache)
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
            .arg("--param-cache")
            .arg(param_cache)
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

/// `cuzk queue submit synthetic ...` at 2^`LOG` (`LONG_LOG` when `partitions` is
/// `LONG_PARTS`): the new jobs' ids.
fn submit(url: &str, seed: u64, partitions: u32, count: u32, extra: &[&str]) -> Vec<i64> {
    let out = cuzk()
        .args(["queue", "submit", "--queue", url])
        .args(extra)
        .args([
            "synthetic",
            "--circuit",
            "mul",
            "--log",
            &log_of(partitions).to_string(),
        ])
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

fn log_of(partitions: u32) -> u32 {
    if partitions == LONG_PARTS {
        LONG_LOG
    } else {
        LOG
    }
}

/// Checks a synthetic job's proof bytes: `partitions` proofs, each verifying for
/// its own public inputs and not for another partition's.
fn check_proof(bytes: &[u8], seed: u64, partitions: u32) {
    let log = log_of(partitions);
    let params = &cache().1[&log];
    assert_eq!(bytes.len(), 192 * partitions as usize);
    for p in 0..partitions {
        let proof = Proof::<Bls12>::read(&bytes[192 * p as usize..]).unwrap();
        let inputs = |s: u64| {
            SynthCircuit::new("mul", log, Some(s))
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
    let Some(url) = common::migrated_database("three") else {
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
                line.ends_with("(held: 0 service jobs, 0 results waiting)"),
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
    let Some(url) = common::migrated_database("kill") else {
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
    check_proof(s.proof.as_ref().unwrap(), seed, LONG_PARTS);
    // The short job (seed 1), then four more from seed 2.
    for s in wait_all(&mut q, &small, &refs) {
        assert_eq!(s.state, JobState::Done);
        check_proof(s.proof.as_ref().unwrap(), job_seed(&s, 1, small[0], 1), 1);
    }
}

/// Starts worker `id` alone, submits a long job (`LONG_PARTS` partitions, seconds of
/// proving; seed `seed`) and a short one (seed 1), and returns once the worker
/// is proving the long one: (worker, long job, short job).
fn worker_mid_job(
    url: &str,
    id: &str,
    lease_secs: f64,
    seed: u64,
    flags: &[&str],
) -> (WorkerProc, i64, i64) {
    let w = WorkerProc::start_in(url, id, lease_secs, &cache().0, flags);
    let long = submit(url, seed, LONG_PARTS, 1, &["--priority", "high"])[0];
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
    let Some(url) = common::migrated_database("sigterm_finish") else {
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
    check_proof(s.proof.as_ref().unwrap(), seed, LONG_PARTS);
    // It claimed nothing after the signal.
    let s = q.status(short).unwrap();
    assert_eq!((s.state, s.attempts), (JobState::Queued, 0), "{log}");
}

#[test]
fn a_worker_stopped_by_sigterm_mid_job_releases_it_as_configured_and_exits_0() {
    let Some(url) = common::migrated_database("sigterm_release") else {
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
    check_proof(all[0].proof.as_ref().unwrap(), seed, LONG_PARTS);
    check_proof(all[1].proof.as_ref().unwrap(), 1, 1);
    std::fs::remove_file(&config).unwrap();
}

/// A job's payload as `cuzk queue submit raw` takes it.
fn synthetic_payload(log: u32, seed: u64, request_id: Option<String>) -> Vec<u8> {
    payload::encode(
        ProofKind::Synthetic,
        &ProofRequest {
            request_id,
            vanilla_proof: format!(
                r#"{{"circuit":"mul","log":{log},"partitions":1,"seed":{seed}}}"#
            )
            .into_bytes(),
            ..ProofRequest::default()
        },
    )
}

#[test]
fn a_bad_job_fails_with_its_error_after_its_retries() {
    let Some(url) = common::migrated_database("bad") else {
        return;
    };
    cache();
    let w = WorkerProc::start(&url, "w", 10.0);
    let mut q = Queue::connect(&url).unwrap();
    // log 3: below the circuits' smallest size. `cuzk queue submit` refuses it
    // with the kind's own check...
    let bad_input = cache().0.join(format!("bad-{}.bin", std::process::id()));
    std::fs::write(&bad_input, synthetic_payload(3, 1, None)).unwrap();
    let out = cuzk()
        .args(["queue", "submit", "--queue", &url, "--max-attempts", "3"])
        .args(["raw", "--payload"])
        .arg(&bad_input)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("refused before it is queued") && err.contains("log 3 is outside 10"),
        "{err}"
    );
    // ... and a job that got in anyway (another client) fails in the worker.
    let bad = q
        .submit(&Submission {
            kind: "SYNTHETIC".into(),
            input: synthetic_payload(3, 1, None),
            priority: 2,
            max_attempts: 3,
            request_id: None,
        })
        .unwrap()
        .id;
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
                "attempt {} on w: the SYNTHETIC request is malformed",
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
        // The schema, by the one command that changes it.
        let out = cuzk()
            .args(["queue", "migrate", "--queue", &url])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
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

/// Filecoin's 2 KiB test parameters of every kind, generated once per build
/// directory (shared with cuzk-filecoin's tests), never downloaded.
fn filecoin_params() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        use cuzk_filecoin::{ensure_params, PorepKind, PostKind, UpdateKind};
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("filecoin-params");
        // Before filecoin-proofs reads its settings (this process seals a sector).
        std::env::set_var(cuzk_filecoin::PARAMETER_CACHE_VAR, &dir);
        ensure_params(&PorepKind::new(POREP).unwrap(), &dir, 2026).unwrap();
        let update = cuzk_filecoin::RegisteredUpdateProof::StackedDrg2KiBV1;
        ensure_params(&UpdateKind::new(update).unwrap(), &dir, 2026).unwrap();
        for p in [
            cuzk_filecoin::RegisteredPoStProof::StackedDrgWindow2KiBV1_2,
            cuzk_filecoin::RegisteredPoStProof::StackedDrgWinning2KiBV1,
        ] {
            ensure_params(&PostKind::new(p).unwrap(), &dir, 2026).unwrap();
        }
        // SnarkPack's SRS, as cuzk-filecoin's tests make it (the same file).
        cuzk_filecoin::aggregate::ensure_srs(&dir, 2027, 64).unwrap();
        dir
    })
}

const POREP: cuzk_filecoin::RegisteredSealProof =
    cuzk_filecoin::RegisteredSealProof::StackedDrg2KiBV1_1;

/// `cuzk args…` with Filecoin's test parameters, which must succeed: its stdout.
fn cuzk_ok(args: &[&str]) -> String {
    let out = cuzk()
        .env(cuzk_filecoin::PARAMETER_CACHE_VAR, filecoin_params())
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cuzk {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `cuzk args…` with Filecoin's test parameters, which must fail: its stderr.
fn cuzk_err(args: &[&str]) -> String {
    let out = cuzk()
        .env(cuzk_filecoin::PARAMETER_CACHE_VAR, filecoin_params())
        .args(args)
        .output()
        .unwrap();
    assert!(!out.status.success(), "cuzk {} succeeded", args.join(" "));
    String::from_utf8(out.stderr).unwrap()
}

/// One job of each Filecoin kind, from real 2 KiB sectors, through `cuzk queue
/// submit` to two workers at once; each proof verified by filecoin-proofs (and
/// refused for another input).
#[test]
fn every_filecoin_kind_goes_through_the_queue_to_two_workers_and_verifies() {
    let Some(url) = common::migrated_database("kinds") else {
        return;
    };
    cache();
    let params = filecoin_params();
    let work = tempfile::tempdir().unwrap();
    let path = |name: &str| work.path().join(name).display().to_string();
    // PoRep: a sector sealed here by filecoin-proofs, its C1 in Curio's envelope.
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
    std::fs::write(path("c1.json"), &envelope).unwrap();
    // A second sector, so that the two PoRep proofs can be aggregated (sealed in
    // its own directory: a sealing directory holds one sector's files).
    let work8 = tempfile::tempdir().unwrap();
    let sealed8 = cuzk_filecoin::seal_test_sector(
        POREP,
        cuzk_filecoin::prover_id_from_miner(miner),
        8,
        12,
        work8.path(),
    )
    .unwrap();
    let envelope8 =
        serde_json::to_vec(&cuzk_filecoin::Envelope::wrap(&sealed8.c1_json, 8, 2048)).unwrap();
    std::fs::write(path("c1-8.json"), &envelope8).unwrap();
    // The others: real vanilla proofs, as `cuzk snap|post … inputs` writes them.
    cuzk_ok(&["snap", "inputs", "-o", &path("snap.json")]);
    cuzk_ok(&["post", "window", "inputs", "-o", &path("window.json")]);
    cuzk_ok(&["post", "winning", "inputs", "-o", &path("winning.json")]);

    let workers = [
        WorkerProc::start_in(&url, "f1", 30.0, params, &[]),
        WorkerProc::start_in(&url, "f2", 30.0, params, &[]),
    ];
    let submit_one = |args: &[&str]| -> i64 {
        let mut all = vec!["queue", "submit", "--queue", &url];
        all.extend_from_slice(args);
        cuzk_ok(&all).trim().parse().unwrap()
    };
    let porep = submit_one(&[
        "--priority",
        "high",
        "porep",
        "--miner-id",
        "1000",
        &path("c1.json"),
    ]);
    let porep8 = submit_one(&["porep", "--miner-id", "1000", &path("c1-8.json")]);
    let snap = submit_one(&["snap", "-i", &path("snap.json")]);
    let window = submit_one(&["window", "-i", &path("window.json")]);
    let winning = submit_one(&["winning", "-i", &path("winning.json")]);
    // Refused at submission, never queued: a C1 that is not there, an input
    // file of another kind, a vanilla proof that does not decode.
    cuzk_err(&[
        "queue",
        "submit",
        "--queue",
        &url,
        "porep",
        "--miner-id",
        "1000",
        &path("nothing-here.json"),
    ]);
    let e = cuzk_err(&[
        "queue",
        "submit",
        "--queue",
        &url,
        "window",
        "-i",
        &path("snap.json"),
    ]);
    assert!(e.contains("`snap` input"), "{e}");
    std::fs::write(path("junk.bin"), b"not a vanilla proof").unwrap();
    let e = cuzk_err(&[
        "queue",
        "submit",
        "--queue",
        &url,
        "winning",
        "-i",
        &path("winning.json"),
        "--vanilla",
        &path("junk.bin"),
    ]);
    assert!(e.contains("refused before it is queued"), "{e}");
    // An aggregate request that does not parse, refused by the kind's check.
    let e = cuzk_err(&[
        "queue",
        "submit",
        "--queue",
        &url,
        "aggregate",
        &path("junk.bin"),
    ]);
    assert!(
        e.contains("SEAL_AGGREGATE") && e.contains("aggregate request"),
        "{e}"
    );
    let mut q = Queue::connect(&url).unwrap();
    assert_eq!(q.counts().unwrap().iter().sum::<i64>(), 5);

    let refs: Vec<&WorkerProc> = workers.iter().collect();
    let ids = [porep, snap, window, winning, porep8];
    let mut all = wait_all(&mut q, &ids, &refs);
    // In submission order (porep8 was submitted second, for the aggregate).
    all.sort_by_key(|s| ids.iter().position(|&i| i == s.id));
    for s in &all {
        assert_eq!(
            s.state,
            JobState::Done,
            "job {} ({}): {:?}\n{}\n---\n{}",
            s.id,
            s.kind,
            s.errors,
            workers[0].log(),
            workers[1].log()
        );
        assert_eq!((s.attempts, s.writes), (1, 1));
        assert!(matches!(s.done_by.as_deref(), Some("f1" | "f2")));
    }
    let kinds: Vec<(&str, i32)> = all.iter().map(|s| (s.kind.as_str(), s.priority)).collect();
    assert_eq!(
        kinds,
        [
            ("POREP_SEAL_COMMIT", 3),
            ("SNAP_DEALS_UPDATE", 2),
            ("WINDOW_POST_PARTITION", 3),
            ("WINNING_POST", 4),
            ("POREP_SEAL_COMMIT", 2)
        ]
    );

    // PoRep: filecoin-proofs' verify_seal, and not for another miner.
    let proof = all[0].proof.as_ref().unwrap();
    assert_eq!(proof.len(), 192);
    let input = cuzk_filecoin::parse_c1(&envelope).unwrap();
    let verify = |m: u64| {
        cuzk_filecoin::verify_proof(
            &input,
            cuzk_filecoin::prover_id_from_miner(m),
            None,
            proof,
            params,
        )
    };
    verify(miner).unwrap();
    assert!(verify(miner + 1).is_err());
    // The others: `cuzk … verify` (filecoin-proofs), and refused for other
    // randomness or another new replica commitment.
    let other = "07".repeat(32);
    for (s, cmd, input, wrong) in [
        (&all[1], &["snap"][..], "snap.json", "--comm-r-new"),
        (
            &all[2],
            &["post", "window"][..],
            "window.json",
            "--randomness",
        ),
        (
            &all[3],
            &["post", "winning"][..],
            "winning.json",
            "--randomness",
        ),
    ] {
        let file = path(&format!("{}.proof", s.id));
        std::fs::write(&file, s.proof.as_ref().unwrap()).unwrap();
        let mut args = cmd.to_vec();
        args.extend_from_slice(&["verify", "-i"]);
        let input = path(input);
        args.extend_from_slice(&[&input, "--proof-file", &file]);
        cuzk_ok(&args);
        args.extend_from_slice(&[wrong, &other]);
        cuzk_err(&args);
    }

    // SEAL_AGGREGATE (cuzk's kind 1001): the two PoRep proofs' aggregate request
    // as `cuzk aggregate request` writes it, through the queue to a worker; the
    // same bytes as `cuzk aggregate` makes of it.
    std::fs::write(path("7.proof"), all[0].proof.as_ref().unwrap()).unwrap();
    std::fs::write(path("8.proof"), all[4].proof.as_ref().unwrap()).unwrap();
    cuzk_ok(&[
        "aggregate",
        "request",
        "--miner-id",
        "1000",
        "--c1",
        &path("c1.json"),
        "--proof",
        &path("7.proof"),
        "--c1",
        &path("c1-8.json"),
        "--proof",
        &path("8.proof"),
        "-o",
        &path("agg.json"),
    ]);
    let t = Instant::now();
    let agg = submit_one(&["aggregate", &path("agg.json")]);
    let done = wait_all(&mut q, &[agg], &refs);
    eprintln!(
        "SEAL_AGGREGATE of two sectors through the queue: {:.2} s",
        t.elapsed().as_secs_f64()
    );
    assert_eq!(done[0].state, JobState::Done, "{:?}", done[0].errors);
    assert_eq!(done[0].kind, "SEAL_AGGREGATE");
    cuzk_ok(&["aggregate", &path("agg.json"), "-o", &path("agg-cli.bin")]);
    assert_eq!(
        done[0].proof.as_deref(),
        Some(&std::fs::read(path("agg-cli.bin")).unwrap()[..]),
        "the queue's aggregate differs from `cuzk aggregate`'s"
    );
    cuzk_ok(&[
        "aggregate",
        "verify",
        &path("agg.json"),
        "--aggregate",
        &path("agg-cli.bin"),
    ]);
}

/// A worker paused (SIGSTOP) past its lease loses its job: another worker
/// claims, proves and writes it; when the first resumes, its keeper finds the
/// lease gone and cancels the work in its service, and it writes nothing over
/// the holder's proof.
#[test]
fn a_worker_paused_past_its_lease_loses_the_job_and_its_work_is_cancelled() {
    let Some(url) = common::migrated_database("paused") else {
        return;
    };
    cache();
    let seed = 7000;
    let (paused, long, short) = worker_mid_job(&url, "paused", 2.0, seed, &[]);
    let pid = paused.child.id().to_string();
    let signal = |s: &str| {
        assert!(Command::new("kill")
            .args([s, &pid])
            .status()
            .unwrap()
            .success())
    };
    signal("-STOP");
    std::thread::sleep(Duration::from_millis(2500));
    let taker = WorkerProc::start(&url, "taker", 10.0);
    let mut q = Queue::connect(&url).unwrap();
    let s = &wait_all(&mut q, &[long], &[&taker])[0];
    signal("-CONT");
    assert_eq!((s.state, s.attempts), (JobState::Done, 2), "{:?}", s.errors);
    assert_eq!(s.done_by.as_deref(), Some("taker"));
    check_proof(s.proof.as_ref().unwrap(), seed, LONG_PARTS);
    // The paused worker, resumed, sees the loss and stops its work there.
    let start = Instant::now();
    let lost = format!("lost the lease on job {long}");
    while !paused.log().contains(&lost) {
        assert!(start.elapsed() < PATIENCE, "{}", paused.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    let start = Instant::now();
    let gave_up = |log: &str| {
        log.contains(&format!(
            "job {long} cancelled; another worker had it already"
        )) || log.contains(&format!("job {long}: write refused"))
    };
    while !gave_up(&paused.log()) {
        assert!(start.elapsed() < PATIENCE, "{}", paused.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    // The holder's proof stands.
    let after = q.status(long).unwrap();
    assert_eq!(after.proof, s.proof);
    assert_eq!(after.done_by.as_deref(), Some("taker"));
    assert_eq!(after.writes - after.refused_writes, 1);
    // Both go on working.
    let s = &wait_all(&mut q, &[short], &[&taker, &paused])[0];
    assert_eq!(s.state, JobState::Done);
}

/// The same request id submitted twice is one job, and `cuzk queue submit` says
/// so; hostile payloads that got into the queue fail their job with a clear
/// error and leave the worker proving; a second worker with a live worker's id
/// is refused; `cuzk queue prune` deletes old finished jobs.
#[test]
fn keys_hostile_payloads_worker_ids_and_prune_through_the_cli() {
    let Some(url) = common::migrated_database("hostile") else {
        return;
    };
    cache();
    let w = WorkerProc::start(&url, "h", 10.0);
    // Idempotency.
    let key = |k: &str| {
        cuzk()
            .args(["queue", "submit", "--queue", &url, "--request-id", k])
            .args([
                "synthetic",
                "--circuit",
                "mul",
                "--log",
                "10",
                "--seed",
                "5",
            ])
            .output()
            .unwrap()
    };
    let first = key("curio-sector-9");
    let again = key("curio-sector-9");
    assert!(first.status.success() && again.status.success());
    assert_eq!(first.stdout, again.stdout);
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("was submitted before as job"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    assert!(!key(&"k".repeat(129)).status.success());
    let keyed: i64 = String::from_utf8(first.stdout)
        .unwrap()
        .trim()
        .parse()
        .unwrap();

    // Hostile payloads, put in by another client (no submit-side checks).
    let mut q = Queue::connect(&url).unwrap();
    let mut put = |kind: &str, input: Vec<u8>| {
        q.submit(&Submission {
            kind: kind.into(),
            input,
            priority: 2,
            max_attempts: 1,
            request_id: None,
        })
        .unwrap()
        .id
    };
    // Field 2 (proof_kind), varint 77: a well-formed message of an unknown kind.
    let unknown_kind = vec![0x10, 77];
    let hostile = [
        (
            put("SYNTHETIC", b"\xff\xfe junk, not protobuf".to_vec()),
            "is not a protobuf cuzk.v1.SubmitProofRequest",
        ),
        (
            put("WINNING_POST", unknown_kind),
            "proof_kind 77 is not a ProofKind value",
        ),
        (
            put(
                "SYNTHETIC",
                synthetic_payload(10, 1, Some("x".repeat(1 << 20))),
            ),
            "request id of 1048576 bytes",
        ),
        (
            put("WINDOW_POST_PARTITION", synthetic_payload(10, 1, None)),
            "queued as WINDOW_POST_PARTITION but its payload is a SYNTHETIC request",
        ),
        (
            put(
                "WINNING_POST",
                payload::encode(ProofKind::WinningPost, &ProofRequest::default()),
            ),
            "WINNING_POST request is malformed",
        ),
    ];
    let good = submit(&url, 31, 1, 1, &[])[0];
    let ids: Vec<i64> = hostile.iter().map(|h| h.0).chain([good, keyed]).collect();
    let all = wait_all(&mut q, &ids, &[&w]);
    let status = |id: i64| all.iter().find(|s| s.id == id).unwrap();
    for (id, want) in &hostile {
        let s = status(*id);
        assert_eq!(s.state, JobState::Failed, "job {}", s.id);
        assert_eq!(s.errors.len(), 1);
        assert!(
            s.errors[0].contains(want),
            "{:?} should say {want}",
            s.errors
        );
        assert!(s.errors[0].len() < 1000, "{}", s.errors[0].len());
    }
    for id in [good, keyed] {
        let s = status(id);
        assert_eq!(s.state, JobState::Done, "{:?}\n{}", s.errors, w.log());
    }
    check_proof(status(good).proof.as_ref().unwrap(), 31, 1);
    assert!(!w.log().contains("panicked"), "{}", w.log());

    // A second worker with the live one's id is refused, naming it.
    let out = cuzk()
        .args([
            "worker",
            "--queue",
            &url,
            "--id",
            "h",
            "--drain",
            "--param-cache",
        ])
        .arg(&cache().0)
        .env(cuzk_filecoin::PARAMETER_CACHE_VAR, &cache().0)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("worker id `h` is held by a live worker"),
        "{err}"
    );

    // Prune: nothing is old yet; with a zero age, every finished job goes.
    let out = cuzk()
        .args(["queue", "prune", "--queue", &url, "--keep-done", "7d"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("pruned 0 done and 0 failed"));
    std::thread::sleep(Duration::from_millis(1100));
    let out = cuzk()
        .args(["queue", "prune", "--queue", &url, "--keep-done", "1s"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("pruned 2 done and 5 failed"), "{said}");
    assert_eq!(q.counts().unwrap(), [0, 0, 0, 0]);
}
