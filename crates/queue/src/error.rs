//! The queue's errors.

use thiserror::Error;

/// What went wrong talking to the queue.
#[derive(Debug, Error)]
pub enum QueueError {
    /// The `--queue` URL did not parse as a PostgreSQL connection string.
    #[error("the queue URL is not a PostgreSQL connection string: {0}")]
    Url(#[source] postgres::Error),
    /// Connecting to PostgreSQL failed (down, refused, authentication).
    #[error("could not connect to the queue's PostgreSQL: {0}")]
    Connect(#[source] postgres::Error),
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
