-- Schema version 10: queue history (core.QueueHistory), what the
-- dashboard's charts and the cluster counters of /metrics read.
--
-- queue_history holds one row per queue and minute (minute: its start,
-- UTC): completed and failed are sums every node adds to with an additive
-- upsert (INSERT … ON DUPLICATE KEY UPDATE completed = completed +
-- VALUES(completed)); depth and oldest_age_ms (milliseconds) are the
-- gauge of the sample with the latest gauge_at (NULL: no gauge yet). id
-- lets pruning delete a bounded batch; minute_idx serves pruning and
-- reads of every queue. utf8mb4_bin: queue names compare byte for byte.
--
-- queue_totals holds what the samples of each queue ever added; it is
-- never pruned, so its columns only grow (counters). New tables only:
-- the jobs table and its statements are untouched.

-- +goose Up
CREATE TABLE IF NOT EXISTS {{.P}}queue_history (
    id            BIGINT       NOT NULL AUTO_INCREMENT,
    queue         VARCHAR(128) NOT NULL,
    minute        DATETIME(6)  NOT NULL,
    completed     BIGINT       NOT NULL DEFAULT 0,
    failed        BIGINT       NOT NULL DEFAULT 0,
    gauge_at      DATETIME(6)  NULL,
    depth         BIGINT       NOT NULL DEFAULT 0,
    oldest_age_ms BIGINT       NOT NULL DEFAULT 0,
    PRIMARY KEY (id),
    UNIQUE KEY queue_minute (queue, minute),
    KEY minute_idx (minute)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE TABLE IF NOT EXISTS {{.P}}queue_totals (
    queue     VARCHAR(128) NOT NULL,
    completed BIGINT       NOT NULL DEFAULT 0,
    failed    BIGINT       NOT NULL DEFAULT 0,
    PRIMARY KEY (queue)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE IF EXISTS {{.P}}queue_totals;
DROP TABLE IF EXISTS {{.P}}queue_history;
