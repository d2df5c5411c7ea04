-- Schema version 4: no schema change; job times outside the range the
-- engine accepts (core.MinTime 1970-01-01T00:00:00Z … core.MaxTime
-- 9999-12-31T23:59:59.999999Z, UTC) are moved to the nearer bound. Before
-- that range was enforced, a time such as 9999-12-31T23:59:59-14:00 (year
-- 10000 in UTC) was stored as given (here: unix microseconds, which hold
-- it), and every answer holding the job failed to encode as JSON. A run_at
-- or deadline past the maximum becomes the maximum (the job still waits
-- for ever, its deadline still never passes); one before 1970 becomes
-- 1970-01-01 (still due at once, or past). Rows already in range are not
-- written.

-- +goose Up
UPDATE {{.P}}jobs SET
    run_at       = MIN(MAX(run_at, 0), 253402300799999999),
    deadline     = CASE WHEN deadline IS NULL THEN NULL ELSE MIN(MAX(deadline, 0), 253402300799999999) END,
    created_at   = MIN(MAX(created_at, 0), 253402300799999999),
    attempted_at = CASE WHEN attempted_at IS NULL THEN NULL ELSE MIN(MAX(attempted_at, 0), 253402300799999999) END,
    finished_at  = CASE WHEN finished_at IS NULL THEN NULL ELSE MIN(MAX(finished_at, 0), 253402300799999999) END,
    lease_until  = CASE WHEN lease_until IS NULL THEN NULL ELSE MIN(MAX(lease_until, 0), 253402300799999999) END
WHERE run_at NOT BETWEEN 0 AND 253402300799999999
   OR deadline NOT BETWEEN 0 AND 253402300799999999
   OR created_at NOT BETWEEN 0 AND 253402300799999999
   OR attempted_at NOT BETWEEN 0 AND 253402300799999999
   OR finished_at NOT BETWEEN 0 AND 253402300799999999
   OR lease_until NOT BETWEEN 0 AND 253402300799999999;

-- +goose Down
-- The times moved into range cannot be told from times given in range.
SELECT 1;
