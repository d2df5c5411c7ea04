-- Schema version 9: rate limits, fair claims and priority aging (see the
-- PostgreSQL store's version 9): the queue record's policy and
-- fair_cursor, and the queue_rates table of GCRA instants.
--
-- MySQL has no partial indexes, so fair_key, a virtual column, is the
-- partition key of pending jobs (NULL otherwise), and fair_idx indexes
-- it by queue in claim order. A job without a partition key keeps a NULL
-- entry that no claim or finish changes; a keyed job's entry moves when
-- it leaves pending. A virtual column is added in place, without copying
-- the table; the index is built online (reads and writes go on).

-- +goose Up
ALTER TABLE {{.P}}queues ADD COLUMN policy TEXT NULL, ADD COLUMN fair_cursor VARCHAR(255) NULL;
CREATE TABLE IF NOT EXISTS {{.P}}queue_rates (
    queue VARCHAR(128) NOT NULL,
    grp   VARCHAR(300) NOT NULL,
    tat   DATETIME(6)  NOT NULL,
    PRIMARY KEY (queue, grp)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
ALTER TABLE {{.P}}jobs
    ADD COLUMN fair_key VARCHAR(255) AS (CASE WHEN state IN ('scheduled','available','retryable') THEN partition_key END) VIRTUAL;
ALTER TABLE {{.P}}jobs ADD INDEX fair_idx (queue, fair_key, priority, run_at, id);

-- +goose Down
ALTER TABLE {{.P}}jobs DROP INDEX fair_idx;
ALTER TABLE {{.P}}jobs DROP COLUMN fair_key;
DROP TABLE IF EXISTS {{.P}}queue_rates;
ALTER TABLE {{.P}}queues DROP COLUMN fair_cursor, DROP COLUMN policy;
