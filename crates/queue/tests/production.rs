//! The queue's production rules against a real PostgreSQL: idempotent
//! submission by request id, a lost lease cancelling the work and refusing its
//! late write, unique live worker ids, retention, and TLS as `sslmode` says.

mod common;

use std::{
    path::Path,
    process::Command,
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use cuzk_queue::{
    Cancel, ClaimedJob, Completion, Database, JobRunner, JobState, Queue, QueueConfig, QueueError,
    RunError, Submission, Worker, WorkerEvent, WorkerOptions,
};

fn job(kind: &str, input: &[u8], request_id: Option<&str>) -> Submission {
    Submission {
        kind: kind.into(),
        input: input.to_vec(),
        priority: 0,
        max_attempts: 3,
        request_id: request_id.map(String::from),
    }
}

#[test]
fn a_request_id_submitted_twice_is_one_job() {
    let Some(url) = common::migrated_database("idempotent") else {
        return;
    };
    let mut q = Queue::connect(&url).unwrap();
    let first = q.submit(&job("k", b"a", Some("curio:sector-7"))).unwrap();
    assert!(!first.existing);
    // Again, even with other bytes: the first job, nothing new queued.
    let again = q.submit(&job("k", b"b", Some("curio:sector-7"))).unwrap();
    assert_eq!((again.id, again.existing), (first.id, true));
    let other = q.submit(&job("k", b"a", Some("curio:sector-8"))).unwrap();
    assert!(!other.existing && other.id != first.id);
    // Without a key, every submission is a job.
    let n1 = q.submit(&job("k", b"a", None)).unwrap();
    let n2 = q.submit(&job("k", b"a", None)).unwrap();
    assert_ne!(n1.id, n2.id);
    assert_eq!(q.counts().unwrap()[0], 4);
    assert_eq!(q.find_request("curio:sector-7").unwrap(), Some(first.id));
    assert_eq!(
        q.status(first.id).unwrap().request_id.as_deref(),
        Some("curio:sector-7")
    );
    // Threads racing with one key get one job between them.
    let ids: Vec<i64> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..6)
            .map(|_| {
                s.spawn(|| {
                    let mut q = Queue::connect(&url).unwrap();
                    q.submit(&job("k", b"r", Some("race"))).unwrap().id
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(ids.iter().all(|&i| i == ids[0]), "{ids:?}");
    // A key that breaks the rule is refused, shortly.
    for bad in ["", "a/b", "sp ace", &"x".repeat(129), &"y".repeat(100_000)] {
        let e = q.submit(&job("k", b"a", Some(bad))).unwrap_err();
        assert!(matches!(e, QueueError::BadRequestId(_)), "{e}");
        assert!(e.to_string().len() < 300, "{e}");
    }
}

/// Holds its job until cancelled, then returns a proof all the same (one that
/// finished as the cancel landed); counts its cancels.
struct Blocks {
    started: AtomicUsize,
    cancelled: Arc<AtomicUsize>,
}

impl JobRunner for Blocks {
    fn kind(&self) -> &str {
        "k"
    }
    fn run(&self, job: &ClaimedJob, cancel: &Cancel) -> Result<Vec<u8>, RunError> {
        self.started.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let cancelled = self.cancelled.clone();
        cancel.on_cancel(move || {
            cancelled.fetch_add(1, Ordering::SeqCst);
            let _ = tx.send(());
        });
        rx.recv_timeout(Duration::from_secs(60))
            .map_err(|_| RunError("never cancelled".into()))?;
        Ok([b"late:".as_slice(), &job.input].concat())
    }
}

fn options(id: &str, lease_secs: f64) -> WorkerOptions {
    WorkerOptions {
        id: id.into(),
        host: "test".into(),
        config: QueueConfig {
            lease_secs,
            poll_ms: 20,
            jobs_in_flight: 1,
            max_attempts: 3,
            ..QueueConfig::default()
        },
        drain: false,
    }
}

/// Worker A holds a job past its lease (a stall: here the lease is expired by
/// hand, as a paused process would let it), B claims and writes it; A's keeper
/// finds the lease lost and cancels A's work, and A's late proof is refused.
#[test]
fn a_lost_lease_cancels_the_work_and_its_late_write_is_refused() {
    let Some(url) = common::migrated_database("lost_lease") else {
        return;
    };
    let mut q = Queue::connect(&url).unwrap();
    let id = q.submit(&job("k", b"x", None)).unwrap().id;
    let cancelled = Arc::new(AtomicUsize::new(0));
    let a_runner = Arc::new(Blocks {
        started: AtomicUsize::new(0),
        cancelled: cancelled.clone(),
    });
    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = events.clone();
    let a = Worker::new(&url, options("a", 0.6), vec![a_runner.clone()], move |e| {
        seen.lock().unwrap().push(e.clone())
    })
    .unwrap();
    let stop_a = AtomicBool::new(false);
    std::thread::scope(|s| {
        let running = s.spawn(|| a.run(&stop_a).unwrap());
        while a_runner.started.load(Ordering::SeqCst) == 0 {
            std::thread::sleep(Duration::from_millis(5));
        }
        // A stalls: its lease runs out and B takes the job.
        let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        admin
            .execute(
                "UPDATE cuzk_jobs SET lease_until = now() - interval '1 second' WHERE id = $1",
                &[&id],
            )
            .unwrap();
        let b = q
            .claim("b", &["k".to_string()], Duration::from_secs(30))
            .unwrap()
            .unwrap();
        assert_eq!((b.id, b.attempt), (id, 2));
        // A's keeper notices within a renewal (0.2 s) and cancels A's work.
        let start = Instant::now();
        while cancelled.load(Ordering::SeqCst) == 0 {
            assert!(start.elapsed() < Duration::from_secs(10), "never cancelled");
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(
            q.complete(id, "b", b"proof-of-b").unwrap(),
            Completion::Written
        );
        // A's late write has come or comes now: refused. Then A stops.
        let start = Instant::now();
        while q.status(id).unwrap().refused_writes == 0 {
            assert!(start.elapsed() < Duration::from_secs(10), "no late write");
            std::thread::sleep(Duration::from_millis(10));
        }
        stop_a.store(true, Ordering::SeqCst);
        let stats = running.join().unwrap();
        assert_eq!((stats.done, stats.leases_lost), (0, 1), "{stats:?}");
        assert_eq!(stats.refused + stats.late, 1, "{stats:?}");
    });
    let s = q.status(id).unwrap();
    assert_eq!(s.state, JobState::Done);
    assert_eq!(s.proof.as_deref(), Some(&b"proof-of-b"[..]));
    assert_eq!(s.done_by.as_deref(), Some("b"));
    assert_eq!(cancelled.load(Ordering::SeqCst), 1);
    assert!(events
        .lock()
        .unwrap()
        .iter()
        .any(|e| matches!(e, WorkerEvent::LeaseLost { job } if *job == id)));
}

/// Does nothing; never called.
struct Idle;

impl JobRunner for Idle {
    fn kind(&self) -> &str {
        "idle"
    }
    fn run(&self, _: &ClaimedJob, _: &Cancel) -> Result<Vec<u8>, RunError> {
        Err(RunError("idle".into()))
    }
}

#[test]
fn a_live_worker_s_id_cannot_be_taken_and_a_dead_one_s_can() {
    let Some(url) = common::migrated_database("worker_ids") else {
        return;
    };
    let w1 = Worker::new(&url, options("same", 1.0), vec![Arc::new(Idle)], |_| {}).unwrap();
    let stop = AtomicBool::new(false);
    let mut q = Queue::connect(&url).unwrap();
    std::thread::scope(|s| {
        let running = s.spawn(|| w1.run(&stop).unwrap());
        let start = Instant::now();
        while q.live_workers().unwrap().is_empty() {
            assert!(start.elapsed() < Duration::from_secs(10));
            std::thread::sleep(Duration::from_millis(10));
        }
        // Alive for longer than its staleness (1 s): the heartbeat keeps it.
        std::thread::sleep(Duration::from_millis(1500));
        let w2 = Worker::new(&url, options("same", 1.0), vec![Arc::new(Idle)], |_| {}).unwrap();
        let err = w2.run(&AtomicBool::new(false)).unwrap_err();
        assert!(
            matches!(&err, QueueError::WorkerIdTaken { id, host, .. } if id == "same" && host == "test"),
            "{err}"
        );
        assert!(err.to_string().contains("`same`"), "{err}");
        stop.store(true, Ordering::SeqCst);
        running.join().unwrap();
    });
    // A clean exit removes the row.
    assert!(q.live_workers().unwrap().is_empty());
    // A dead worker's row (its heartbeat stale) is taken over.
    q.register_worker("dead", "gone", 1, Duration::from_millis(200))
        .unwrap();
    assert!(matches!(
        q.register_worker("dead", "here", 2, Duration::from_secs(10)),
        Err(QueueError::WorkerIdTaken { .. })
    ));
    std::thread::sleep(Duration::from_millis(300));
    q.register_worker("dead", "here", 2, Duration::from_secs(10))
        .unwrap();
    assert!(q.heartbeat("dead", "here", 2).unwrap());
    assert!(!q.heartbeat("dead", "gone", 1).unwrap());
}

#[test]
fn finished_jobs_older_than_keep_done_are_pruned_with_their_inputs() {
    let Some(url) = common::migrated_database("prune") else {
        return;
    };
    let mut q = Queue::connect(&url).unwrap();
    let lease = Duration::from_secs(30);
    let kinds = ["k".to_string()];
    let done = q.submit(&job("k", b"d", None)).unwrap().id;
    q.claim("w", &kinds, lease).unwrap().unwrap();
    q.complete(done, "w", b"p").unwrap();
    let failed = q
        .submit(&Submission {
            max_attempts: 1,
            ..job("k", b"f", None)
        })
        .unwrap()
        .id;
    q.claim("w", &kinds, lease).unwrap().unwrap();
    assert_eq!(q.fail(failed, "w", "no").unwrap(), JobState::Failed);
    let running = q.submit(&job("k", b"r", None)).unwrap().id;
    q.claim("w", &kinds, lease).unwrap().unwrap();
    let queued = q.submit(&job("k", b"q", None)).unwrap().id;
    // Young: kept.
    assert_eq!(q.prune(Duration::from_secs(3600)).unwrap().done, 0);
    // Make the finished ones two hours old.
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    admin
        .execute(
            "UPDATE cuzk_jobs SET finished_at = now() - interval '2 hours' WHERE id = ANY($1)",
            &[&vec![done, failed]],
        )
        .unwrap();
    let pruned = q.prune(Duration::from_secs(3600)).unwrap();
    assert_eq!((pruned.done, pruned.failed), (1, 1));
    assert!(matches!(q.status(done), Err(QueueError::NoSuchJob(_))));
    assert!(matches!(q.status(failed), Err(QueueError::NoSuchJob(_))));
    let n: i64 = admin
        .query_one("SELECT count(*) FROM cuzk_jobs", &[])
        .unwrap()
        .get(0);
    assert_eq!(n, 2);
    assert_eq!(q.status(running).unwrap().state, JobState::Running);
    assert_eq!(q.status(queued).unwrap().state, JobState::Queued);
    // Running and queued jobs are never pruned, however old.
    admin
        .execute(
            "UPDATE cuzk_jobs SET submitted_at = now() - interval '30 days'",
            &[],
        )
        .unwrap();
    assert_eq!(q.prune(Duration::from_secs(1)).unwrap(), Default::default());

    // A worker with keep_done prunes by itself, soon after it starts.
    // (Ahead of the queued job, so this claim takes it.)
    let old = q
        .submit(&Submission {
            priority: 10,
            ..job("k", b"o", None)
        })
        .unwrap()
        .id;
    assert_eq!(q.claim("w", &kinds, lease).unwrap().unwrap().id, old);
    assert_eq!(q.complete(old, "w", b"p").unwrap(), Completion::Written);
    admin
        .execute(
            "UPDATE cuzk_jobs SET finished_at = now() - interval '2 hours' WHERE id = $1",
            &[&old],
        )
        .unwrap();
    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = events.clone();
    let mut opts = options("pruner", 0.6);
    opts.config.keep_done = Some(Duration::from_secs(3600));
    let w = Worker::new(&url, opts, vec![Arc::new(Idle)], move |e| {
        seen.lock().unwrap().push(e.clone())
    })
    .unwrap();
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let running = s.spawn(|| w.run(&stop).unwrap());
        let start = Instant::now();
        while !events
            .lock()
            .unwrap()
            .iter()
            .any(|e| matches!(e, WorkerEvent::Pruned { .. }))
        {
            assert!(start.elapsed() < Duration::from_secs(10), "never pruned");
            std::thread::sleep(Duration::from_millis(20));
        }
        stop.store(true, Ordering::SeqCst);
        running.join().unwrap();
    });
    assert!(matches!(q.status(old), Err(QueueError::NoSuchJob(_))));
    assert_eq!(q.status(running).unwrap().state, JobState::Running);
}

fn ci_postgres(cmd: &str, dir: &Path, tls: Option<&Path>) -> String {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/ci-postgres.sh");
    let mut c = Command::new("bash");
    c.args([script, cmd]).arg(dir);
    if let Some(t) = tls {
        c.env("CUZK_PG_TLS_DIR", t);
    }
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "ci-postgres.sh {cmd}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A private server with `ssl=on` and a certificate for 127.0.0.1 signed by a CA
/// this test makes: `sslmode=require` with the CA file connects over TLS (as
/// `pg_stat_ssl` says), without the CA file it is refused, and `sslmode=require`
/// against the shared server (no TLS) is a clear error.
#[test]
fn tls_follows_sslmode_and_verifies_the_server_against_the_ca_file() {
    let Some(plain) = common::migrated_database("tls_probe") else {
        return;
    };
    // The shared server has no TLS: require is refused, saying so.
    let sep = if plain.contains('?') { '&' } else { '?' };
    let err = Queue::connect(format!("{plain}{sep}sslmode=require")).unwrap_err();
    assert!(matches!(err, QueueError::TlsRefused(_)), "{err}");
    assert!(err.to_string().contains("does not offer TLS"), "{err}");
    // prefer (the default) and disable still connect to it.
    Queue::connect(format!("{plain}{sep}sslmode=prefer")).unwrap();
    Queue::connect(format!("{plain}{sep}sslmode=disable")).unwrap();

    let certs = tempfile::tempdir().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "cuzk test CA");
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let server_params =
        rcgen::CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
            .unwrap();
    let server_key = rcgen::KeyPair::generate().unwrap();
    let server = server_params.signed_by(&server_key, &ca, &ca_key).unwrap();
    std::fs::write(certs.path().join("server.crt"), server.pem()).unwrap();
    std::fs::write(certs.path().join("server.key"), server_key.serialize_pem()).unwrap();
    let ca_file = certs.path().join("ca.pem");
    std::fs::write(&ca_file, ca.pem()).unwrap();

    let dir = std::env::temp_dir().join(format!("cuzk-pg-tls-{}", std::process::id()));
    struct Stop<'a>(&'a Path);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            ci_postgres("stop", self.0, None);
        }
    }
    let url = ci_postgres("start", &dir, Some(certs.path()));
    let _stop = Stop(&dir);
    let require = format!("{url}?sslmode=require");
    let db = Database::new(&require).with_ca_file(Some(ca_file.clone()));
    cuzk_queue::migrate_database(&db).unwrap();
    let mut q = Queue::connect(&db).unwrap();
    let id = q.submit(&job("k", b"tls", None)).unwrap().id;
    assert_eq!(q.status(id).unwrap().state, JobState::Queued);
    // The connection is encrypted, as the server itself says.
    let ssl = q.connection_uses_tls().unwrap();
    assert!(ssl, "pg_stat_ssl says the connection is not encrypted");
    // Without the CA the certificate does not verify: an error, no downgrade.
    let err = Queue::connect(&require).unwrap_err();
    assert!(
        err.to_string().to_lowercase().contains("certificate"),
        "{err}"
    );
    // A CA file that is not one is a clear error too.
    let junk = certs.path().join("junk.pem");
    std::fs::write(&junk, "not a certificate").unwrap();
    let err = Queue::connect(Database::new(&require).with_ca_file(Some(junk))).unwrap_err();
    assert!(matches!(err, QueueError::CaFile { .. }), "{err}");
}
