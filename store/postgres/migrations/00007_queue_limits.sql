-- Schema version 7: concurrency limits and partition keys.
--
-- jobs.partition_key groups a queue's jobs (a tenant or customer id) for
-- core.QueueLimits.MaxRunningPerPartition; NULL = none. The queue record
-- (the one a pause writes) gets the queue's limits (see
-- store/internal/sqlq/limits.go): limited says whether any is set,
-- limits_at when they were set (NULL = never), and workers_per_node is
-- kept for a per-node worker count set by operators (read by nothing yet).
--
-- jobs_running indexes the running jobs by queue, kind and partition key:
-- a claim of a queue with limits counts its running jobs per kind and
-- partition with it, reading only running entries.
--
-- The two claim reads of schema version 5 now pass over queues with
-- limits as they pass over paused ones: those are claimed by the limited
-- path (docs/postgres.md, "Concurrency limits"), which the store takes
-- when these claim nothing and the queue's record says limited.
--
-- No long locks: the migration runs outside a transaction (NO
-- TRANSACTION). ADD COLUMN of a nullable column without a default, or of
-- a constant default (PostgreSQL 11 and later), changes the catalog only;
-- its ACCESS EXCLUSIVE lock is held for that instant (it waits, though,
-- for transactions already using the table: run the upgrade when none is
-- long). The index is built CONCURRENTLY. CREATE OR REPLACE
-- FUNCTION takes no lock on the jobs table. Every statement is idempotent.
-- A build of the index that was interrupted leaves an INVALID index that
-- IF NOT EXISTS keeps: drop it (DROP INDEX CONCURRENTLY) and migrate again.

-- +goose NO TRANSACTION
-- +goose Up
ALTER TABLE {{.S}}.jobs ADD COLUMN IF NOT EXISTS partition_key text;
ALTER TABLE {{.S}}.queues ADD COLUMN IF NOT EXISTS limited boolean NOT NULL DEFAULT false;
ALTER TABLE {{.S}}.queues ADD COLUMN IF NOT EXISTS max_running integer NOT NULL DEFAULT 0;
ALTER TABLE {{.S}}.queues ADD COLUMN IF NOT EXISTS max_running_per_kind text;
ALTER TABLE {{.S}}.queues ADD COLUMN IF NOT EXISTS max_running_per_partition integer NOT NULL DEFAULT 0;
ALTER TABLE {{.S}}.queues ADD COLUMN IF NOT EXISTS limits_at timestamptz;
ALTER TABLE {{.S}}.queues ADD COLUMN IF NOT EXISTS workers_per_node integer;
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_running ON {{.S}}.jobs (queue, kind, partition_key) WHERE state = 'running';

{{template "claim_functions" (args "S" .S "Skip" "(q.paused OR q.limited)" "Claimed" "")}}

-- +goose Down
{{template "claim_functions" (args "S" .S "Skip" "q.paused" "Claimed" "")}}

DROP INDEX CONCURRENTLY IF EXISTS {{.S}}.jobs_running;
ALTER TABLE {{.S}}.queues DROP COLUMN IF EXISTS workers_per_node;
ALTER TABLE {{.S}}.queues DROP COLUMN IF EXISTS limits_at;
ALTER TABLE {{.S}}.queues DROP COLUMN IF EXISTS max_running_per_partition;
ALTER TABLE {{.S}}.queues DROP COLUMN IF EXISTS max_running_per_kind;
ALTER TABLE {{.S}}.queues DROP COLUMN IF EXISTS max_running;
ALTER TABLE {{.S}}.queues DROP COLUMN IF EXISTS limited;
ALTER TABLE {{.S}}.jobs DROP COLUMN IF EXISTS partition_key;
