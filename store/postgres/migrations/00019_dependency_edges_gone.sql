-- Schema version 19: a job's dependency edges go with the job.
--
-- job_deps rows name the job that waits (job_id) and the job it waits for
-- (dep_id). Until now they stayed when their job_id's row left the jobs
-- table (pruned, deleted by an admin, deleted on completion) and grew
-- without bound. An AFTER DELETE row trigger on jobs now deletes the
-- deleted job's own edges, unless the job moved to jobs_archive (Archive
-- copies the row before it deletes it, in the same transaction): an
-- archived job's dependencies stay readable until the archive forgets it,
-- when a trigger on jobs_archive deletes them. Both triggers test
-- OLD.dep_count > 0 in their WHEN clause, so deleting a job without
-- dependencies calls no function. The edges of other jobs that waited for
-- the deleted job stay: they are those jobs' dependencies.
--
-- CREATE TRIGGER takes a SHARE ROW EXCLUSIVE lock on jobs (it holds off
-- writes until the migration commits, an instant later), bounded by
-- lock_timeout: the migration then fails and the next start retries it.
-- The edges left by earlier versions are deleted by schema version 20, in
-- a transaction of its own that takes no lock on jobs beyond reading it.

-- +goose Up
SET LOCAL lock_timeout = '5s';
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION {{.S}}.dependency_edges_gone() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    IF TG_TABLE_NAME = 'jobs' AND EXISTS (SELECT 1 FROM {{.S}}.jobs_archive WHERE id = OLD.id) THEN
        RETURN NULL; -- archived: its edges stay until the archive forgets it
    END IF;
    DELETE FROM {{.S}}.job_deps WHERE job_id = OLD.id;
    RETURN NULL;
END
$fn$;
-- +goose StatementEnd
DROP TRIGGER IF EXISTS jobs_dependency_edges_gone ON {{.S}}.jobs;
CREATE TRIGGER jobs_dependency_edges_gone AFTER DELETE ON {{.S}}.jobs FOR EACH ROW
    WHEN (OLD.dep_count > 0)
    EXECUTE FUNCTION {{.S}}.dependency_edges_gone();
DROP TRIGGER IF EXISTS jobs_archive_dependency_edges_gone ON {{.S}}.jobs_archive;
CREATE TRIGGER jobs_archive_dependency_edges_gone AFTER DELETE ON {{.S}}.jobs_archive FOR EACH ROW
    WHEN (OLD.dep_count > 0)
    EXECUTE FUNCTION {{.S}}.dependency_edges_gone();

-- +goose Down
DROP TRIGGER IF EXISTS jobs_archive_dependency_edges_gone ON {{.S}}.jobs_archive;
DROP TRIGGER IF EXISTS jobs_dependency_edges_gone ON {{.S}}.jobs;
DROP FUNCTION IF EXISTS {{.S}}.dependency_edges_gone();
