-- Schema version 14: the archive of finished jobs (contract.Archiver).
-- With the engine's Retention.Archive on, maintenance moves final jobs
-- past their retention from jobs into jobs_archive (one transaction per
-- batch: INSERT … SELECT by id, then DELETE) instead of deleting them,
-- and prunes the archive past Retention.ArchiveTTL.
--
-- The table has the jobs table's columns with the same types (and
-- progress and checkpoint, nullable JSON text, so a job of any later
-- schema keeps its shape), without the claim, lease, unique and deadline
-- indexes: archived jobs are never claimed or changed. Ids come from the
-- jobs table (no AUTOINCREMENT). jobs_archive_finished serves the
-- archive's pruning (oldest finished_at first); jobs_archive_run_at
-- serves lists by (run_at, id), as jobs_run_at does for jobs.
--
-- A new, empty table: nothing is rewritten or locked for long.

-- +goose Up
CREATE TABLE IF NOT EXISTS {{.P}}jobs_archive (
    id            INTEGER PRIMARY KEY,
    queue         TEXT    NOT NULL,
    kind          TEXT    NOT NULL,
    args          TEXT    NOT NULL,
    priority      INTEGER NOT NULL,
    state         TEXT    NOT NULL,
    attempt       INTEGER NOT NULL DEFAULT 0,
    max_attempts  INTEGER NOT NULL,
    run_at        INTEGER NOT NULL,
    deadline      INTEGER,
    unique_key    TEXT,
    tags          TEXT,
    metadata      TEXT,
    errors        TEXT    NOT NULL DEFAULT '[]',
    result        BLOB,
    created_at    INTEGER NOT NULL,
    attempted_at  INTEGER,
    finished_at   INTEGER,
    worker_id     TEXT,
    lease_until   INTEGER,
    version       INTEGER NOT NULL DEFAULT 0,
    claim_seq     INTEGER NOT NULL DEFAULT 0,
    partition_key TEXT,
    progress      TEXT,
    checkpoint    TEXT
);
CREATE INDEX IF NOT EXISTS {{.P}}jobs_archive_finished ON {{.P}}jobs_archive (finished_at, id);
CREATE INDEX IF NOT EXISTS {{.P}}jobs_archive_run_at ON {{.P}}jobs_archive (run_at, id);

-- +goose Down
DROP TABLE IF EXISTS {{.P}}jobs_archive;
