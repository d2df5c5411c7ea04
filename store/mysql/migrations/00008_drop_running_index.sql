-- Schema version 8: drop running_idx (see the PostgreSQL store's version
-- 8): it held every job, so every insert, claim and finish of every queue
-- wrote an entry of it (inserts lost about 11 %). The limited claim counts
-- running jobs through lease_idx (lease_until is set on running jobs only).

-- +goose Up
ALTER TABLE {{.P}}jobs DROP INDEX running_idx;

-- +goose Down
ALTER TABLE {{.P}}jobs ADD INDEX running_idx (queue, state, kind, partition_key);
