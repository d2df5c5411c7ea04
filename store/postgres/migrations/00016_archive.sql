-- Schema version 16: the archive of finished jobs (contract.Archiver).
-- With the engine's Retention.Archive on, maintenance moves final jobs
-- past their retention from jobs into jobs_archive (one transaction per
-- batch: INSERT … SELECT by id, then DELETE) instead of deleting them,
-- and prunes the archive past Retention.ArchiveTTL.
--
-- The table has the jobs table's columns with the same types (and
-- progress and checkpoint, nullable jsonb, so a job of any later schema
-- keeps its shape), without the claim, lease, unique and deadline
-- indexes: archived jobs are never claimed or changed. Ids come from the
-- jobs table (no identity). jobs_archive_finished serves the archive's
-- pruning (oldest finished_at first); jobs_archive_run_at serves lists
-- by (run_at, id), as jobs_run_at does for jobs.
--
-- No long locks: a new, empty table and its indexes; the jobs table is
-- not touched.

-- +goose Up
CREATE TABLE IF NOT EXISTS {{.S}}.jobs_archive (
    id            bigint      PRIMARY KEY,
    queue         text        NOT NULL,
    kind          text        NOT NULL,
    args          jsonb       NOT NULL,
    priority      smallint    NOT NULL,
    state         text        NOT NULL,
    attempt       integer     NOT NULL DEFAULT 0,
    max_attempts  integer     NOT NULL,
    run_at        timestamptz NOT NULL,
    deadline      timestamptz,
    unique_key    text,
    tags          jsonb,
    metadata      jsonb,
    errors        jsonb       NOT NULL DEFAULT '[]',
    result        bytea,
    created_at    timestamptz NOT NULL,
    attempted_at  timestamptz,
    finished_at   timestamptz,
    worker_id     text,
    lease_until   timestamptz,
    version       bigint      NOT NULL DEFAULT 0,
    claim_seq     bigint      NOT NULL DEFAULT 0,
    partition_key text,
    progress      jsonb,
    checkpoint    jsonb
);
CREATE INDEX IF NOT EXISTS jobs_archive_finished ON {{.S}}.jobs_archive (finished_at, id);
CREATE INDEX IF NOT EXISTS jobs_archive_run_at ON {{.S}}.jobs_archive (run_at, id);

-- +goose Down
DROP TABLE IF EXISTS {{.S}}.jobs_archive;
