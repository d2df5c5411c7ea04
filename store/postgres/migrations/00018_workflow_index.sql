-- Schema version 18: jobs_workflow and jobs_archive_workflow serve lists
-- of one workflow's jobs (ListParams.WorkflowID) in id order. Partial:
-- only jobs of a workflow or batch have an entry, so ordinary inserts and
-- claims write nothing more. jobs_deadline_waiting finds the waiting jobs
-- past their deadline for DiscardExpired (jobs_deadline holds pending jobs
-- only); it holds waiting jobs with a deadline alone.
--
-- No long locks: outside a transaction, the indexes are built
-- CONCURRENTLY (inserts, claims and finishes go on meanwhile). An
-- interrupted build leaves an INVALID index that IF NOT EXISTS keeps:
-- drop it (DROP INDEX CONCURRENTLY) and migrate again.

-- +goose NO TRANSACTION
-- +goose Up
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_workflow ON {{.S}}.jobs (workflow_id, id) WHERE workflow_id IS NOT NULL;
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_archive_workflow ON {{.S}}.jobs_archive (workflow_id, id) WHERE workflow_id IS NOT NULL;
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_deadline_waiting ON {{.S}}.jobs (deadline) WHERE deadline IS NOT NULL AND state = 'waiting';

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS {{.S}}.jobs_deadline_waiting;
DROP INDEX CONCURRENTLY IF EXISTS {{.S}}.jobs_archive_workflow;
DROP INDEX CONCURRENTLY IF EXISTS {{.S}}.jobs_workflow;
