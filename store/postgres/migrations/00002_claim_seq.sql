-- Schema version 2: jobs.claim_seq, the per-claim fencing value. Every
-- claim increments it and nothing else changes it, so (worker_id,
-- claim_seq) names one execution even when a snooze gave the attempt back
-- or a continuation reset it. Adding a NOT NULL column with a constant
-- default rewrites no rows on PostgreSQL 11 and later: the ALTER holds its
-- ACCESS EXCLUSIVE lock only for a catalog update. lock_timeout keeps it
-- from queueing for long behind a long transaction (and every query behind
-- it); the migration then fails and the next start retries it.

-- +goose Up
SET LOCAL lock_timeout = '5s';
ALTER TABLE {{.S}}.jobs ADD COLUMN IF NOT EXISTS claim_seq bigint NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE {{.S}}.jobs DROP COLUMN IF EXISTS claim_seq;
