-- Schema version 9: queue history (core.QueueHistory), what the
-- dashboard's charts and the cluster counters of /metrics read.
--
-- queue_history holds one row per queue and minute (minute: its start,
-- unix microseconds, UTC): completed and failed are sums every node adds
-- to with an additive upsert (INSERT … ON CONFLICT (queue, minute) DO
-- UPDATE SET completed = completed + excluded.completed); depth and
-- oldest_age_ms (milliseconds) are the gauge of the sample with the
-- latest gauge_at (NULL: no gauge yet). id lets pruning delete a bounded
-- batch; the minute index serves pruning and reads of every queue.
--
-- queue_totals holds what the samples of each queue ever added; it is
-- never pruned, so its columns only grow (counters). New tables only:
-- the jobs table and its statements are untouched.

-- +goose Up
CREATE TABLE IF NOT EXISTS {{.P}}queue_history (
    id            INTEGER PRIMARY KEY,
    queue         TEXT    NOT NULL,
    minute        INTEGER NOT NULL,
    completed     INTEGER NOT NULL DEFAULT 0,
    failed        INTEGER NOT NULL DEFAULT 0,
    gauge_at      INTEGER,
    depth         INTEGER NOT NULL DEFAULT 0,
    oldest_age_ms INTEGER NOT NULL DEFAULT 0,
    UNIQUE (queue, minute)
);
CREATE INDEX IF NOT EXISTS {{.P}}queue_history_minute ON {{.P}}queue_history (minute);
CREATE TABLE IF NOT EXISTS {{.P}}queue_totals (
    queue     TEXT    PRIMARY KEY,
    completed INTEGER NOT NULL DEFAULT 0,
    failed    INTEGER NOT NULL DEFAULT 0
);

-- +goose Down
DROP TABLE IF EXISTS {{.P}}queue_totals;
DROP INDEX IF EXISTS {{.P}}queue_history_minute;
DROP TABLE IF EXISTS {{.P}}queue_history;
