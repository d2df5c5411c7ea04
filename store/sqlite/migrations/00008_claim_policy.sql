-- Schema version 8: rate limits, fair claims and priority aging (see the
-- PostgreSQL store's version 9): the queue record's policy and
-- fair_cursor, the queue_rates table of GCRA instants, and jobs_fair,
-- partial on pending jobs with a partition key.

-- +goose Up
ALTER TABLE {{.P}}queues ADD COLUMN policy TEXT;
ALTER TABLE {{.P}}queues ADD COLUMN fair_cursor TEXT;
CREATE TABLE IF NOT EXISTS {{.P}}queue_rates (
    queue TEXT    NOT NULL,
    grp   TEXT    NOT NULL,
    tat   INTEGER NOT NULL,
    PRIMARY KEY (queue, grp)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS {{.P}}jobs_fair ON {{.P}}jobs (queue, partition_key, priority, run_at, id)
    WHERE state IN ('scheduled','available','retryable') AND partition_key IS NOT NULL;

-- +goose Down
DROP INDEX IF EXISTS {{.P}}jobs_fair;
DROP TABLE IF EXISTS {{.P}}queue_rates;
ALTER TABLE {{.P}}queues DROP COLUMN fair_cursor;
ALTER TABLE {{.P}}queues DROP COLUMN policy;
