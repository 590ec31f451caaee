//! The queue's statements: submit, claim, renew, complete, fail, and reading a
//! job's status.

use std::time::Duration;

use postgres::{Client, Row};

use crate::{check_schema, Database, QueueError};

/// A job's id in the queue (the row's primary key).
pub type JobId = i64;

/// Where a job is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobState {
    /// Waiting for a worker (or for another attempt).
    Queued,
    /// Held by a worker under a lease.
    Running,
    /// Its verified proof is written.
    Done,
    /// It failed `max_attempts` times; its errors say why.
    Failed,
}

impl JobState {
    fn parse(s: &str) -> JobState {
        match s {
            "queued" => JobState::Queued,
            "running" => JobState::Running,
            "done" => JobState::Done,
            // The schema's CHECK admits nothing else.
            _ => JobState::Failed,
        }
    }

    /// The word the database and `cuzk queue status` use.
    pub fn name(self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Running => "running",
            JobState::Done => "done",
            JobState::Failed => "failed",
        }
    }

    /// Done or failed: nothing will change it any more.
    pub fn is_final(self) -> bool {
        matches!(self, JobState::Done | JobState::Failed)
    }
}

/// A job to put in the queue.
#[derive(Clone, Debug)]
pub struct Submission {
    /// Which runner proves it.
    pub kind: String,
    /// The runner's input.
    pub input: Vec<u8>,
    /// Higher is claimed first; ties go in submission order.
    pub priority: i32,
    /// Attempts before the job is marked failed (at least 1).
    pub max_attempts: u32,
    /// The idempotency key (`[A-Za-z0-9._:-]`, 1 to 128 characters): a second
    /// submission with the same key returns the first job instead of a new row.
    pub request_id: Option<String>,
}

/// A submission's outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Submitted {
    pub id: JobId,
    /// The request id was already known: `id` is the job it was first
    /// submitted as, and nothing new was queued.
    pub existing: bool,
}

/// Whether `id` is a valid request id: 1 to 128 characters of `A-Z a-z 0-9 . _ : -`
/// (the same rule as the schema's CHECK, so a file name, a log line or a metric
/// label can carry it as it is).
pub fn is_valid_request_id(id: &str) -> bool {
    (1..=128).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
}

/// A short, printable view of a string that may be long or hostile, for errors.
pub(crate) fn preview(s: &str) -> String {
    let head: String = s.chars().take(40).flat_map(char::escape_default).collect();
    if s.chars().count() > 40 {
        format!("{head}... ({} bytes)", s.len())
    } else {
        head
    }
}

/// A job a worker has claimed.
#[derive(Clone, Debug)]
pub struct ClaimedJob {
    pub id: JobId,
    pub kind: String,
    pub input: Vec<u8>,
    pub priority: i32,
    /// This claim's number: 1 for the first, 2 after a failure or an expired lease.
    pub attempt: i32,
}

/// What a job looks like from outside.
#[derive(Clone, Debug)]
pub struct JobStatus {
    pub id: JobId,
    pub kind: String,
    pub state: JobState,
    pub priority: i32,
    pub attempts: i32,
    pub max_attempts: i32,
    /// The worker holding it (running jobs).
    pub worker: Option<String>,
    /// The worker whose proof was kept (done jobs).
    pub done_by: Option<String>,
    /// The proof (done jobs).
    pub proof: Option<Vec<u8>>,
    /// Completion writes seen: 1 normally, more when a worker whose lease had
    /// expired finished too (its proof was discarded).
    pub writes: i32,
    /// One line per failed attempt.
    pub errors: Vec<String>,
    /// Seconds from submission to the end (final jobs).
    pub seconds: Option<f64>,
    /// Its idempotency key, if it was submitted with one.
    pub request_id: Option<String>,
    /// Completion writes refused because their worker no longer held the job.
    pub refused_writes: i32,
}

/// What a completion write did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Completion {
    /// This proof is the job's.
    Written,
    /// The job was already done (another worker finished first after this one's
    /// lease expired); `same` says whether the stored proof has the same bytes.
    /// The stored proof is kept either way.
    AlreadyDone { same: bool },
    /// The job had already been marked failed; the proof is discarded.
    AlreadyFailed,
    /// This worker no longer held the job (its lease expired and another worker
    /// claimed it, or it was released): the write is refused, counted and
    /// discarded, so the lease holder's proof is the job's.
    NotHolder,
}

/// What `prune` deleted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    pub done: u64,
    pub failed: u64,
}

/// A connection to the queue.
pub struct Queue {
    client: Client,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue").finish_non_exhaustive()
    }
}

