-- Schema version 10: jobs_run_at indexes every job by (run_at, id), the
-- order of a list by run_at (core.ListParams.ByRunAt). A page of such a
-- list is then one range read in index order that stops after the page's
-- jobs, instead of a sort of every matching job per page. Lists by id
-- read the primary key. Jobs whose run_at changes (retry, snooze) move
-- their entry; claims and finishes leave run_at alone.

-- +goose Up
CREATE INDEX IF NOT EXISTS {{.P}}jobs_run_at ON {{.P}}jobs (run_at, id);

-- +goose Down
DROP INDEX IF EXISTS {{.P}}jobs_run_at;
