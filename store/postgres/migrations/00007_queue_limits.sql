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

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION {{.S}}.claim_skip_locked(
    p_queue text, p_now timestamptz, p_limit integer, p_worker text, p_lease timestamptz, p_tags text)
RETURNS SETOF {{.S}}.jobs
LANGUAGE plpgsql
SET enable_bitmapscan = off
SET enable_sort = off
AS $fn$
BEGIN
    -- The locked ids travel as an array into a primary-key lookup (with a
    -- CTE joined on id, a generic plan may merge-join it with a full scan
    -- of the primary key).
    RETURN QUERY
    UPDATE {{.S}}.jobs j
       SET state = 'running', attempt = j.attempt + 1, claim_seq = j.claim_seq + 1,
           version = j.version + 1, worker_id = $4, attempted_at = $2, lease_until = $5
     WHERE j.id = ANY(ARRAY(
            SELECT p.id FROM {{.S}}.jobs p
             WHERE p.queue = $1
               AND p.state IN ('scheduled','available','retryable')
               AND p.run_at <= $2
               AND (p.tags IS NULL OR p.tags <@ $6::jsonb)
               AND NOT EXISTS (SELECT 1 FROM {{.S}}.queues q WHERE q.name = $1 AND (q.paused OR q.limited))
             ORDER BY p.priority, p.run_at, p.id
             LIMIT $3
               FOR UPDATE SKIP LOCKED))
    RETURNING j.*;
END
$fn$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION {{.S}}.claim_candidates(
    p_queue text, p_now timestamptz, p_limit integer, p_tags text)
RETURNS TABLE (id bigint, version bigint)
LANGUAGE plpgsql
SET enable_bitmapscan = off
SET enable_sort = off
AS $fn$
BEGIN
    RETURN QUERY
    SELECT p.id, p.version FROM {{.S}}.jobs p
     WHERE p.queue = $1
       AND p.state IN ('scheduled','available','retryable')
       AND p.run_at <= $2
       AND (p.tags IS NULL OR p.tags <@ $4::jsonb)
       AND NOT EXISTS (SELECT 1 FROM {{.S}}.queues q WHERE q.name = $1 AND (q.paused OR q.limited))
     ORDER BY p.priority, p.run_at, p.id
     LIMIT $3;
END
$fn$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION {{.S}}.claim_skip_locked(
    p_queue text, p_now timestamptz, p_limit integer, p_worker text, p_lease timestamptz, p_tags text)
RETURNS SETOF {{.S}}.jobs
LANGUAGE plpgsql
SET enable_bitmapscan = off
SET enable_sort = off
AS $fn$
BEGIN
    -- The locked ids travel as an array into a primary-key lookup (with a
    -- CTE joined on id, a generic plan may merge-join it with a full scan
    -- of the primary key).
    RETURN QUERY
    UPDATE {{.S}}.jobs j
       SET state = 'running', attempt = j.attempt + 1, claim_seq = j.claim_seq + 1,
           version = j.version + 1, worker_id = $4, attempted_at = $2, lease_until = $5
     WHERE j.id = ANY(ARRAY(
            SELECT p.id FROM {{.S}}.jobs p
             WHERE p.queue = $1
               AND p.state IN ('scheduled','available','retryable')
               AND p.run_at <= $2
               AND (p.tags IS NULL OR p.tags <@ $6::jsonb)
               AND NOT EXISTS (SELECT 1 FROM {{.S}}.queues q WHERE q.name = $1 AND q.paused)
             ORDER BY p.priority, p.run_at, p.id
             LIMIT $3
               FOR UPDATE SKIP LOCKED))
    RETURNING j.*;
END
$fn$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION {{.S}}.claim_candidates(
    p_queue text, p_now timestamptz, p_limit integer, p_tags text)
RETURNS TABLE (id bigint, version bigint)
LANGUAGE plpgsql
SET enable_bitmapscan = off
SET enable_sort = off
AS $fn$
BEGIN
    RETURN QUERY
    SELECT p.id, p.version FROM {{.S}}.jobs p
     WHERE p.queue = $1
       AND p.state IN ('scheduled','available','retryable')
       AND p.run_at <= $2
       AND (p.tags IS NULL OR p.tags <@ $4::jsonb)
       AND NOT EXISTS (SELECT 1 FROM {{.S}}.queues q WHERE q.name = $1 AND q.paused)
     ORDER BY p.priority, p.run_at, p.id
     LIMIT $3;
END
$fn$;
-- +goose StatementEnd

DROP INDEX CONCURRENTLY IF EXISTS {{.S}}.jobs_running;
ALTER TABLE {{.S}}.queues DROP COLUMN IF EXISTS workers_per_node;
ALTER TABLE {{.S}}.queues DROP COLUMN IF EXISTS limits_at;
ALTER TABLE {{.S}}.queues DROP COLUMN IF EXISTS max_running_per_partition;
ALTER TABLE {{.S}}.queues DROP COLUMN IF EXISTS max_running_per_kind;
ALTER TABLE {{.S}}.queues DROP COLUMN IF EXISTS max_running;
ALTER TABLE {{.S}}.queues DROP COLUMN IF EXISTS limited;
ALTER TABLE {{.S}}.jobs DROP COLUMN IF EXISTS partition_key;
