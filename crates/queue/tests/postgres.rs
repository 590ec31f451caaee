//! The queue's statements against a real PostgreSQL: concurrent migrations,
//! claim order, SKIP LOCKED under contention, lease expiry, idempotent
//! completion, bounded failures, and the worker loop with its leases.

mod common;

use std::{
    collections::HashSet,
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

use cuzk_queue::{
    Cancel, ClaimedJob, Completion, JobRunner, JobState, OnStop, Queue, QueueConfig, RunError,
    Submission, Worker, WorkerEvent, WorkerOptions, MIGRATIONS,
};

fn kinds(k: &[&str]) -> Vec<String> {
    k.iter().map(|s| s.to_string()).collect()
}

fn job(kind: &str, input: &[u8], priority: i32, max_attempts: u32) -> Submission {
    Submission {
        kind: kind.into(),
        input: input.to_vec(),
        priority,
        max_attempts,
        request_id: None,
    }
}

const LEASE: Duration = Duration::from_secs(30);

#[test]
fn workers_starting_together_apply_each_migration_once() {
    let Some(url) = common::fresh_database("migrate") else {
        return;
    };
    // Before any migration a connection is refused, naming the fix.
    let err = Queue::connect(&url).unwrap_err();
    assert!(
        err.to_string().contains("run `cuzk queue migrate`"),
        "{err}"
    );
    let threads: Vec<_> = (0..6)
        .map(|_| {
            let url = url.clone();
            std::thread::spawn(move || cuzk_queue::migrate_database(&url).map(|_| ()))
        })
        .collect();
    for t in threads {
        t.join().unwrap().unwrap();
    }
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let rows = c
        .query(
            "SELECT version, name FROM cuzk_migrations ORDER BY version",
            &[],
        )
        .unwrap();
    let got: Vec<(i32, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    let want: Vec<(i32, String)> = MIGRATIONS.iter().map(|m| (m.0, m.1.to_string())).collect();
    assert_eq!(got, want);
    // And again: nothing to apply; a connection now passes the check.
    assert!(cuzk_queue::migrate(&mut c).unwrap().is_empty());
    Queue::connect(&url).unwrap();
    // A database one migration behind is refused too.
    let known = cuzk_queue::schema_version();
    c.execute("DELETE FROM cuzk_migrations WHERE version = $1", &[&known])
        .unwrap();
    let err = Queue::connect(&url).unwrap_err();
    assert!(
        matches!(err, cuzk_queue::QueueError::SchemaBehind { .. }),
        "{err}"
    );
    c.execute(
        "INSERT INTO cuzk_migrations (version, name) VALUES ($1, 'again')",
        &[&known],
    )
    .unwrap();
    // A database newer than this build is refused.
    c.execute(
        "INSERT INTO cuzk_migrations (version, name) VALUES (9999, 'future')",
        &[],
    )
    .unwrap();
    let err = Queue::connect(&url).unwrap_err();
    assert!(err.to_string().contains("9999"), "{err}");
}

#[test]
fn claims_go_by_priority_then_submission_and_only_for_known_kinds() {
    let Some(url) = common::migrated_database("order") else {
        return;
    };
    let mut q = Queue::connect(&url).unwrap();
    let a = q.submit(&job("k", b"a", 0, 3)).unwrap().id;
    let b = q.submit(&job("k", b"b", 5, 3)).unwrap().id;
    let c = q.submit(&job("k", b"c", 5, 3)).unwrap().id;
    let other = q.submit(&job("other", b"o", 9, 3)).unwrap().id;
    let d = q.submit(&job("k", b"d", -1, 3)).unwrap().id;
    let mut order = Vec::new();
    while let Some(j) = q.claim("w", &kinds(&["k"]), LEASE).unwrap() {
        assert_eq!(j.attempt, 1);
        assert_eq!(j.kind, "k");
        order.push(j.id);
    }
    assert_eq!(order, [b, c, a, d]);
    let s = q.status(other).unwrap();
    assert_eq!(s.state, JobState::Queued);
    assert_eq!(s.attempts, 0);
    assert!(matches!(
        q.submit(&job("k", b"", 0, 0)),
        Err(cuzk_queue::QueueError::BadSubmission { .. })
    ));
    assert!(matches!(
        q.status(123456),
        Err(cuzk_queue::QueueError::NoSuchJob(123456))
    ));
}

#[test]
fn concurrent_claimers_never_take_the_same_job() {
    let Some(url) = common::migrated_database("contend") else {
        return;
    };
    let mut q = Queue::connect(&url).unwrap();
    let n = 200;
    let submitted: HashSet<i64> = (0..n)
        .map(|i| q.submit(&job("k", &[i as u8], 0, 1)).unwrap().id)
        .collect();
    let threads: Vec<_> = (0..6)
        .map(|t| {
            let url = url.clone();
            std::thread::spawn(move || {
                let mut q = Queue::connect(&url).unwrap();
                let mut mine = Vec::new();
                while let Some(j) = q.claim(&format!("w{t}"), &kinds(&["k"]), LEASE).unwrap() {
                    mine.push(j.id);
                }
                mine
            })
        })
        .collect();
    let mut all = Vec::new();
    for t in threads {
        all.extend(t.join().unwrap());
    }
    assert_eq!(all.len(), n, "every job claimed exactly once");
    assert_eq!(all.into_iter().collect::<HashSet<_>>(), submitted);
}

#[test]
fn an_expired_lease_is_claimed_again_and_completion_is_idempotent() {
    let Some(url) = common::migrated_database("lease") else {
        return;
    };
    let mut q = Queue::connect(&url).unwrap();
    let id = q.submit(&job("k", b"x", 0, 3)).unwrap().id;
    let short = Duration::from_millis(500);
    let first = q.claim("w1", &kinds(&["k"]), short).unwrap().unwrap();
    assert_eq!(first.id, id);
    assert!(q.renew(id, "w1", short).unwrap());
    // Held: nobody else gets it.
    assert!(q.claim("w2", &kinds(&["k"]), LEASE).unwrap().is_none());
    std::thread::sleep(Duration::from_millis(800));
    let second = q.claim("w2", &kinds(&["k"]), LEASE).unwrap().unwrap();
    assert_eq!((second.id, second.attempt), (id, 2));
    // w1 has lost it.
    assert!(!q.renew(id, "w1", short).unwrap());
    let s = q.status(id).unwrap();
    assert_eq!(s.worker.as_deref(), Some("w2"));
    assert_eq!(s.errors.len(), 1);
    assert!(
        s.errors[0].contains("attempt 1 on w1") && s.errors[0].contains("lease expired"),
        "{:?}",
        s.errors
    );

    // w1 finishes anyway and writes first: refused, it no longer holds the job.
    assert_eq!(
        q.complete(id, "w1", b"proof-1").unwrap(),
        Completion::NotHolder
    );
    assert_eq!(q.status(id).unwrap().state, JobState::Running);
    // The holder's proof is the job's; writing it again is harmless.
    assert_eq!(
        q.complete(id, "w2", b"proof-2").unwrap(),
        Completion::Written
    );
    assert_eq!(
        q.complete(id, "w2", b"proof-2").unwrap(),
        Completion::AlreadyDone { same: true }
    );
    assert_eq!(
        q.complete(id, "w1", b"proof-1").unwrap(),
        Completion::AlreadyDone { same: false }
    );
    let s = q.status(id).unwrap();
    assert_eq!(s.state, JobState::Done);
    assert_eq!(s.proof.as_deref(), Some(&b"proof-2"[..]));
    assert_eq!(s.done_by.as_deref(), Some("w2"));
    assert_eq!((s.writes, s.refused_writes), (4, 1));
    assert!(s.worker.is_none());
    // A late failure report changes nothing but the errors.
    assert_eq!(q.fail(id, "w2", "late").unwrap(), JobState::Done);
    assert!(q.claim("w3", &kinds(&["k"]), LEASE).unwrap().is_none());
}

#[test]
fn a_job_fails_for_good_after_its_attempts_with_every_error() {
    let Some(url) = common::migrated_database("attempts") else {
        return;
    };
    let mut q = Queue::connect(&url).unwrap();
    let id = q.submit(&job("k", b"bad", 0, 3)).unwrap().id;
    for attempt in 1..=3 {
        let j = q.claim("w", &kinds(&["k"]), LEASE).unwrap().unwrap();
        assert_eq!((j.id, j.attempt), (id, attempt));
        let after = q
            .fail(id, "w", &format!("input is bad ({attempt})"))
            .unwrap();
        let want = if attempt < 3 {
            JobState::Queued
        } else {
            JobState::Failed
        };
        assert_eq!(after, want);
    }
    assert!(q.claim("w", &kinds(&["k"]), LEASE).unwrap().is_none());
    let s = q.status(id).unwrap();
    assert_eq!((s.state, s.attempts), (JobState::Failed, 3));
    assert_eq!(
        s.errors,
        [
            "attempt 1 on w: input is bad (1)",
            "attempt 2 on w: input is bad (2)",
            "attempt 3 on w: input is bad (3)"
        ]
    );
    // A proof arriving after the job failed is discarded.
    assert_eq!(
        q.complete(id, "w", b"p").unwrap(),
        Completion::AlreadyFailed
    );

    // A job whose worker dies on its last attempt is failed, not held for ever.
    let id = q.submit(&job("k", b"x", 0, 1)).unwrap().id;
    q.claim("dead", &kinds(&["k"]), Duration::from_millis(500))
        .unwrap()
        .unwrap();
    assert_eq!(q.fail_expired().unwrap(), 0);
    std::thread::sleep(Duration::from_millis(800));
    assert!(q.claim("w", &kinds(&["k"]), LEASE).unwrap().is_none());
    assert_eq!(q.fail_expired().unwrap(), 1);
    let s = q.status(id).unwrap();
    assert_eq!(s.state, JobState::Failed);
    assert!(
        s.errors[0].contains("on dead: lease expired"),
        "{:?}",
        s.errors
    );
}

/// Reverses its input after `delay`; fails on input "bad"; panics on "panic".
struct Reverse {
    delay: Duration,
    calls: AtomicUsize,
}

impl JobRunner for Reverse {
    fn kind(&self) -> &str {
        "reverse"
    }
    fn run(&self, job: &ClaimedJob, _cancel: &Cancel) -> Result<Vec<u8>, RunError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(self.delay);
        match &job.input[..] {
            b"bad" => Err(RunError("the input is bad".into())),
            b"panic" => panic!("the runner fell over"),
            x => Ok(x.iter().rev().copied().collect()),
        }
    }
}

#[test]
fn the_worker_loop_proves_fails_renews_and_catches_panics() {
    let Some(url) = common::migrated_database("worker") else {
        return;
    };
    let mut q = Queue::connect(&url).unwrap();
    let good: Vec<i64> = (0..10u8)
        .map(|i| q.submit(&job("reverse", &[i, 1, 2], 0, 2)).unwrap().id)
        .collect();
    let bad = q.submit(&job("reverse", b"bad", 0, 2)).unwrap().id;
    let panics = q.submit(&job("reverse", b"panic", 0, 1)).unwrap().id;
    // One job outlives several leases: renewal must keep it.
    let slow = q.submit(&job("reverse", b"slow", 0, 1)).unwrap().id;
    let runner = Arc::new(Reverse {
        delay: Duration::from_millis(20),
        calls: AtomicUsize::new(0),
    });
    let slow_runner = Arc::new(SlowOnce {
        inner: runner.clone(),
    });
    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = events.clone();
    let worker = Worker::new(
        &url,
        WorkerOptions {
            id: "w".into(),
            host: "test".into(),
            config: QueueConfig {
                lease_secs: 0.8,
                poll_ms: 50,
                jobs_in_flight: 3,
                max_attempts: 2,
                ..QueueConfig::default()
            },
            drain: true,
        },
        vec![slow_runner],
        move |e| seen.lock().unwrap().push(e.clone()),
    )
    .unwrap();
    let stats = worker.run(&AtomicBool::new(false)).unwrap();
    assert_eq!(stats.done, 11);
    assert_eq!(stats.failed, 3);
    assert_eq!(stats.late, 0);
    for (i, id) in good.iter().enumerate() {
        let s = q.status(*id).unwrap();
        assert_eq!(s.state, JobState::Done);
        assert_eq!(s.proof.unwrap(), [2, 1, i as u8]);
        assert_eq!((s.attempts, s.writes), (1, 1));
    }
    let s = q.status(slow).unwrap();
    assert_eq!((s.state, s.attempts), (JobState::Done, 1), "{:?}", s.errors);
    let s = q.status(bad).unwrap();
    assert_eq!((s.state, s.attempts), (JobState::Failed, 2));
    assert!(s.errors.iter().all(|e| e.ends_with("the input is bad")));
    let s = q.status(panics).unwrap();
    assert_eq!(s.state, JobState::Failed);
    assert!(
        s.errors[0].contains("panicked: the runner fell over"),
        "{:?}",
        s.errors
    );
    let events = events.lock().unwrap();
    assert!(!events
        .iter()
        .any(|e| matches!(e, WorkerEvent::LeaseLost { .. })));
}

/// `Reverse`, but input "slow" takes 2 s: two and a half leases of 0.8 s, renewed every 0.27 s.
struct SlowOnce {
    inner: Arc<Reverse>,
}

impl JobRunner for SlowOnce {
    fn kind(&self) -> &str {
        self.inner.kind()
    }
    fn run(&self, job: &ClaimedJob, cancel: &Cancel) -> Result<Vec<u8>, RunError> {
        if job.input == b"slow" {
            std::thread::sleep(Duration::from_secs(2));
        }
        self.inner.run(job, cancel)
    }
}

#[test]
fn the_url_is_checked_before_anything_runs() {
    let err = Worker::new(
        "postgres://host:notaport/db",
        WorkerOptions {
            id: "w".into(),
            host: "test".into(),
            config: QueueConfig::default(),
            drain: true,
        },
        vec![],
        |_| {},
    )
    .unwrap_err();
    assert!(err.to_string().contains("URL"), "{err}");
}

/// Holds its job until cancelled (then fails, as a cancelled engine job does) or
/// until `finish` is set (then reverses the input).
struct Holds {
    started: AtomicUsize,
    finish: Arc<AtomicBool>,
}

impl JobRunner for Holds {
    fn kind(&self) -> &str {
        "hold"
    }
    fn run(&self, job: &ClaimedJob, cancel: &Cancel) -> Result<Vec<u8>, RunError> {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        cancel.on_cancel(move || {
            let _ = tx.send(());
        });
        self.started.fetch_add(1, Ordering::SeqCst);
        loop {
            if rx.recv_timeout(Duration::from_millis(10)).is_ok() {
                return Err(RunError("cancelled".into()));
            }
            if self.finish.load(Ordering::SeqCst) {
                return Ok(job.input.iter().rev().copied().collect());
            }
        }
    }
}

/// A worker told to stop mid-job: with `finish` it writes that job back and
/// claims no other; with `release` the job goes back to the queue, its attempt
/// not counted, and the next worker proves it once.
#[test]
fn a_stopping_worker_finishes_or_releases_its_job_and_claims_no_more() {
    let Some(url) = common::migrated_database("stop") else {
        return;
    };
    let mut q = Queue::connect(&url).unwrap();
    for on_stop in [OnStop::Finish, OnStop::Release] {
        let held = q.submit(&job("hold", &[1, 2, 3], 1, 1)).unwrap().id;
        let next = q.submit(&job("hold", &[4, 5], 0, 1)).unwrap().id;
        let finish = Arc::new(AtomicBool::new(false));
        let runner = Arc::new(Holds {
            started: AtomicUsize::new(0),
            finish: finish.clone(),
        });
        let worker = |id: &str, runner: Arc<Holds>, drain: bool| {
            Worker::new(
                &url,
                WorkerOptions {
                    id: id.into(),
                    host: "test".into(),
                    config: QueueConfig {
                        poll_ms: 20,
                        jobs_in_flight: 1,
                        on_stop,
                        ..QueueConfig::default()
                    },
                    drain,
                },
                vec![runner],
                |_| {},
            )
            .unwrap()
        };
        let stop = AtomicBool::new(false);
        let stats = std::thread::scope(|s| {
            let w = worker("stopped", runner.clone(), false);
            let stop = &stop;
            let running = s.spawn(move || w.run(stop).unwrap());
            while runner.started.load(Ordering::SeqCst) == 0 {
                std::thread::sleep(Duration::from_millis(5));
            }
            stop.store(true, Ordering::SeqCst);
            if on_stop == OnStop::Finish {
                // The stop waits for the proof; it comes after the stop.
                std::thread::sleep(Duration::from_millis(100));
                assert_eq!(q.status(held).unwrap().state, JobState::Running);
                finish.store(true, Ordering::SeqCst);
            }
            running.join().unwrap()
        });
        assert_eq!(runner.started.load(Ordering::SeqCst), 1, "{on_stop:?}");
        let s = q.status(next).unwrap();
        assert_eq!((s.state, s.attempts), (JobState::Queued, 0), "{on_stop:?}");
        let s = q.status(held).unwrap();
        match on_stop {
            OnStop::Finish => {
                assert_eq!((stats.done, stats.released), (1, 0));
                assert_eq!((s.state, s.attempts, s.writes), (JobState::Done, 1, 1));
                assert_eq!(s.done_by.as_deref(), Some("stopped"));
            }
            OnStop::Release => {
                assert_eq!((stats.done, stats.released, stats.failed), (0, 1, 0));
                // Back in the queue as if never claimed: one attempt left of one.
                assert_eq!((s.state, s.attempts), (JobState::Queued, 0));
                assert!(s.errors.is_empty() && s.worker.is_none(), "{s:?}");
            }
        }
        // Another worker takes what is left, each job once.
        finish.store(true, Ordering::SeqCst);
        let after = Arc::new(Holds {
            started: AtomicUsize::new(0),
            finish,
        });
        worker("next", after, true)
            .run(&AtomicBool::new(false))
            .unwrap();
        for (id, proof) in [(held, vec![3, 2, 1]), (next, vec![5, 4])] {
            let s = q.status(id).unwrap();
            assert_eq!((s.state, s.attempts, s.writes), (JobState::Done, 1, 1));
            assert_eq!(s.proof.unwrap(), proof);
        }
    }
}
