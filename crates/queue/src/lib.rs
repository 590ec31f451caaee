//! A work queue of proof jobs in PostgreSQL, for proving farms of many hosts.
//!
//! Filecoin's storage-provider software already shares work between machines
//! through a Postgres-compatible database, each node claiming rows with
//! `SELECT … FOR UPDATE SKIP LOCKED`. cuzk fits that world instead of inventing a
//! cluster of its own: any number of `cuzk worker` processes on any number of
//! hosts claim jobs from one table, each running the same engine it would run
//! alone, and `cuzk queue submit|status|wait` puts jobs in and reads results out.
//!
//! The design in four rules:
//! - **A claim is one statement** ([`Queue::claim`]): a CTE selects the next open
//!   job (queued, or running with an expired lease) by priority then submission
//!   with `FOR UPDATE SKIP LOCKED`, and an `UPDATE … RETURNING` takes it. Two
//!   workers never take the same row at once, and none waits on another's lock.
//! - **A lease is a timestamp** the worker renews while it proves
//!   ([`Queue::renew`]); a worker that dies stops renewing and its job is claimed
//!   again once the lease has passed.
//! - **Completion is idempotent** ([`Queue::complete`]): the first verified proof
//!   written is the job's; a later write (a worker whose lease expired finishing
//!   after all) is counted and discarded, never overwriting the first.
//! - **Failures are bounded**: every failed attempt appends its error; the attempt
//!   that reaches the job's `max_attempts` marks it failed, with all its errors.
//!
//! The queue knows nothing of circuits or proofs: inputs and proofs are bytes, and
//! a [`JobRunner`] per job kind (in the binary that links an engine) turns one
//! into the other (cuzk's one runner submits to `cuzk_service::Service`; the
//! input is the daemon's `SubmitProofRequest`, see `cuzk_daemon::payload`).
//!
//! Production concerns, each a rule too:
//! - **The schema changes only by `cuzk queue migrate`** ([`migrate_database`]),
//!   from the numbered migrations in `migrations/`; a connection checks the
//!   version and refuses a schema behind its own, so workers need no DDL rights.
//! - **TLS as the URL's `sslmode` says** (rustls; the server's certificate is
//!   verified against Mozilla's roots and an optional CA file, [`Database`]).
//! - **A submission's request id is its idempotency key**: the same key twice is
//!   one job ([`Submitted::existing`]).
//! - **A lost lease stops the work**: the worker cancels the job it no longer
//!   holds, and a completion from a worker that is not the job's holder is
//!   refused ([`Completion::NotHolder`]).
//! - **Worker ids are unique while alive** (`cuzk_workers`, a heartbeat the lease
//!   keeper renews); a dead worker's id can be taken over.
//! - **Finished rows are pruned by age** ([`Queue::prune`], `keep_done`).

#![forbid(unsafe_code)]

mod config;
mod connect;
mod error;
mod migrate;
mod store;
mod worker;

pub use config::{OnStop, QueueConfig, PRUNE_EVERY};
pub use connect::Database;
pub use error::QueueError;
pub use migrate::{check_schema, migrate, migrate_database, schema_version, MIGRATIONS};
pub use store::{
    is_valid_request_id, ClaimedJob, Completion, JobId, JobState, JobStatus, Pruned, Queue,
    Submission, Submitted,
};
pub use worker::{Cancel, JobRunner, RunError, Worker, WorkerEvent, WorkerOptions, WorkerStats};
