-- Schema version 15: a running job records its progress and a checkpoint
-- (contract.ProgressRecorder). progress is jsonb
-- {"percent":0-100,"message":"…","at":"RFC 3339 UTC"} of the latest
-- attempt, NULL when it recorded none, cleared by every claim; checkpoint
-- is the jsonb (at most contract.MaxCheckpointBytes) an attempt saved for
-- the attempts after it, kept until a continuation starts the next step.
--
-- Jobs from before the upgrade read as having neither. Adding nullable
-- columns without a default only changes the catalog: the ACCESS
-- EXCLUSIVE lock lasts an instant and no row is rewritten; lock_timeout
-- keeps it from queueing for long behind a long transaction (the
-- migration then fails and the next start retries it).
--
-- The claim functions (claim_functions.tmpl) are defined again so that a
-- claim clears progress; CREATE OR REPLACE FUNCTION resets their SET
-- clauses to the template's, so enable_seqscan = off (version 13) is set
-- again. Neither takes a lock on the jobs table.

-- +goose Up
SET LOCAL lock_timeout = '5s';
ALTER TABLE {{.S}}.jobs ADD COLUMN IF NOT EXISTS progress jsonb;
ALTER TABLE {{.S}}.jobs ADD COLUMN IF NOT EXISTS checkpoint jsonb;
{{template "claim_functions" (args "S" .S "Skip" "(q.paused OR q.limited)" "Claimed" ", progress = NULL")}}
ALTER FUNCTION {{.S}}.claim_skip_locked(text, timestamptz, integer, text, timestamptz, text) SET enable_seqscan = off;
ALTER FUNCTION {{.S}}.claim_candidates(text, timestamptz, integer, text) SET enable_seqscan = off;

-- +goose Down
{{template "claim_functions" (args "S" .S "Skip" "(q.paused OR q.limited)" "Claimed" "")}}
ALTER FUNCTION {{.S}}.claim_skip_locked(text, timestamptz, integer, text, timestamptz, text) SET enable_seqscan = off;
ALTER FUNCTION {{.S}}.claim_candidates(text, timestamptz, integer, text) SET enable_seqscan = off;
ALTER TABLE {{.S}}.jobs DROP COLUMN IF EXISTS checkpoint;
ALTER TABLE {{.S}}.jobs DROP COLUMN IF EXISTS progress;
