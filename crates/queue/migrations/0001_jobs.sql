-- The queue's one table: a row per proof job, from submission to its proof or
-- its errors. A row is claimed by one statement (see `claim` in src/store.rs):
-- queued rows, and running rows whose lease has expired, in order of priority
-- (higher first) then submission (id).
CREATE TABLE cuzk_jobs (
    id           BIGSERIAL PRIMARY KEY,
    -- Which runner proves it ("synthetic", "porep-c2", ...).
    kind         TEXT NOT NULL,
    -- The runner's input, opaque to the queue (a C1 envelope, a JSON request).
    input        BYTEA NOT NULL,
    priority     INTEGER NOT NULL DEFAULT 0,
    state        TEXT NOT NULL DEFAULT 'queued'
                 CHECK (state IN ('queued', 'running', 'done', 'failed')),
    -- Claims so far; a claim past max_attempts is never made.
    attempts     INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL CHECK (max_attempts > 0),
    -- The worker holding the job and until when (running jobs only).
    worker       TEXT,
    lease_until  TIMESTAMPTZ,
    -- The verified proof, written once: a later write of another proof is
    -- counted in `writes` and discarded.
    proof        BYTEA,
    done_by      TEXT,
    writes       INTEGER NOT NULL DEFAULT 0,
    -- One line per failed attempt, oldest first.
    errors       TEXT[] NOT NULL DEFAULT '{}',
    submitted_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    started_at   TIMESTAMPTZ,
    finished_at  TIMESTAMPTZ,
    CHECK ((state = 'running') = (worker IS NOT NULL AND lease_until IS NOT NULL)),
    CHECK ((state = 'done') = (proof IS NOT NULL))
);

-- The claim's scan: only open jobs, in claim order.
CREATE INDEX cuzk_jobs_open ON cuzk_jobs (priority DESC, id)
    WHERE state IN ('queued', 'running');
