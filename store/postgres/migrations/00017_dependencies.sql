-- Schema version 17: jobs that wait for other jobs (contract.Dependencies):
-- workflows of steps and batches with callbacks.
--
-- jobs gains workflow_id and step (the workflow a job belongs to and its
-- name there), on_dependency_failure ('' cancels the job when a
-- dependency fails, 'run' runs it anyway), dep_count (how many jobs it
-- depends on), waiting_for (how many of them have not settled: above 0
-- only in state 'waiting'), deps_completed, deps_cancelled and
-- deps_discarded (its settled dependencies by their end), and
-- has_dependants (some job waits for this one: only such jobs' ends do
-- any dependency work). jobs_archive gains the same columns but the last.
-- job_deps holds one row per dependency edge: job_id waits for dep_id;
-- settled marks an edge already counted, so that a dependency ending twice
-- (a retry of a completed job) counts once. Its primary key serves the
-- settle (the dependants of a job that ended); job_deps_job serves reading
-- a job's dependencies back.
--
-- No long locks: ADD COLUMN with a constant default only changes the
-- catalog (the ACCESS EXCLUSIVE lock lasts an instant and no row is
-- rewritten; lock_timeout keeps it from queueing behind a long
-- transaction: the migration then fails and the next start retries it),
-- and job_deps is new. The workflow indexes are built concurrently by
-- schema version 18.

-- +goose Up
SET LOCAL lock_timeout = '5s';
ALTER TABLE {{.S}}.jobs
    ADD COLUMN IF NOT EXISTS workflow_id bigint,
    ADD COLUMN IF NOT EXISTS step text,
    ADD COLUMN IF NOT EXISTS on_dependency_failure text NOT NULL DEFAULT '',
    ADD COLUMN IF NOT EXISTS dep_count integer NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS waiting_for integer NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS deps_completed integer NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS deps_cancelled integer NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS deps_discarded integer NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS has_dependants boolean NOT NULL DEFAULT false;
ALTER TABLE {{.S}}.jobs_archive
    ADD COLUMN IF NOT EXISTS workflow_id bigint,
    ADD COLUMN IF NOT EXISTS step text,
    ADD COLUMN IF NOT EXISTS on_dependency_failure text NOT NULL DEFAULT '',
    ADD COLUMN IF NOT EXISTS dep_count integer NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS waiting_for integer NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS deps_completed integer NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS deps_cancelled integer NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS deps_discarded integer NOT NULL DEFAULT 0;
CREATE TABLE IF NOT EXISTS {{.S}}.job_deps (
    dep_id  bigint  NOT NULL,
    job_id  bigint  NOT NULL,
    settled boolean NOT NULL DEFAULT false,
    PRIMARY KEY (dep_id, job_id)
);
CREATE INDEX IF NOT EXISTS job_deps_job ON {{.S}}.job_deps (job_id, dep_id);

-- +goose Down
DROP TABLE IF EXISTS {{.S}}.job_deps;
ALTER TABLE {{.S}}.jobs_archive
    DROP COLUMN IF EXISTS deps_discarded, DROP COLUMN IF EXISTS deps_cancelled, DROP COLUMN IF EXISTS deps_completed,
    DROP COLUMN IF EXISTS waiting_for, DROP COLUMN IF EXISTS dep_count, DROP COLUMN IF EXISTS on_dependency_failure,
    DROP COLUMN IF EXISTS step, DROP COLUMN IF EXISTS workflow_id;
ALTER TABLE {{.S}}.jobs
    DROP COLUMN IF EXISTS has_dependants, DROP COLUMN IF EXISTS deps_discarded, DROP COLUMN IF EXISTS deps_cancelled,
    DROP COLUMN IF EXISTS deps_completed, DROP COLUMN IF EXISTS waiting_for, DROP COLUMN IF EXISTS dep_count,
    DROP COLUMN IF EXISTS on_dependency_failure, DROP COLUMN IF EXISTS step, DROP COLUMN IF EXISTS workflow_id;
