-- Production: idempotent submission, unique live worker ids, retention.

-- The submission's request id, its idempotency key: submitting the same key again
-- returns the first job (NULLs, submissions without a key, never collide).
ALTER TABLE cuzk_jobs ADD COLUMN request_id TEXT UNIQUE
    CHECK (request_id ~ '^[A-Za-z0-9._:-]{1,128}$');

-- Completion writes refused because the writer no longer held the job (its lease
-- had expired and another worker claimed it): counted here as well as in
-- `writes`, never stored.
ALTER TABLE cuzk_jobs ADD COLUMN refused_writes INTEGER NOT NULL DEFAULT 0;

-- `cuzk queue prune` deletes finished rows by age.
CREATE INDEX cuzk_jobs_finished ON cuzk_jobs (finished_at)
    WHERE state IN ('done', 'failed');

-- Live workers: one row per running `cuzk worker`, its heartbeat renewed by its
-- lease keeper. An id whose heartbeat is younger than `stale_after` is taken;
-- a dead worker's row (stale heartbeat) may be taken over; a worker that exits
-- cleanly deletes its row.
CREATE TABLE cuzk_workers (
    id           TEXT PRIMARY KEY,
    host         TEXT NOT NULL,
    pid          INTEGER NOT NULL,
    started_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    heartbeat_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    stale_after  INTERVAL NOT NULL
);
