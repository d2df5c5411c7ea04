-- Schema version 18: jobs_workflow and jobs_archive_workflow serve lists
-- of one workflow's jobs (ListParams.WorkflowID) in id order. Partial:
-- only jobs of a workflow or batch have an entry, so ordinary inserts and
-- claims write nothing more.
--
-- No long locks: outside a transaction, the indexes are built
-- CONCURRENTLY (inserts, claims and finishes go on meanwhile). An
-- interrupted build leaves an INVALID index that IF NOT EXISTS keeps:
-- drop it (DROP INDEX CONCURRENTLY) and migrate again.

-- +goose NO TRANSACTION
-- +goose Up
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_workflow ON {{.S}}.jobs (workflow_id, id) WHERE workflow_id IS NOT NULL;
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_archive_workflow ON {{.S}}.jobs_archive (workflow_id, id) WHERE workflow_id IS NOT NULL;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS {{.S}}.jobs_archive_workflow;
DROP INDEX CONCURRENTLY IF EXISTS {{.S}}.jobs_workflow;
