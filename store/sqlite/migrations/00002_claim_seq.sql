-- Schema version 2: jobs.claim_seq, the per-claim fencing value. Every
-- claim increments it and nothing else changes it, so (worker_id,
-- claim_seq) names one execution even when a snooze gave the attempt back
-- or a continuation reset it. ADD COLUMN with a constant default only
-- changes the schema; existing rows read the default.

-- +goose Up
ALTER TABLE {{.P}}jobs ADD COLUMN claim_seq INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE {{.P}}jobs DROP COLUMN claim_seq;
