-- Schema version 6: concurrency limits and partition keys.
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
-- partition with it, reading only running entries. Adding columns with
-- NULL or constant defaults rewrites nothing.

-- +goose Up
ALTER TABLE {{.P}}jobs ADD COLUMN partition_key TEXT;
ALTER TABLE {{.P}}queues ADD COLUMN limited INTEGER NOT NULL DEFAULT 0;
ALTER TABLE {{.P}}queues ADD COLUMN max_running INTEGER NOT NULL DEFAULT 0;
ALTER TABLE {{.P}}queues ADD COLUMN max_running_per_kind TEXT;
ALTER TABLE {{.P}}queues ADD COLUMN max_running_per_partition INTEGER NOT NULL DEFAULT 0;
ALTER TABLE {{.P}}queues ADD COLUMN limits_at INTEGER;
ALTER TABLE {{.P}}queues ADD COLUMN workers_per_node INTEGER;
CREATE INDEX IF NOT EXISTS {{.P}}jobs_running ON {{.P}}jobs (queue, kind, partition_key) WHERE state = 'running';

-- +goose Down
DROP INDEX IF EXISTS {{.P}}jobs_running;
ALTER TABLE {{.P}}queues DROP COLUMN workers_per_node;
ALTER TABLE {{.P}}queues DROP COLUMN limits_at;
ALTER TABLE {{.P}}queues DROP COLUMN max_running_per_partition;
ALTER TABLE {{.P}}queues DROP COLUMN max_running_per_kind;
ALTER TABLE {{.P}}queues DROP COLUMN max_running;
ALTER TABLE {{.P}}queues DROP COLUMN limited;
ALTER TABLE {{.P}}jobs DROP COLUMN partition_key;
