//! A fresh database per test on the PostgreSQL server of `CUZK_TEST_PG_URL`
//! (which `scripts/ci-postgres.sh` starts and `scripts/test.sh` exports).

#![allow(dead_code)]

/// The server's URL with its database replaced by `db`.
pub fn with_database(url: &str, db: &str) -> String {
    let (head, query) = match url.split_once('?') {
        Some((h, q)) => (h, Some(q)),
        None => (url, None),
    };
    let scheme_end = head.find("://").map_or(0, |i| i + 3);
    let base = match head[scheme_end..].find('/') {
        Some(i) => &head[..scheme_end + i],
        None => head,
    };
    match query {
        Some(q) => format!("{base}/{db}?{q}"),
        None => format!("{base}/{db}"),
    }
}

/// A new, empty database for test `name`, or `None` (after printing why) when a
/// developer runs the tests without PostgreSQL. In CI a missing server is a
/// failure, never a skip.
pub fn fresh_database(name: &str) -> Option<String> {
    let Ok(url) = std::env::var("CUZK_TEST_PG_URL") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CUZK_TEST_PG_URL is not set: CI must run the queue's tests against a real \
             PostgreSQL (scripts/test.sh starts one with scripts/ci-postgres.sh)"
        );
        eprintln!("skipped: no PostgreSQL (run `bash scripts/ci-postgres.sh start` and set CUZK_TEST_PG_URL)");
        return None;
    };
    let db = format!("cuzk_test_{name}_{}", std::process::id());
    let mut admin = postgres::Client::connect(&url, postgres::NoTls)
        .unwrap_or_else(|e| panic!("CUZK_TEST_PG_URL={url}: cannot connect: {e}"));
    // Two statements: a multi-statement string runs as one transaction, which
    // DROP/CREATE DATABASE refuse.
    admin
        .batch_execute(&format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"))
        .unwrap();
    admin
        .batch_execute(&format!("CREATE DATABASE {db}"))
        .unwrap();
    Some(with_database(&url, &db))
}

/// [`fresh_database`] with the queue's schema applied (as `cuzk queue migrate`
/// would): what every test but the migrations' own starts from.
pub fn migrated_database(name: &str) -> Option<String> {
    let url = fresh_database(name)?;
    cuzk_queue::migrate_database(&url).unwrap();
    Some(url)
}
