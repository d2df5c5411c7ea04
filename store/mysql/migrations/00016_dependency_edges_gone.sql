-- Schema version 16: forget the dependency edges of jobs already gone.
--
-- job_deps rows name the job that waits (job_id) and the job it waits for
-- (dep_id). Until now they stayed when their job_id's row left the jobs
-- table (pruned, deleted by an admin, deleted on completion) and grew
-- without bound. From this version the store deletes a job's own edges in
-- the transaction that deletes the job (Prune, Delete, a completion with
-- Delete, PruneArchive; Archive keeps them, so an archived job's
-- dependencies stay readable); this migration deletes those left by
-- earlier versions. It changes no table definition: one pass over
-- job_deps (edges written since schema version 15). Sessions run READ
-- COMMITTED, so it locks only the job_deps rows it deletes; the jobs and
-- archive rows it joins are read without locks.

-- +goose Up
DELETE d FROM {{.P}}job_deps AS d
    LEFT JOIN {{.P}}jobs AS j ON j.id = d.job_id
    LEFT JOIN {{.P}}jobs_archive AS a ON a.id = d.job_id
 WHERE j.id IS NULL AND a.id IS NULL;

-- +goose Down
SELECT 1;
