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
//! into the other. The schema is created by whoever connects first, from the
//! numbered migrations in `migrations/` ([`migrate`]).

#![forbid(unsafe_code)]

mod config;
mod error;
mod migrate;
mod store;
mod worker;

pub use config::{OnStop, QueueConfig};
pub use error::QueueError;
pub use migrate::{migrate, MIGRATIONS};
pub use store::{ClaimedJob, Completion, JobId, JobState, JobStatus, Queue, Submission};
pub use worker::{Cancel, JobRunner, RunError, Worker, WorkerEvent, WorkerOptions, WorkerStats};
