-- Schema version 5: the claim's two reads of the pending jobs, as
-- functions whose plans cannot flip (docs/postgres.md, "The claim plan").
--
-- A claim must walk the partial index jobs_claim in claim order and stop
-- after LIMIT rows. Until the table has statistics (a new table before
-- autovacuum's first visit, or any table on a server with autovacuum off)
-- the planner estimates a handful of pending rows where there are tens of
-- thousands, and from about 200,000 rows in the table it prefers a bitmap
-- scan of the whole index plus a sort of every pending row, by about 1 % of
-- estimated cost. That plan reads every entry of the index, dead ones
-- included (bitmap scans never mark them dead), on every claim: 20–50 ms
-- per claim instead of 1.5–3 ms, and claims slower each round as dead
-- entries pile up. The SET clauses below hold for the planning of the
-- statements inside each function only: a bitmap scan or an explicit sort
-- is never chosen there, whatever the statistics say. Nothing else of the
-- session changes.
--
-- Both are PL/pgSQL so that their plans are cached per connection, as a
-- prepared statement's are. Parameters are referenced by position.
-- CREATE OR REPLACE FUNCTION takes no lock on the jobs table.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION {{.S}}.claim_skip_locked(
    p_queue text, p_now timestamptz, p_limit integer, p_worker text, p_lease timestamptz, p_tags text)
RETURNS SETOF {{.S}}.jobs
LANGUAGE plpgsql
SET enable_bitmapscan = off
SET enable_sort = off
AS $fn$
BEGIN
    -- The locked ids travel as an array into a primary-key lookup (with a
    -- CTE joined on id, a generic plan may merge-join it with a full scan
    -- of the primary key).
    RETURN QUERY
    UPDATE {{.S}}.jobs j
       SET state = 'running', attempt = j.attempt + 1, claim_seq = j.claim_seq + 1,
           version = j.version + 1, worker_id = $4, attempted_at = $2, lease_until = $5
     WHERE j.id = ANY(ARRAY(
            SELECT p.id FROM {{.S}}.jobs p
             WHERE p.queue = $1
               AND p.state IN ('scheduled','available','retryable')
               AND p.run_at <= $2
               AND (p.tags IS NULL OR p.tags <@ $6::jsonb)
               AND NOT EXISTS (SELECT 1 FROM {{.S}}.queues q WHERE q.name = $1 AND q.paused)
             ORDER BY p.priority, p.run_at, p.id
             LIMIT $3
               FOR UPDATE SKIP LOCKED))
    RETURNING j.*;
END
$fn$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION {{.S}}.claim_candidates(
    p_queue text, p_now timestamptz, p_limit integer, p_tags text)
RETURNS TABLE (id bigint, version bigint)
LANGUAGE plpgsql
SET enable_bitmapscan = off
SET enable_sort = off
AS $fn$
BEGIN
    RETURN QUERY
    SELECT p.id, p.version FROM {{.S}}.jobs p
     WHERE p.queue = $1
       AND p.state IN ('scheduled','available','retryable')
       AND p.run_at <= $2
       AND (p.tags IS NULL OR p.tags <@ $4::jsonb)
       AND NOT EXISTS (SELECT 1 FROM {{.S}}.queues q WHERE q.name = $1 AND q.paused)
     ORDER BY p.priority, p.run_at, p.id
     LIMIT $3;
END
$fn$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION IF EXISTS {{.S}}.claim_skip_locked(text, timestamptz, integer, text, timestamptz, text);
DROP FUNCTION IF EXISTS {{.S}}.claim_candidates(text, timestamptz, integer, text);
