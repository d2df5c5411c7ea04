-- Schema version 14: jobs_run_at_idle replaces jobs_run_at and leaves
-- running jobs out. A claim changes state, an indexed column, so its
-- UPDATE is never HOT: every index whose predicate admits the new row
-- gets an entry, and jobs_run_at (every job by (run_at, id), schema
-- version 11) took one per claim although no claim or finish reads it
-- (pg_stat_statements counted six WAL records per claimed job, one of them
-- this index's; docs/benchmarks.md). Lists in run_at order read the
-- running jobs (few: one per busy worker) apart and merge them in (see
-- store/internal/sqlq ListQuery).
--
-- No long locks: outside a transaction, the new index is built
-- CONCURRENTLY (inserts, claims and finishes go on meanwhile), then the
-- old one dropped CONCURRENTLY. An interrupted build leaves an INVALID
-- index that IF NOT EXISTS keeps: drop it (DROP INDEX CONCURRENTLY) and
-- migrate again.

-- +goose NO TRANSACTION
-- +goose Up
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_run_at_idle ON {{.S}}.jobs (run_at, id) WHERE state <> 'running';
DROP INDEX CONCURRENTLY IF EXISTS {{.S}}.jobs_run_at;

-- +goose Down
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_run_at ON {{.S}}.jobs (run_at, id);
DROP INDEX CONCURRENTLY IF EXISTS {{.S}}.jobs_run_at_idle;
