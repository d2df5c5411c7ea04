-- Schema version 11: jobs_run_at indexes every job by (run_at, id), the
-- order of a list by run_at (core.ListParams.ByRunAt). A page of such a
-- list is then one range read in index order that stops after the page's
-- jobs, instead of a sort of every matching job per page. Lists by id
-- read the primary key. Jobs whose run_at changes (retry, snooze) move
-- their entry; claims and finishes leave run_at alone.
--
-- No long locks: outside a transaction, the index is built CONCURRENTLY
-- (inserts, claims and finishes go on meanwhile). An interrupted build
-- leaves an INVALID index that IF NOT EXISTS keeps: drop it (DROP INDEX
-- CONCURRENTLY) and migrate again.

-- +goose NO TRANSACTION
-- +goose Up
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_run_at ON {{.S}}.jobs (run_at, id);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS {{.S}}.jobs_run_at;
