-- Schema version 6: unique keys get scopes and hold windows, held in a table
-- of their own. A row of unique_keys is the hold on one scoped key (the
-- scope letter, the queue or kind for those scopes, and the key; see
-- core.ScopedUniqueKey) by one job; its primary key is what makes two
-- concurrent inserts of one scoped key yield one job. The scoped key is
-- VARBINARY, compared byte for byte (utf8mb4_bin would ignore trailing
-- spaces). A hold outlives its job's row: when the row is deleted (a
-- completion with Delete, Prune, Delete) held_until becomes the job's
-- finished_at + unique_for (microseconds), and the key stays held until
-- then. While the row exists, held_until is NULL and the job's state and
-- finished_at decide.
--
-- The generated column unique_live and its unique index unique_idx go:
-- they made a key unique among all live jobs, which would refuse a queue-
-- or kind-scoped key used in two queues or kinds. Every live job with a
-- key gets a hold (global scope, unique_for 0, as keys behaved before),
-- and so does the newest final job of each key no live job has, so that a
-- retry of it keeps working (a retry needs the job to hold its key). At
-- most one live job had each key.
--
-- The ALTER names no algorithm, so the server picks the one with the least
-- locking it has: dropping the index and the stored column rebuilds the
-- table in place while inserts, claims and finishes go on (MySQL 8.0 and
-- MariaDB 10.6+), holding an exclusive metadata lock only briefly at its
-- start and end. Processes of the previous version must be stopped before
-- the upgrade: their inserts take no holds.

-- +goose Up
CREATE TABLE IF NOT EXISTS {{.P}}unique_keys (
    ukey       VARBINARY(600) NOT NULL,
    job_id     BIGINT         NOT NULL,
    queue      VARCHAR(128)   NOT NULL,
    kind       VARCHAR(255)   NOT NULL,
    unique_key VARCHAR(255)   NOT NULL,
    unique_for BIGINT         NOT NULL,
    held_until DATETIME(6)    NULL,
    PRIMARY KEY (ukey),
    -- Releases, retries and admin deletes find a job's hold by its id.
    INDEX unique_keys_job (job_id),
    -- Prune forgets holds whose window is over.
    INDEX unique_keys_held_until (held_until)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

INSERT IGNORE INTO {{.P}}unique_keys (ukey, job_id, queue, kind, unique_key, unique_for, held_until)
SELECT CONCAT('g:', unique_key), id, queue, kind, unique_key, 0, NULL FROM (
    SELECT id, queue, kind, unique_key, ROW_NUMBER() OVER (
        PARTITION BY unique_key
        ORDER BY CASE WHEN state IN ('completed','cancelled','discarded') THEN 1 ELSE 0 END, id DESC) AS n
    FROM {{.P}}jobs WHERE unique_key IS NOT NULL
) AS k WHERE n = 1;

ALTER TABLE {{.P}}jobs DROP INDEX unique_idx, DROP COLUMN unique_live;

-- +goose Down
ALTER TABLE {{.P}}jobs
    ADD COLUMN unique_live VARCHAR(255) AS (CASE WHEN state IN ('scheduled','available','running','retryable') THEN unique_key END) STORED,
    ADD UNIQUE INDEX unique_idx (unique_live);
DROP TABLE IF EXISTS {{.P}}unique_keys;
