-- Schema version 8: drop jobs_running. Version 7 indexed the running jobs
-- by queue, kind and partition key for the claims of queues with
-- concurrency limits; every claim and finish of every queue then wrote
-- and dead-marked one more index entry, which cost unlimited queues about
-- 15 % of their burn-down. The limited claim now counts running jobs
-- through jobs_lease (partial on state = 'running'): running jobs are as
-- many as the cluster's workers.
--
-- No transaction: DROP INDEX CONCURRENTLY takes no lock that blocks
-- claims, inserts or finishes.

-- +goose NO TRANSACTION
-- +goose Up
DROP INDEX CONCURRENTLY IF EXISTS {{.S}}.jobs_running;

-- +goose Down
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_running ON {{.S}}.jobs (queue, kind, partition_key) WHERE state = 'running';
