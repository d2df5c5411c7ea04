-- Schema version 12: the partial indexes on pending jobs (jobs_claim,
-- jobs_deadline, jobs_fair) say "pending" as an OR of equalities,
--   (state = 'scheduled' OR state = 'available' OR state = 'retryable'),
-- instead of state IN ('scheduled','available','retryable'). SQLite
-- evaluates an index's WHERE for every row an INSERT, UPDATE or DELETE
-- writes whose state it may change, and compiles an IN list of three or
-- more constants there into a temporary B-tree built afresh for each row
-- and each index (no once-only evaluation in that context): eight such
-- B-trees per job between its insert, its claim and its deletion (twelve
-- with a deadline), a third of the CPU of a claim. Equalities compile to
-- comparisons, and jobs_fair now tests its partition key first.
--
-- SQLite uses a partial index only for a query whose WHERE holds the
-- index's condition spelt the same way (or one equality of it), so every
-- statement that reads these indexes spells pending states this way
-- (store/sqlite: pendingSQL; store/internal/sqlq: the dialect's Pending).
-- Rebuilding the three indexes reads the jobs table once; the rows are
-- not written. A process still running the statements of an older version
-- gets the right answers, but reads the table instead of the indexes.

-- +goose Up
DROP INDEX IF EXISTS {{.P}}jobs_claim;
CREATE INDEX IF NOT EXISTS {{.P}}jobs_claim ON {{.P}}jobs (queue, priority, run_at, id)
    WHERE (state = 'scheduled' OR state = 'available' OR state = 'retryable');
DROP INDEX IF EXISTS {{.P}}jobs_deadline;
CREATE INDEX IF NOT EXISTS {{.P}}jobs_deadline ON {{.P}}jobs (deadline)
    WHERE deadline IS NOT NULL AND (state = 'scheduled' OR state = 'available' OR state = 'retryable');
DROP INDEX IF EXISTS {{.P}}jobs_fair;
CREATE INDEX IF NOT EXISTS {{.P}}jobs_fair ON {{.P}}jobs (queue, partition_key, priority, run_at, id)
    WHERE partition_key IS NOT NULL AND (state = 'scheduled' OR state = 'available' OR state = 'retryable');

-- +goose Down
DROP INDEX IF EXISTS {{.P}}jobs_claim;
CREATE INDEX IF NOT EXISTS {{.P}}jobs_claim ON {{.P}}jobs (queue, priority, run_at, id)
    WHERE state IN ('scheduled','available','retryable');
DROP INDEX IF EXISTS {{.P}}jobs_deadline;
CREATE INDEX IF NOT EXISTS {{.P}}jobs_deadline ON {{.P}}jobs (deadline)
    WHERE deadline IS NOT NULL AND state IN ('scheduled','available','retryable');
DROP INDEX IF EXISTS {{.P}}jobs_fair;
CREATE INDEX IF NOT EXISTS {{.P}}jobs_fair ON {{.P}}jobs (queue, partition_key, priority, run_at, id)
    WHERE state IN ('scheduled','available','retryable') AND partition_key IS NOT NULL;
