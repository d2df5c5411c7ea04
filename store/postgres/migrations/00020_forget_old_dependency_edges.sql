-- Schema version 20: forget the dependency edges of jobs already gone.
--
-- Before schema version 19 a job's own edges (job_deps rows whose job_id
-- it is) stayed when it was pruned, deleted by an admin or deleted on
-- completion. Version 19's triggers delete them from now on; this deletes
-- those left before, the edges of archived jobs excepted. It runs after
-- version 19 committed, so no edge is left between the two, and locks
-- only the job_deps rows it deletes: jobs and jobs_archive are only read.

-- +goose Up
DELETE FROM {{.S}}.job_deps AS d
 WHERE NOT EXISTS (SELECT 1 FROM {{.S}}.jobs WHERE id = d.job_id)
   AND NOT EXISTS (SELECT 1 FROM {{.S}}.jobs_archive WHERE id = d.job_id);

-- +goose Down
SELECT 1;
