-- Schema version 6: unique keys get scopes and hold windows, held in a table
-- of their own. A row of unique_keys is the hold on one scoped key (the
-- scope letter, the queue or kind for those scopes, and the key; see
-- core.ScopedUniqueKey) by one job; its primary key is what makes two
-- concurrent inserts of one scoped key yield one job. A hold outlives its
-- job's row: when the row is deleted (a completion with Delete, Prune,
-- Delete) held_until becomes the job's finished_at + unique_for
-- (microseconds), and the key stays held until then. While the row exists,
-- held_until is NULL and the job's state and finished_at decide.
--
-- The partial unique index jobs_unique_key goes: it made a key unique among
-- all live jobs, which would refuse a queue- or kind-scoped key used in two
-- queues or kinds. Every live job with a key gets a hold (global scope,
-- unique_for 0, as keys behaved before), and so does the newest final job
-- of each key no live job has, so that a retry of it keeps working (a
-- retry needs the job to hold its key). At most one live job had each key.
--
-- No long lock on jobs: the migration runs outside a transaction (NO
-- TRANSACTION), each statement on its own. The new table and its indexes
-- are created before anything uses them, so plain CREATE INDEX takes no
-- lock anyone waits for. The back-fill reads jobs under the ordinary
-- ACCESS SHARE lock. The old index is dropped with DROP INDEX
-- CONCURRENTLY, which waits for running transactions instead of blocking
-- new ones behind an ACCESS EXCLUSIVE lock. Every statement is idempotent,
-- so a migration interrupted half-way is finished by the next start.
-- Processes of the previous version must be stopped before the upgrade:
-- their inserts take no holds.

-- +goose NO TRANSACTION
-- +goose Up
CREATE TABLE IF NOT EXISTS {{.S}}.unique_keys (
    ukey       text COLLATE "C" PRIMARY KEY,
    job_id     bigint      NOT NULL,
    queue      text        NOT NULL,
    kind       text        NOT NULL,
    unique_key text        NOT NULL,
    unique_for bigint      NOT NULL,
    held_until timestamptz
);

-- Releases, retries and admin deletes find a job's hold by its id.
CREATE INDEX IF NOT EXISTS unique_keys_job ON {{.S}}.unique_keys (job_id);

-- Prune forgets holds whose window is over.
CREATE INDEX IF NOT EXISTS unique_keys_held_until ON {{.S}}.unique_keys (held_until)
    WHERE held_until IS NOT NULL;

INSERT INTO {{.S}}.unique_keys (ukey, job_id, queue, kind, unique_key, unique_for, held_until)
SELECT DISTINCT ON (unique_key) 'g:' || unique_key, id, queue, kind, unique_key, 0, NULL
FROM {{.S}}.jobs
WHERE unique_key IS NOT NULL
ORDER BY unique_key, (state IN ('completed','cancelled','discarded')), id DESC
ON CONFLICT DO NOTHING;

DROP INDEX CONCURRENTLY IF EXISTS {{.S}}.jobs_unique_key;

-- +goose Down
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS jobs_unique_key ON {{.S}}.jobs (unique_key)
    WHERE unique_key IS NOT NULL AND state NOT IN ('completed','cancelled','discarded');
DROP TABLE IF EXISTS {{.S}}.unique_keys;