const STATUS_COLUMNS: &str = "id, kind, state, priority, attempts, max_attempts, worker, \
     done_by, proof, writes, errors, \
     extract(epoch FROM finished_at - submitted_at)::float8, request_id, refused_writes";

fn status_of(row: &Row) -> JobStatus {
    JobStatus {
        id: row.get(0),
        kind: row.get(1),
        state: JobState::parse(row.get(2)),
        priority: row.get(3),
        attempts: row.get(4),
        max_attempts: row.get(5),
        worker: row.get(6),
        done_by: row.get(7),
        proof: row.get(8),
        writes: row.get(9),
        errors: row.get(10),
        seconds: row.get(11),
        request_id: row.get(12),
        refused_writes: row.get(13),
    }
}

impl Queue {
    /// Connects to `db` (a URL, or a [`Database`] with a CA file) and checks that
    /// its schema is this build's: one behind is refused with "run `cuzk queue
    /// migrate`" (a connection never changes the schema).
    pub fn connect(db: impl Into<Database>) -> Result<Queue, QueueError> {
        let mut client = db.into().open()?;
        check_schema(&mut client)?;
        Ok(Queue { client })
    }

    /// Puts a job in the queue; a job with the same request id submitted before
    /// is returned instead (`existing`), never a second row.
    pub fn submit(&mut self, job: &Submission) -> Result<Submitted, QueueError> {
        let max_attempts = i32::try_from(job.max_attempts)
            .ok()
            .filter(|&m| m > 0)
            .ok_or(QueueError::BadSubmission {
                what: "max_attempts",
                rule: "between 1 and 2^31-1",
                value: job.max_attempts as i64,
            })?;
        if let Some(key) = &job.request_id {
            if !is_valid_request_id(key) {
                return Err(QueueError::BadRequestId(preview(key)));
            }
        }
        // Inserted, or (a key submitted before) nothing: then the first job's id.
        // A loop, because that first job may be pruned between the two statements.
        loop {
            let row = self
                .client
                .query_opt(
                    "INSERT INTO cuzk_jobs (kind, input, priority, max_attempts, request_id)
                     VALUES ($1, $2, $3, $4, $5)
                     ON CONFLICT (request_id) DO NOTHING RETURNING id",
                    &[
                        &job.kind,
                        &job.input,
                        &job.priority,
                        &max_attempts,
                        &job.request_id,
                    ],
                )
                .map_err(QueueError::db("submitting a job"))?;
            if let Some(row) = row {
                return Ok(Submitted {
                    id: row.get(0),
                    existing: false,
                });
            }
            let first = self
                .client
                .query_opt(
                    "SELECT id FROM cuzk_jobs WHERE request_id = $1",
                    &[&job.request_id],
                )
                .map_err(QueueError::db("finding a request id's job"))?;
            if let Some(row) = first {
                return Ok(Submitted {
                    id: row.get(0),
                    existing: true,
                });
            }
        }
    }

    /// The job submitted with request id `key`, if any.
    pub fn find_request(&mut self, key: &str) -> Result<Option<JobId>, QueueError> {
        Ok(self
            .client
            .query_opt("SELECT id FROM cuzk_jobs WHERE request_id = $1", &[&key])
            .map_err(QueueError::db("finding a request id's job"))?
            .map(|r| r.get(0)))
    }

