-- Schema version 7: drop jobs_running (see the PostgreSQL store's
-- version 8): every claim and finish of every queue paid for it, and the
-- limited claim counts running jobs through jobs_lease instead.

-- +goose Up
DROP INDEX IF EXISTS {{.P}}jobs_running;

-- +goose Down
CREATE INDEX IF NOT EXISTS {{.P}}jobs_running ON {{.P}}jobs (queue, kind, partition_key) WHERE state = 'running';
