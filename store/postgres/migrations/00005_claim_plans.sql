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
{{template "claim_functions" (args "S" .S "Skip" "q.paused" "Claimed" "")}}

-- +goose Down
DROP FUNCTION IF EXISTS {{.S}}.claim_skip_locked(text, timestamptz, integer, text, timestamptz, text);
DROP FUNCTION IF EXISTS {{.S}}.claim_candidates(text, timestamptz, integer, text);