    /// Claims the next job of one of `kinds` for `worker`, holding it for `lease`:
    /// in one statement, the open job (queued, or running under an expired lease)
    /// of highest priority, then earliest submitted, that no other transaction
    /// holds, with attempts left. A job taken from an expired lease gets a line
    /// in its errors naming the worker that lost it.
    pub fn claim(
        &mut self,
        worker: &str,
        kinds: &[String],
        lease: Duration,
    ) -> Result<Option<ClaimedJob>, QueueError> {
        let row = self
            .client
            .query_opt(
                "WITH next AS (
                     SELECT id FROM cuzk_jobs
                      WHERE state IN ('queued', 'running')
                        AND (state = 'queued' OR lease_until < now())
                        AND attempts < max_attempts
                        AND kind = ANY($2)
                      ORDER BY priority DESC, id
                      LIMIT 1
                      FOR UPDATE SKIP LOCKED)
                 UPDATE cuzk_jobs j
                    SET state = 'running',
                        worker = $1,
                        attempts = j.attempts + 1,
                        lease_until = now() + make_interval(secs => $3),
                        started_at = now(),
                        errors = CASE WHEN j.state = 'running'
                            THEN j.errors || format('attempt %s on %s: lease expired (worker died or lost the database)',
                                                    j.attempts, j.worker)
                            ELSE j.errors END
                   FROM next
                  WHERE j.id = next.id
                 RETURNING j.id, j.kind, j.input, j.priority, j.attempts",
                &[&worker, &kinds, &lease.as_secs_f64()],
            )
            .map_err(QueueError::db("claiming a job"))?;
        Ok(row.map(|r| ClaimedJob {
            id: r.get(0),
            kind: r.get(1),
            input: r.get(2),
            priority: r.get(3),
            attempt: r.get(4),
        }))
    }

    /// Marks failed the running jobs whose lease expired on their last attempt
    /// (their worker died every time): no claim will take them again. Returns
    /// how many.
    pub fn fail_expired(&mut self) -> Result<u64, QueueError> {
        self.client
            .execute(
                "UPDATE cuzk_jobs
                    SET state = 'failed', finished_at = now(), worker = NULL, lease_until = NULL,
                        errors = errors || format('attempt %s on %s: lease expired (worker died or lost the database)',
                                                  attempts, worker)
                  WHERE state = 'running' AND lease_until < now() AND attempts >= max_attempts",
                &[],
            )
            .map_err(QueueError::db("failing jobs out of attempts"))
    }

    /// Extends `worker`'s lease on job `id`. `false`: the lease was lost (it
    /// expired and another worker claimed the job, or the job is finished); the
    /// worker may still finish, and its write will be counted and discarded if
    /// another's came first.
    pub fn renew(&mut self, id: JobId, worker: &str, lease: Duration) -> Result<bool, QueueError> {
        let n = self
            .client
            .execute(
                "UPDATE cuzk_jobs SET lease_until = now() + make_interval(secs => $3)
                  WHERE id = $1 AND worker = $2 AND state = 'running'",
                &[&id, &worker, &lease.as_secs_f64()],
            )
            .map_err(QueueError::db("renewing a lease"))?;
        Ok(n == 1)
    }

    /// Writes job `id`'s verified proof, as `worker`. Only the worker holding the
    /// job may write it: a write from one that lost it (its lease expired and
    /// another claimed the job, or it was put back in the queue) is refused,
    /// counted and discarded ([`Completion::NotHolder`]), so the lease holder's
    /// proof is the job's. Idempotent: a write to a job already done is counted
    /// and discarded too.
    pub fn complete(
        &mut self,
        id: JobId,
        worker: &str,
        proof: &[u8],
    ) -> Result<Completion, QueueError> {
        let mut tx = self
            .client
            .transaction()
            .map_err(QueueError::db("completing a job"))?;
        let row = tx
            .query_opt(
                "SELECT state, proof, worker FROM cuzk_jobs WHERE id = $1 FOR UPDATE",
                &[&id],
            )
            .map_err(QueueError::db("completing a job"))?
            .ok_or(QueueError::NoSuchJob(id))?;
        let state = JobState::parse(row.get(0));
        let holder: Option<String> = row.get(2);
        let outcome = match state {
            JobState::Running if holder.as_deref() == Some(worker) => {
                tx.execute(
                    "UPDATE cuzk_jobs
                        SET state = 'done', proof = $2, done_by = $3, writes = writes + 1,
                            worker = NULL, lease_until = NULL, finished_at = now()
                      WHERE id = $1",
                    &[&id, &proof, &worker],
                )
                .map_err(QueueError::db("writing a proof"))?;
                Completion::Written
            }
            JobState::Queued | JobState::Running => Completion::NotHolder,
            JobState::Done => {
                let stored: Vec<u8> = row.get(1);
                Completion::AlreadyDone {
                    same: stored == proof,
                }
            }
            JobState::Failed => Completion::AlreadyFailed,
        };
        if outcome != Completion::Written {
            tx.execute(
                "UPDATE cuzk_jobs
                    SET writes = writes + 1,
                        refused_writes = refused_writes + CASE WHEN $2 THEN 1 ELSE 0 END
                  WHERE id = $1",
                &[&id, &(outcome == Completion::NotHolder)],
            )
            .map_err(QueueError::db("counting a late write"))?;
        }
        tx.commit().map_err(QueueError::db("completing a job"))?;
        Ok(outcome)
    }

    /// Records that `worker`'s attempt at job `id` failed with `error`: the job is
    /// queued again, or failed if that was its last attempt. Returns the job's
    /// state after. A worker that no longer holds the job (its lease expired)
    /// only adds its error.
    pub fn fail(&mut self, id: JobId, worker: &str, error: &str) -> Result<JobState, QueueError> {
        let row = self
            .client
            .query_opt(
                "UPDATE cuzk_jobs
                    SET errors = errors || format('attempt %s on %s: %s', attempts, worker, $3::text),
                        state = CASE WHEN attempts >= max_attempts THEN 'failed' ELSE 'queued' END,
                        finished_at = CASE WHEN attempts >= max_attempts THEN now() END,
                        worker = NULL, lease_until = NULL
                  WHERE id = $1 AND worker = $2 AND state = 'running'
                 RETURNING state",
                &[&id, &worker, &error],
            )
            .map_err(QueueError::db("recording a failure"))?;
        if let Some(row) = row {
            return Ok(JobState::parse(row.get(0)));
        }
        let row = self
            .client
            .query_opt(
                "UPDATE cuzk_jobs SET errors = errors || format('late failure on %s: %s', $2::text, $3::text)
                  WHERE id = $1 RETURNING state",
                &[&id, &worker, &error],
            )
            .map_err(QueueError::db("recording a failure"))?
            .ok_or(QueueError::NoSuchJob(id))?;
        Ok(JobState::parse(row.get(0)))
    }

    /// Puts job `id`, held by `worker`, back in the queue unfinished (the worker
    /// is stopping): queued again at once, its attempt not counted, no error
    /// recorded. `false` if `worker` no longer held it (its lease had expired and
    /// another worker claimed it, or it is finished): nothing changes then.
    pub fn release(&mut self, id: JobId, worker: &str) -> Result<bool, QueueError> {
        let n = self
            .client
            .execute(
                "UPDATE cuzk_jobs
                    SET state = 'queued', attempts = attempts - 1,
                        worker = NULL, lease_until = NULL, started_at = NULL
                  WHERE id = $1 AND worker = $2 AND state = 'running'",
                &[&id, &worker],
            )
            .map_err(QueueError::db("releasing a job"))?;
        Ok(n == 1)
    }

    /// Deletes done and failed jobs (their inputs and proofs with them) that
    /// finished more than `keep` ago. Queued and running jobs are never touched.
    pub fn prune(&mut self, keep: Duration) -> Result<Pruned, QueueError> {
        let row = self
            .client
            .query_one(
                "WITH gone AS (
                     DELETE FROM cuzk_jobs
                      WHERE state IN ('done', 'failed')
                        AND finished_at < now() - make_interval(secs => $1)
                     RETURNING state)
                 SELECT count(*) FILTER (WHERE state = 'done'),
                        count(*) FILTER (WHERE state = 'failed')
                   FROM gone",
                &[&keep.as_secs_f64()],
            )
            .map_err(QueueError::db("pruning finished jobs"))?;
        let (done, failed): (i64, i64) = (row.get(0), row.get(1));
        Ok(Pruned {
            done: done as u64,
            failed: failed as u64,
        })
    }

    /// Registers worker `id` as alive (heartbeat now; stale after `stale_after`
    /// without one). An id held by a live worker is refused, naming it; a dead
    /// worker's (stale heartbeat) is taken over.
    pub fn register_worker(
        &mut self,
        id: &str,
        host: &str,
        pid: u32,
        stale_after: Duration,
    ) -> Result<(), QueueError> {
        let pid = pid as i32;
        let taken = self
            .client
            .query_opt(
                "INSERT INTO cuzk_workers (id, host, pid, stale_after)
                 VALUES ($1, $2, $3, make_interval(secs => $4))
                 ON CONFLICT (id) DO UPDATE
                    SET host = EXCLUDED.host, pid = EXCLUDED.pid, started_at = now(),
                        heartbeat_at = now(), stale_after = EXCLUDED.stale_after
                  WHERE cuzk_workers.heartbeat_at + cuzk_workers.stale_after < now()
                 RETURNING id",
                &[&id, &host, &pid, &stale_after.as_secs_f64()],
            )
            .map_err(QueueError::db("registering the worker"))?;
        if taken.is_some() {
            return Ok(());
        }
        let row = self
            .client
            .query_opt(
                "SELECT host, pid, extract(epoch FROM now() - heartbeat_at)::float8
                   FROM cuzk_workers WHERE id = $1",
                &[&id],
            )
            .map_err(QueueError::db("registering the worker"))?;
        match row {
            Some(r) => Err(QueueError::WorkerIdTaken {
                id: id.to_string(),
                host: r.get(0),
                pid: r.get(1),
                seconds_ago: r.get(2),
            }),
            // Deleted in between (that worker exited): try again.
            None => self.register_worker(id, host, pid as u32, stale_after),
        }
    }

    /// Renews worker `id`'s heartbeat; `false` if its row is gone or another
    /// process (`host`, `pid`) took it over after this one's went stale.
    pub fn heartbeat(&mut self, id: &str, host: &str, pid: u32) -> Result<bool, QueueError> {
        let n = self
            .client
            .execute(
                "UPDATE cuzk_workers SET heartbeat_at = now()
                  WHERE id = $1 AND host = $2 AND pid = $3",
                &[&id, &host, &(pid as i32)],
            )
            .map_err(QueueError::db("renewing the worker's heartbeat"))?;
        Ok(n == 1)
    }

    /// Removes worker `id`'s row (a clean exit), if it is still this process's.
    pub fn unregister_worker(&mut self, id: &str, host: &str, pid: u32) -> Result<(), QueueError> {
        self.client
            .execute(
                "DELETE FROM cuzk_workers WHERE id = $1 AND host = $2 AND pid = $3",
                &[&id, &host, &(pid as i32)],
            )
            .map_err(QueueError::db("removing the worker"))?;
        Ok(())
    }

    /// The live workers' ids (heartbeat not stale), sorted.
    pub fn live_workers(&mut self) -> Result<Vec<String>, QueueError> {
        Ok(self
            .client
            .query(
                "SELECT id FROM cuzk_workers WHERE heartbeat_at + stale_after >= now() ORDER BY id",
                &[],
            )
            .map_err(QueueError::db("listing the workers"))?
            .iter()
            .map(|r| r.get(0))
            .collect())
    }

    /// The status of job `id`.
    pub fn status(&mut self, id: JobId) -> Result<JobStatus, QueueError> {
        let row = self
            .client
            .query_opt(
                &format!("SELECT {STATUS_COLUMNS} FROM cuzk_jobs WHERE id = $1"),
                &[&id],
            )
            .map_err(QueueError::db("reading a job's status"))?
            .ok_or(QueueError::NoSuchJob(id))?;
        Ok(status_of(&row))
    }

    /// The statuses of jobs `ids`, in id order (an unknown id is an error).
    pub fn statuses(&mut self, ids: &[JobId]) -> Result<Vec<JobStatus>, QueueError> {
        let rows = self
            .client
            .query(
                &format!("SELECT {STATUS_COLUMNS} FROM cuzk_jobs WHERE id = ANY($1) ORDER BY id"),
                &[&ids],
            )
            .map_err(QueueError::db("reading jobs' status"))?;
        let found: Vec<JobStatus> = rows.iter().map(status_of).collect();
        if let Some(&missing) = ids.iter().find(|id| !found.iter().any(|s| s.id == **id)) {
            return Err(QueueError::NoSuchJob(missing));
        }
        Ok(found)
    }

    /// How many jobs are in each state: (queued, running, done, failed).
    pub fn counts(&mut self) -> Result<[i64; 4], QueueError> {
        let row = self
            .client
            .query_one(
                "SELECT count(*) FILTER (WHERE state = 'queued'),
                        count(*) FILTER (WHERE state = 'running'),
                        count(*) FILTER (WHERE state = 'done'),
                        count(*) FILTER (WHERE state = 'failed')
                   FROM cuzk_jobs",
                &[],
            )
            .map_err(QueueError::db("counting jobs"))?;
        Ok([row.get(0), row.get(1), row.get(2), row.get(3)])
    }

    /// Waits until every job of `ids` is done or failed, looking every `poll`;
    /// `None` as timeout waits for ever. Returns their statuses, or `None` on
    /// timeout.
    pub fn wait(
        &mut self,
        ids: &[JobId],
        poll: Duration,
        timeout: Option<Duration>,
    ) -> Result<Option<Vec<JobStatus>>, QueueError> {
        let start = std::time::Instant::now();
        loop {
            let all = self.statuses(ids)?;
            if all.iter().all(|s| s.state.is_final()) {
                return Ok(Some(all));
            }
            if timeout.is_some_and(|t| start.elapsed() >= t) {
                return Ok(None);
            }
            std::thread::sleep(poll);
        }
    }

    /// Whether this connection is encrypted, as the server sees it (`pg_stat_ssl`).
    pub fn connection_uses_tls(&mut self) -> Result<bool, QueueError> {
        Ok(self
            .client
            .query_one(
                "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                &[],
            )
            .map_err(QueueError::db("reading pg_stat_ssl"))?
            .get(0))
    }

    /// Whether the connection is still open (false after the server restarted).
    pub fn is_closed(&self) -> bool {
        self.client.is_closed()
    }
}
