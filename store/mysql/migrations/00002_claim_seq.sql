-- Schema version 2: jobs.claim_seq, the per-claim fencing value. Every
-- claim increments it and nothing else changes it, so (worker_id,
-- claim_seq) names one execution even when a snooze gave the attempt back
-- or a continuation reset it. Appending a column with a default is an
-- instant, metadata-only change on MariaDB 10.3+ and MySQL 8.0.12+.

-- +goose Up
ALTER TABLE {{.P}}jobs ADD COLUMN claim_seq BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE {{.P}}jobs DROP COLUMN claim_seq;
