-- Schema version 7: concurrency limits and partition keys.
--
-- jobs.partition_key groups a queue's jobs (a tenant or customer id) for
-- core.QueueLimits.MaxRunningPerPartition; NULL = none. The queue record
-- (the one a pause writes) gets the queue's limits (see
-- store/internal/sqlq/limits.go): limited says whether any is set,
-- limits_at when they were set (NULL = never), and workers_per_node is
-- kept for a per-node worker count set by operators (read by nothing yet).
--
-- running_idx (queue, state, kind, partition_key): a claim of a queue with
-- limits counts its running jobs per kind and partition with an equality
-- on (queue, state) that reads only the queue's running entries (MySQL
-- has no partial indexes). Appending a nullable column is an instant
-- change on MariaDB 10.3+ and MySQL 8.0.12+; the index is built online
-- (InnoDB's in-place ADD INDEX: reads and writes go on meanwhile).

-- +goose Up
ALTER TABLE {{.P}}jobs ADD COLUMN partition_key VARCHAR(255) NULL;
ALTER TABLE {{.P}}jobs ADD INDEX running_idx (queue, state, kind, partition_key);
ALTER TABLE {{.P}}queues
    ADD COLUMN limited BOOLEAN NOT NULL DEFAULT FALSE,
    ADD COLUMN max_running INT NOT NULL DEFAULT 0,
    ADD COLUMN max_running_per_kind TEXT NULL,
    ADD COLUMN max_running_per_partition INT NOT NULL DEFAULT 0,
    ADD COLUMN limits_at DATETIME(6) NULL,
    ADD COLUMN workers_per_node INT NULL;

-- +goose Down
ALTER TABLE {{.P}}queues
    DROP COLUMN workers_per_node,
    DROP COLUMN limits_at,
    DROP COLUMN max_running_per_partition,
    DROP COLUMN max_running_per_kind,
    DROP COLUMN max_running,
    DROP COLUMN limited;
ALTER TABLE {{.P}}jobs DROP INDEX running_idx;
ALTER TABLE {{.P}}jobs DROP COLUMN partition_key;
