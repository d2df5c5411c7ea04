-- Schema version 13: a running job records its progress and a checkpoint
-- (contract.ProgressRecorder). progress is JSON text
-- {"percent":0-100,"message":"…","at":"RFC 3339 UTC"} of the latest
-- attempt, NULL when it recorded none, cleared by every claim; checkpoint
-- is the JSON (at most contract.MaxCheckpointBytes, 64 KiB, hence
-- MEDIUMTEXT) an attempt saved for the attempts after it, kept until a
-- continuation starts the next step. Both are text, not JSON: the store
-- validates them before it writes, and on MariaDB a JSON column would add
-- a CHECK constraint that the ALTER must verify on every row.
--
-- Jobs from before the upgrade read as having neither. The ALTER names no
-- algorithm: nullable columns added last are an instant change on MySQL
-- 8.0.29+ and MariaDB 10.3+ (metadata only, no row rewritten), and an
-- in-place one that lets inserts go on elsewhere.

-- +goose Up
ALTER TABLE {{.P}}jobs ADD COLUMN progress TEXT NULL, ADD COLUMN checkpoint MEDIUMTEXT NULL;

-- +goose Down
ALTER TABLE {{.P}}jobs DROP COLUMN checkpoint, DROP COLUMN progress;
