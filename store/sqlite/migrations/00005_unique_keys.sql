-- Schema version 5: unique keys get scopes and hold windows, held in a table
-- of their own. A row of unique_keys is the hold on one scoped key (the
-- scope letter, the queue or kind for those scopes, and the key; see
-- core.ScopedUniqueKey) by one job; its primary key is what makes two
-- concurrent inserts of one scoped key yield one job. A hold outlives its
-- job's row: when the row is deleted (a completion with Delete, Prune,
-- Delete) held_until becomes the job's finished_at + unique_for
-- (microseconds), and the key stays held until then. While the row exists,
-- held_until is NULL and the job's state and finished_at decide.
--
-- The partial unique index on jobs(unique_key) goes: it made a key unique
-- among all live jobs, which would refuse a queue- or kind-scoped key used
-- in two queues or kinds. Every live job with a key gets a hold (global
-- scope, unique_for 0, as keys behaved before), and so does the newest
-- final job of each key no live job holds, so that a retry of it keeps
-- working (a retry needs the job to hold its key). At most one live job
-- had each key, so the holds are unique.

-- +goose Up
CREATE TABLE IF NOT EXISTS {{.P}}unique_keys (
    ukey       TEXT    PRIMARY KEY,
    job_id     INTEGER NOT NULL,
    queue      TEXT    NOT NULL,
    kind       TEXT    NOT NULL,
    unique_key TEXT    NOT NULL,
    unique_for INTEGER NOT NULL,
    held_until INTEGER
) WITHOUT ROWID;

-- Releases, retries and admin deletes find a job's hold by its id.
CREATE INDEX IF NOT EXISTS {{.P}}unique_keys_job ON {{.P}}unique_keys (job_id);

-- Prune forgets holds whose window is over.
CREATE INDEX IF NOT EXISTS {{.P}}unique_keys_held_until ON {{.P}}unique_keys (held_until)
    WHERE held_until IS NOT NULL;

INSERT INTO {{.P}}unique_keys (ukey, job_id, queue, kind, unique_key, unique_for, held_until)
SELECT 'g:' || unique_key, id, queue, kind, unique_key, 0, NULL FROM (
    SELECT id, queue, kind, unique_key, ROW_NUMBER() OVER (
        PARTITION BY unique_key
        ORDER BY CASE WHEN state IN ('completed','cancelled','discarded') THEN 1 ELSE 0 END, id DESC) AS n
    FROM {{.P}}jobs WHERE unique_key IS NOT NULL
) WHERE n = 1
ON CONFLICT DO NOTHING;

DROP INDEX IF EXISTS {{.P}}jobs_unique_key;

-- +goose Down
CREATE UNIQUE INDEX IF NOT EXISTS {{.P}}jobs_unique_key ON {{.P}}jobs (unique_key)
    WHERE unique_key IS NOT NULL AND state NOT IN ('completed','cancelled','discarded');
DROP TABLE IF EXISTS {{.P}}unique_keys;
