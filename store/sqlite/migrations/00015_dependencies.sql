-- Schema version 15: jobs that wait for other jobs (contract.Dependencies):
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
-- Jobs from before the upgrade read as having no dependencies: ADD COLUMN
-- with a constant default rewrites no row, and the tables and indexes are
-- new (jobs_workflow is partial: only jobs of a workflow have an entry).

-- +goose Up
ALTER TABLE {{.P}}jobs ADD COLUMN workflow_id INTEGER;
ALTER TABLE {{.P}}jobs ADD COLUMN step TEXT;
ALTER TABLE {{.P}}jobs ADD COLUMN on_dependency_failure TEXT NOT NULL DEFAULT '';
ALTER TABLE {{.P}}jobs ADD COLUMN dep_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE {{.P}}jobs ADD COLUMN waiting_for INTEGER NOT NULL DEFAULT 0;
ALTER TABLE {{.P}}jobs ADD COLUMN deps_completed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE {{.P}}jobs ADD COLUMN deps_cancelled INTEGER NOT NULL DEFAULT 0;
ALTER TABLE {{.P}}jobs ADD COLUMN deps_discarded INTEGER NOT NULL DEFAULT 0;
ALTER TABLE {{.P}}jobs ADD COLUMN has_dependants INTEGER NOT NULL DEFAULT 0;
ALTER TABLE {{.P}}jobs_archive ADD COLUMN workflow_id INTEGER;
ALTER TABLE {{.P}}jobs_archive ADD COLUMN step TEXT;
ALTER TABLE {{.P}}jobs_archive ADD COLUMN on_dependency_failure TEXT NOT NULL DEFAULT '';
ALTER TABLE {{.P}}jobs_archive ADD COLUMN dep_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE {{.P}}jobs_archive ADD COLUMN waiting_for INTEGER NOT NULL DEFAULT 0;
ALTER TABLE {{.P}}jobs_archive ADD COLUMN deps_completed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE {{.P}}jobs_archive ADD COLUMN deps_cancelled INTEGER NOT NULL DEFAULT 0;
ALTER TABLE {{.P}}jobs_archive ADD COLUMN deps_discarded INTEGER NOT NULL DEFAULT 0;
CREATE TABLE IF NOT EXISTS {{.P}}job_deps (
    dep_id  INTEGER NOT NULL,
    job_id  INTEGER NOT NULL,
    settled INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (dep_id, job_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS {{.P}}job_deps_job ON {{.P}}job_deps (job_id, dep_id);
CREATE INDEX IF NOT EXISTS {{.P}}jobs_workflow ON {{.P}}jobs (workflow_id, id) WHERE workflow_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS {{.P}}jobs_archive_workflow ON {{.P}}jobs_archive (workflow_id, id) WHERE workflow_id IS NOT NULL;

-- +goose Down
DROP INDEX IF EXISTS {{.P}}jobs_archive_workflow;
DROP INDEX IF EXISTS {{.P}}jobs_workflow;
DROP TABLE IF EXISTS {{.P}}job_deps;
ALTER TABLE {{.P}}jobs_archive DROP COLUMN deps_discarded;
ALTER TABLE {{.P}}jobs_archive DROP COLUMN deps_cancelled;
ALTER TABLE {{.P}}jobs_archive DROP COLUMN deps_completed;
ALTER TABLE {{.P}}jobs_archive DROP COLUMN waiting_for;
ALTER TABLE {{.P}}jobs_archive DROP COLUMN dep_count;
ALTER TABLE {{.P}}jobs_archive DROP COLUMN on_dependency_failure;
ALTER TABLE {{.P}}jobs_archive DROP COLUMN step;
ALTER TABLE {{.P}}jobs_archive DROP COLUMN workflow_id;
ALTER TABLE {{.P}}jobs DROP COLUMN has_dependants;
ALTER TABLE {{.P}}jobs DROP COLUMN deps_discarded;
ALTER TABLE {{.P}}jobs DROP COLUMN deps_cancelled;
ALTER TABLE {{.P}}jobs DROP COLUMN deps_completed;
ALTER TABLE {{.P}}jobs DROP COLUMN waiting_for;
ALTER TABLE {{.P}}jobs DROP COLUMN dep_count;
ALTER TABLE {{.P}}jobs DROP COLUMN on_dependency_failure;
ALTER TABLE {{.P}}jobs DROP COLUMN step;
ALTER TABLE {{.P}}jobs DROP COLUMN workflow_id;
