-- Schema version 4: no schema change; job times outside the range the
-- engine accepts (core.MinTime 1970-01-01T00:00:00Z … core.MaxTime
-- 9999-12-31T23:59:59.999999Z, UTC) are moved to the nearer bound. Before
-- that range was enforced, a time such as 9999-12-31T23:59:59-14:00 (year
-- 10000 in UTC) was stored as given (timestamptz holds it), and every
-- answer holding the job failed to encode as JSON. A run_at or deadline
-- past the maximum becomes the maximum (the job still waits for ever, its
-- deadline still never passes); one before 1970 becomes 1970-01-01 (still
-- due at once, or past). Rows already in range are not written.
--
-- The UPDATE takes the ROW EXCLUSIVE table lock every INSERT and UPDATE
-- takes, which blocks no reads, claims or inserts; it row-locks only the
-- rows it changes (few or none). It reads the table once (run_at leads no
-- index), so on a large table it takes as long as one scan, concurrently
-- with the application's work. lock_timeout keeps it from queueing behind
-- a long-held conflicting lock; the migration then fails and the next
-- start retries it.

-- +goose Up
SET LOCAL lock_timeout = '5s';
UPDATE {{.S}}.jobs SET
    run_at       = LEAST(GREATEST(run_at, timestamptz '1970-01-01 00:00:00+00'), timestamptz '9999-12-31 23:59:59.999999+00'),
    deadline     = CASE WHEN deadline IS NULL THEN NULL ELSE LEAST(GREATEST(deadline, timestamptz '1970-01-01 00:00:00+00'), timestamptz '9999-12-31 23:59:59.999999+00') END,
    created_at   = LEAST(GREATEST(created_at, timestamptz '1970-01-01 00:00:00+00'), timestamptz '9999-12-31 23:59:59.999999+00'),
    attempted_at = CASE WHEN attempted_at IS NULL THEN NULL ELSE LEAST(GREATEST(attempted_at, timestamptz '1970-01-01 00:00:00+00'), timestamptz '9999-12-31 23:59:59.999999+00') END,
    finished_at  = CASE WHEN finished_at IS NULL THEN NULL ELSE LEAST(GREATEST(finished_at, timestamptz '1970-01-01 00:00:00+00'), timestamptz '9999-12-31 23:59:59.999999+00') END,
    lease_until  = CASE WHEN lease_until IS NULL THEN NULL ELSE LEAST(GREATEST(lease_until, timestamptz '1970-01-01 00:00:00+00'), timestamptz '9999-12-31 23:59:59.999999+00') END
WHERE run_at NOT BETWEEN timestamptz '1970-01-01 00:00:00+00' AND timestamptz '9999-12-31 23:59:59.999999+00'
   OR deadline NOT BETWEEN timestamptz '1970-01-01 00:00:00+00' AND timestamptz '9999-12-31 23:59:59.999999+00'
   OR created_at NOT BETWEEN timestamptz '1970-01-01 00:00:00+00' AND timestamptz '9999-12-31 23:59:59.999999+00'
   OR attempted_at NOT BETWEEN timestamptz '1970-01-01 00:00:00+00' AND timestamptz '9999-12-31 23:59:59.999999+00'
   OR finished_at NOT BETWEEN timestamptz '1970-01-01 00:00:00+00' AND timestamptz '9999-12-31 23:59:59.999999+00'
   OR lease_until NOT BETWEEN timestamptz '1970-01-01 00:00:00+00' AND timestamptz '9999-12-31 23:59:59.999999+00';

-- +goose Down
-- The times moved into range cannot be told from times given in range.
SELECT 1;
