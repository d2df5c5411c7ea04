-- Schema version 1 of the backlog SQLite store. {{.P}} is the table prefix.
-- Times are INTEGER unix microseconds (UTC); JSON columns are TEXT.

-- +goose Up
CREATE TABLE IF NOT EXISTS {{.P}}jobs (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    queue        TEXT    NOT NULL,
    kind         TEXT    NOT NULL,
    args         TEXT    NOT NULL,
    priority     INTEGER NOT NULL,
    state        TEXT    NOT NULL,
    attempt      INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL,
    run_at       INTEGER NOT NULL,
    deadline     INTEGER,
    unique_key   TEXT,
    tags         TEXT,
    metadata     TEXT,
    errors       TEXT    NOT NULL DEFAULT '[]',
    result       BLOB,
    created_at   INTEGER NOT NULL,
    attempted_at INTEGER,
    finished_at  INTEGER,
    worker_id    TEXT,
    lease_until  INTEGER,
    version      INTEGER NOT NULL DEFAULT 0
);

-- Claim: a range scan in claim order over due candidates only.
CREATE INDEX IF NOT EXISTS {{.P}}jobs_claim ON {{.P}}jobs (queue, priority, run_at, id)
    WHERE state IN ('scheduled','available','retryable');

-- Unique keys are unique among jobs not in a final state.
CREATE UNIQUE INDEX IF NOT EXISTS {{.P}}jobs_unique_key ON {{.P}}jobs (unique_key)
    WHERE unique_key IS NOT NULL AND state NOT IN ('completed','cancelled','discarded');

-- Rescue of expired leases; lease extension scans it too (running jobs
-- only, a few per worker slot), which is cheaper than keeping a per-worker
-- index up to date on every claim and finish.
CREATE INDEX IF NOT EXISTS {{.P}}jobs_lease ON {{.P}}jobs (lease_until) WHERE state = 'running';

-- Prune of finished jobs by age.
CREATE INDEX IF NOT EXISTS {{.P}}jobs_finished ON {{.P}}jobs (state, finished_at) WHERE finished_at IS NOT NULL;

-- Deadline discards.
CREATE INDEX IF NOT EXISTS {{.P}}jobs_deadline ON {{.P}}jobs (deadline)
    WHERE deadline IS NOT NULL AND state IN ('scheduled','available','retryable');

CREATE TABLE IF NOT EXISTS {{.P}}queues (
    name       TEXT    PRIMARY KEY,
    paused     INTEGER NOT NULL DEFAULT 0,
    updated_at INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS {{.P}}workers (
    id           TEXT    PRIMARY KEY,
    host         TEXT    NOT NULL,
    pid          INTEGER NOT NULL,
    queues       TEXT    NOT NULL,
    tags         TEXT,
    metadata     TEXT,
    started_at   INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS {{.P}}workers_heartbeat ON {{.P}}workers (heartbeat_at);

-- +goose Down
DROP TABLE IF EXISTS {{.P}}workers;
DROP TABLE IF EXISTS {{.P}}queues;
DROP TABLE IF EXISTS {{.P}}jobs;
