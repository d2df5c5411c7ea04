-- Schema version 9: rate limits, fair claims and priority aging.
--
-- queues.policy holds a queue's claim policy besides its concurrency
-- limits (rate limits, fair, aging) as JSON, NULL = none; a queue with
-- one has limited = true, so its claims take the limited path (see
-- store/internal/sqlq/limits.go). queues.fair_cursor is the partition key
-- the queue's last fair claim read up to.
--
-- queue_rates keeps one GCRA instant (the theoretical arrival time) per
-- rate-limited group of a queue: the queue itself, a kind, or a
-- partition key. The limited claim reads and writes it under the queue's
-- lock; instants in the past mean a full burst and are dropped.
--
-- jobs_fair indexes the pending jobs that have a partition key by queue
-- and partition key in claim order: a fair claim finds a queue's
-- partition keys with one seek each (MIN(partition_key) > the last) and
-- reads each one's due jobs in claim order. Jobs without a partition
-- key are not in it, so queues that do not use partition keys pay
-- nothing for it.
--
-- No long locks: outside a transaction, ADD COLUMN of nullable columns
-- without a default changes the catalog only, and the index is built
-- CONCURRENTLY. An interrupted build leaves an INVALID index that IF NOT
-- EXISTS keeps: drop it (DROP INDEX CONCURRENTLY) and migrate again.

-- +goose NO TRANSACTION
-- +goose Up
ALTER TABLE {{.S}}.queues ADD COLUMN IF NOT EXISTS policy text;
ALTER TABLE {{.S}}.queues ADD COLUMN IF NOT EXISTS fair_cursor text;
CREATE TABLE IF NOT EXISTS {{.S}}.queue_rates (
    queue text        NOT NULL,
    grp   text        NOT NULL,
    tat   timestamptz NOT NULL,
    PRIMARY KEY (queue, grp)
);
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_fair ON {{.S}}.jobs (queue, partition_key, priority, run_at, id)
    WHERE state IN ('scheduled','available','retryable') AND partition_key IS NOT NULL;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS {{.S}}.jobs_fair;
DROP TABLE IF EXISTS {{.S}}.queue_rates;
ALTER TABLE {{.S}}.queues DROP COLUMN IF EXISTS fair_cursor;
ALTER TABLE {{.S}}.queues DROP COLUMN IF EXISTS policy;
