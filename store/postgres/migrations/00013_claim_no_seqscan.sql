-- Schema version 13: the claim functions never scan the jobs table.
--
-- A connection caches the plans of a PL/pgSQL function's statements (a
-- generic plan after five custom ones) until something invalidates them
-- (ANALYZE, a schema change), not when the table grows. On a new jobs
-- table of a few pages the planner found a sequential scan of jobs the
-- cheapest way to update the claimed rows by id, and every connection
-- that first claimed then kept that plan while the table grew to
-- 100,000s of rows: each claim read the whole table (150 ms where an
-- index lookup takes well under 1 ms), the steady-state slowdown
-- described in docs/benchmarks.md. enable_seqscan = off joins the
-- settings these functions already plan under (docs/postgres.md, "The
-- claim plan"); it holds for the statements inside each function only.
--
-- ALTER FUNCTION ... SET takes no lock on the jobs table; connections
-- plan the functions again at their next call.

-- +goose Up
ALTER FUNCTION {{.S}}.claim_skip_locked(text, timestamptz, integer, text, timestamptz, text) SET enable_seqscan = off;
ALTER FUNCTION {{.S}}.claim_candidates(text, timestamptz, integer, text) SET enable_seqscan = off;

-- +goose Down
ALTER FUNCTION {{.S}}.claim_skip_locked(text, timestamptz, integer, text, timestamptz, text) RESET enable_seqscan;
ALTER FUNCTION {{.S}}.claim_candidates(text, timestamptz, integer, text) RESET enable_seqscan;
