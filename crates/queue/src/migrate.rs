//! The schema, as numbered migrations applied in order.
//!
//! Only `cuzk queue migrate` (and [`migrate_database`], its library call) applies
//! them; a worker or a submitter checks the version when it connects and refuses a
//! schema behind its own ([`check_schema`]), so the roles that prove and submit
//! need no right to change the schema.
//!
//! Each file `migrations/NNNN_name.sql` is applied once, in a transaction, and
//! recorded in `cuzk_migrations`. Workers starting together serialise on a
//! transaction-scoped advisory lock taken before anything else (even before
//! `CREATE TABLE IF NOT EXISTS`, which is not safe against itself run
//! concurrently), so exactly one applies each migration and the others find it
//! recorded.

use postgres::Client;

use crate::QueueError;

/// Every migration this build knows: (version, name, SQL), in order.
pub const MIGRATIONS: &[(i32, &str, &str)] = &[
    (1, "jobs", include_str!("../migrations/0001_jobs.sql")),
    (
        2,
        "keys_workers_retention",
        include_str!("../migrations/0002_keys_workers_retention.sql"),
    ),
];

/// The schema version this build runs against.
pub fn schema_version() -> i32 {
    MIGRATIONS.last().map_or(0, |m| m.0)
}

/// The advisory-lock key the migrations serialise on ("cuzkq" in ASCII).
const LOCK_KEY: i64 = 0x63_75_7a_6b_71;

/// Brings the database's schema up to this build's; returns the migrations it
/// applied (none when another worker got there first).
pub fn migrate(client: &mut Client) -> Result<Vec<i32>, QueueError> {
    let mut tx = client
        .transaction()
        .map_err(QueueError::db("starting the migrations"))?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&LOCK_KEY])
        .map_err(QueueError::db("taking the migrations' lock"))?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS cuzk_migrations (
             version    INTEGER PRIMARY KEY,
             name       TEXT NOT NULL,
             applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
    )
    .map_err(QueueError::db("creating the migrations table"))?;
    let found: i32 = tx
        .query_one("SELECT COALESCE(max(version), 0) FROM cuzk_migrations", &[])
        .map_err(QueueError::db("reading the applied migrations"))?
        .get(0);
    let known = schema_version();
    if found > known {
        return Err(QueueError::SchemaTooNew { found, known });
    }
    let mut applied = Vec::new();
    for &(version, name, sql) in MIGRATIONS.iter().filter(|m| m.0 > found) {
        tx.batch_execute(sql)
            .and_then(|()| {
                tx.execute(
                    "INSERT INTO cuzk_migrations (version, name) VALUES ($1, $2)",
                    &[&version, &name],
                )
            })
            .map_err(|source| QueueError::Migration {
                version,
                name,
                source,
            })?;
        applied.push(version);
    }
    tx.commit()
        .map_err(QueueError::db("committing the migrations"))?;
    Ok(applied)
}

/// Connects to `db` and brings its schema up to this build's; returns the
/// migrations applied.
pub fn migrate_database(db: impl Into<crate::Database>) -> Result<Vec<i32>, QueueError> {
    let mut client = db.into().open()?;
    migrate(&mut client)
}

/// Refuses a schema that is not this build's: behind (run `cuzk queue migrate`)
/// or ahead (a newer cuzk made it).
pub fn check_schema(client: &mut Client) -> Result<(), QueueError> {
    let known = schema_version();
    // No table yet: nothing was ever migrated.
    let exists: bool = client
        .query_one("SELECT to_regclass('cuzk_migrations') IS NOT NULL", &[])
        .map_err(QueueError::db("reading the schema version"))?
        .get(0);
    let found: i32 = if exists {
        client
            .query_one("SELECT COALESCE(max(version), 0) FROM cuzk_migrations", &[])
            .map_err(QueueError::db("reading the schema version"))?
            .get(0)
    } else {
        0
    };
    match found.cmp(&known) {
        std::cmp::Ordering::Less => Err(QueueError::SchemaBehind { found, known }),
        std::cmp::Ordering::Greater => Err(QueueError::SchemaTooNew { found, known }),
        std::cmp::Ordering::Equal => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_numbered_from_one_without_gaps_and_match_their_files() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".sql"))
            .collect();
        files.sort();
        assert_eq!(files.len(), MIGRATIONS.len(), "{files:?}");
        for (i, (file, &(version, name, _))) in files.iter().zip(MIGRATIONS).enumerate() {
            assert_eq!(version, i as i32 + 1);
            assert_eq!(file, &format!("{version:04}_{name}.sql"));
        }
    }
}
