-- Schema version 4: no schema change; job times are brought into the
-- range the engine accepts (core.MinTime 1970-01-01T00:00:00Z …
-- core.MaxTime 9999-12-31T23:59:59.999999Z, UTC). DATETIME(6) ends at the
-- maximum already, but before that range was enforced a time outside
-- 1000-01-01 … 9999-12-31 (such as 9999-12-31T23:59:59-14:00, year 10000
-- in UTC) reached INSERT IGNORE, which stores the zero date
-- '0000-00-00 00:00:00' instead with a warning: such a run_at read back as
-- unset and the job was due at once; such a deadline read back as none.
-- Whether the given time was too early or too late is lost, so the repair
-- keeps what the engine has been doing with those rows: a zero run_at
-- becomes 1970-01-01 (due at once), a zero deadline, attempted_at,
-- finished_at or lease_until becomes NULL (none), a zero created_at
-- becomes 1970-01-01; times from 1000 to 1969 become 1970-01-01 (as
-- past as before). Rows already in range are not written. Sessions run
-- READ COMMITTED, so the scan keeps no locks on the rows it does not
-- change.

-- +goose Up
UPDATE {{.P}}jobs SET
    run_at       = CASE WHEN run_at < '1970-01-01 00:00:00' THEN '1970-01-01 00:00:00.000000' ELSE run_at END,
    deadline     = CASE WHEN deadline < '1000-01-01 00:00:00' THEN NULL WHEN deadline < '1970-01-01 00:00:00' THEN '1970-01-01 00:00:00.000000' ELSE deadline END,
    created_at   = CASE WHEN created_at < '1970-01-01 00:00:00' THEN '1970-01-01 00:00:00.000000' ELSE created_at END,
    attempted_at = CASE WHEN attempted_at < '1000-01-01 00:00:00' THEN NULL WHEN attempted_at < '1970-01-01 00:00:00' THEN '1970-01-01 00:00:00.000000' ELSE attempted_at END,
    finished_at  = CASE WHEN finished_at < '1000-01-01 00:00:00' THEN NULL WHEN finished_at < '1970-01-01 00:00:00' THEN '1970-01-01 00:00:00.000000' ELSE finished_at END,
    lease_until  = CASE WHEN lease_until < '1000-01-01 00:00:00' THEN NULL WHEN lease_until < '1970-01-01 00:00:00' THEN '1970-01-01 00:00:00.000000' ELSE lease_until END
WHERE run_at < '1970-01-01 00:00:00'
   OR deadline < '1970-01-01 00:00:00'
   OR created_at < '1970-01-01 00:00:00'
   OR attempted_at < '1970-01-01 00:00:00'
   OR finished_at < '1970-01-01 00:00:00'
   OR lease_until < '1970-01-01 00:00:00';

-- +goose Down
-- The times moved into range cannot be told from times given in range.
SELECT 1;
