-- Schema version 10: queue history (core.QueueHistory), what the
-- dashboard's charts and the cluster counters of /metrics read.
--
-- queue_history holds one row per queue and minute (minute: its start,
-- UTC): completed and failed are sums that every node adds to with an
-- additive upsert (INSERT … ON CONFLICT (queue, minute) DO UPDATE SET
-- completed = completed + excluded.completed), so the counts of any
-- number of nodes add up; depth and oldest_age_ms (milliseconds) are the
-- gauge of the sample with the latest gauge_at (NULL: no gauge yet). id
-- lets pruning delete a bounded batch; queue_history_minute serves
-- pruning and the reads of every queue since a minute.
--
-- queue_totals holds what the samples of each queue ever added; it is
-- never pruned, so its columns only grow (counters).
--
-- New tables only: no lock is taken on the jobs table, and the claim and
-- finish statements are unchanged (the history is written by each node's
-- maintenance, never by a claim or a finish).

-- +goose Up
CREATE TABLE IF NOT EXISTS {{.S}}.queue_history (
    id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue         text        NOT NULL,
    minute        timestamptz NOT NULL,
    completed     bigint      NOT NULL DEFAULT 0,
    failed        bigint      NOT NULL DEFAULT 0,
    gauge_at      timestamptz,
    depth         bigint      NOT NULL DEFAULT 0,
    oldest_age_ms bigint      NOT NULL DEFAULT 0,
    CONSTRAINT queue_history_queue_minute UNIQUE (queue, minute)
);
CREATE INDEX IF NOT EXISTS queue_history_minute ON {{.S}}.queue_history (minute);
CREATE TABLE IF NOT EXISTS {{.S}}.queue_totals (
    queue     text   PRIMARY KEY,
    completed bigint NOT NULL DEFAULT 0,
    failed    bigint NOT NULL DEFAULT 0
);

-- +goose Down
DROP TABLE IF EXISTS {{.S}}.queue_totals;
DROP TABLE IF EXISTS {{.S}}.queue_history;
