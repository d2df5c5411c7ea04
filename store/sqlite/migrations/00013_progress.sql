-- Schema version 13: a running job records its progress and a checkpoint
-- (contract.ProgressRecorder). progress is JSON text
-- {"percent":0-100,"message":"…","at":"RFC 3339 UTC"} of the latest
-- attempt, NULL when it recorded none, cleared by every claim; checkpoint
-- is the JSON (at most contract.MaxCheckpointBytes) an attempt saved for
-- the attempts after it, kept until a continuation starts the next step.
--
-- Jobs from before the upgrade read as having neither: ADD COLUMN of a
-- nullable column without a default rewrites no row.

-- +goose Up
ALTER TABLE {{.P}}jobs ADD COLUMN progress TEXT;
ALTER TABLE {{.P}}jobs ADD COLUMN checkpoint TEXT;

-- +goose Down
ALTER TABLE {{.P}}jobs DROP COLUMN checkpoint;
ALTER TABLE {{.P}}jobs DROP COLUMN progress;
