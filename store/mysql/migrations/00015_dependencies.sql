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
-- Jobs from before the upgrade read as having no dependencies. Columns
-- with constant defaults added last are an instant change on MySQL
-- 8.0.29+ and MariaDB 10.3+ (no row rewritten); the workflow indexes are
-- built in place by InnoDB's online DDL, which lets inserts, claims and
-- finishes go on meanwhile (the DDL names no algorithm, so the server
-- takes its least-locking one).

-- +goose Up
ALTER TABLE {{.P}}jobs
    ADD COLUMN workflow_id BIGINT NULL,
    ADD COLUMN step VARCHAR(255) NULL,
    ADD COLUMN on_dependency_failure VARCHAR(16) NOT NULL DEFAULT '',
    ADD COLUMN dep_count INT NOT NULL DEFAULT 0,
    ADD COLUMN waiting_for INT NOT NULL DEFAULT 0,
    ADD COLUMN deps_completed INT NOT NULL DEFAULT 0,
    ADD COLUMN deps_cancelled INT NOT NULL DEFAULT 0,
    ADD COLUMN deps_discarded INT NOT NULL DEFAULT 0,
    ADD COLUMN has_dependants BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE {{.P}}jobs_archive
    ADD COLUMN workflow_id BIGINT NULL,
    ADD COLUMN step VARCHAR(255) NULL,
    ADD COLUMN on_dependency_failure VARCHAR(16) NOT NULL DEFAULT '',
    ADD COLUMN dep_count INT NOT NULL DEFAULT 0,
    ADD COLUMN waiting_for INT NOT NULL DEFAULT 0,
    ADD COLUMN deps_completed INT NOT NULL DEFAULT 0,
    ADD COLUMN deps_cancelled INT NOT NULL DEFAULT 0,
    ADD COLUMN deps_discarded INT NOT NULL DEFAULT 0;
ALTER TABLE {{.P}}jobs ADD INDEX {{.P}}jobs_workflow (workflow_id, id);
ALTER TABLE {{.P}}jobs_archive ADD INDEX {{.P}}jobs_archive_workflow (workflow_id, id);
CREATE TABLE IF NOT EXISTS {{.P}}job_deps (
    dep_id  BIGINT  NOT NULL,
    job_id  BIGINT  NOT NULL,
    settled BOOLEAN NOT NULL DEFAULT FALSE,
    PRIMARY KEY (dep_id, job_id),
    KEY {{.P}}job_deps_job (job_id, dep_id)
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE IF EXISTS {{.P}}job_deps;
ALTER TABLE {{.P}}jobs_archive DROP INDEX {{.P}}jobs_archive_workflow,
    DROP COLUMN deps_discarded, DROP COLUMN deps_cancelled, DROP COLUMN deps_completed, DROP COLUMN waiting_for,
    DROP COLUMN dep_count, DROP COLUMN on_dependency_failure, DROP COLUMN step, DROP COLUMN workflow_id;
ALTER TABLE {{.P}}jobs DROP INDEX {{.P}}jobs_workflow,
    DROP COLUMN has_dependants, DROP COLUMN deps_discarded, DROP COLUMN deps_cancelled, DROP COLUMN deps_completed,
    DROP COLUMN waiting_for, DROP COLUMN dep_count, DROP COLUMN on_dependency_failure, DROP COLUMN step, DROP COLUMN workflow_id;
