//! The queue's errors.

use std::path::PathBuf;

use thiserror::Error;

/// What went wrong talking to the queue.
#[derive(Debug, Error)]
pub enum QueueError {
    /// The `--queue` URL did not parse as a PostgreSQL connection string.
    #[error("the queue URL is not a PostgreSQL connection string: {0}")]
    Url(#[source] postgres::Error),
    /// Connecting to PostgreSQL failed (down, refused, authentication, a server
    /// certificate that does not verify).
    #[error("could not connect to the queue's PostgreSQL: {}", with_causes(.0))]
    Connect(#[source] postgres::Error),
    /// `sslmode=require`, and the server does not offer TLS.
    #[error("the queue's URL says sslmode=require but the server does not offer TLS (turn on `ssl` in its postgresql.conf, or use sslmode=prefer/disable): {0}")]
    TlsRefused(#[source] postgres::Error),
    /// The CA file (`[queue] ca_file`, `--ca-file`) could not be used.
    #[error("the queue's CA file {}: {why}", path.display())]
    CaFile { path: PathBuf, why: String },
    /// rustls could not be set up.
    #[error("setting up TLS for the queue failed: {0}")]
    TlsSetup(String),
    /// A statement failed (the connection dropped, the server restarted, ...).
    #[error("the queue's PostgreSQL failed {doing}: {source}")]
    Db {
        doing: &'static str,
        #[source]
        source: postgres::Error,
    },
    /// Migration `version` failed to apply; the schema is left at the one before.
    #[error("applying the queue's migration {version} ({name}) failed: {source}")]
    Migration {
        version: i32,
        name: &'static str,
        #[source]
        source: postgres::Error,
    },
    /// The database holds a migration this build does not know: a newer worker
    /// created it, and this one must not run against it.
    #[error(
        "the queue's database is at migration {found}, newer than this build's {known}: upgrade this cuzk"
    )]
    SchemaTooNew { found: i32, known: i32 },
    /// The database's schema is older than this build's: migrations are applied
    /// only by `cuzk queue migrate` (so workers need no DDL rights).
    #[error(
        "the queue's database is at migration {found}, this build needs {known}: run `cuzk queue migrate` (with a role that may change the schema)"
    )]
    SchemaBehind { found: i32, known: i32 },
    /// Another live worker has this id (its heartbeat is recent).
    #[error("worker id `{id}` is held by a live worker (on {host}, pid {pid}, heartbeat {seconds_ago:.1} s ago): give this one another --id, or stop that one")]
    WorkerIdTaken {
        id: String,
        host: String,
        pid: i32,
        seconds_ago: f64,
    },
    /// A submission's request id (the idempotency key) breaks the rule.
    #[error("a request id must be 1 to 128 characters of A-Z a-z 0-9 . _ : -, not {0:?}")]
    BadRequestId(String),
    /// No job has this id.
    #[error("no job {0} in the queue")]
    NoSuchJob(i64),
    /// A job was submitted with a value the schema refuses.
    #[error("a job's {what} must be {rule}, not {value}")]
    BadSubmission {
        what: &'static str,
        rule: &'static str,
        value: i64,
    },
}

/// An error and its causes joined by ": " (postgres' errors keep the reason a
/// TLS handshake failed in their source only).
pub(crate) fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let t = s.to_string();
        if !text.contains(&t) {
            text.push_str(": ");
            text.push_str(&t);
        }
        source = s.source();
    }
    text
}

impl QueueError {
    pub(crate) fn db(doing: &'static str) -> impl FnOnce(postgres::Error) -> QueueError {
        move |source| QueueError::Db { doing, source }
    }

    /// Whether the connection is gone (the server restarted or went away) and a
    /// new one might succeed, rather than the statement itself being wrong.
    pub fn is_connection_lost(&self) -> bool {
        match self {
            QueueError::Connect(_) => true,
            QueueError::Db { source, .. } | QueueError::Migration { source, .. } => {
                source.is_closed() || source.code().is_none()
            }
            _ => false,
        }
    }
}
