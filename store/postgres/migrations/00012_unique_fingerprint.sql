-- Schema version 12: a hold on a unique key keeps the fingerprint of the
-- insert that took it (core.InsertParams.UniqueFingerprint, such as the
-- HTTP API's hash of a submission made with an Idempotency-Key), so that
-- a later insert of the key can tell whether it asked for the same thing,
-- even once the holder's row is gone.
--
-- Holds taken before the upgrade keep a NULL fingerprint (read as ""):
-- nothing is rewritten. Adding a nullable column without a default only
-- changes the catalog: the ACCESS EXCLUSIVE lock it takes on unique_keys
-- (never on jobs) lasts an instant, and no row is rewritten.

-- +goose Up
ALTER TABLE {{.S}}.unique_keys ADD COLUMN IF NOT EXISTS fingerprint text;

-- +goose Down
ALTER TABLE {{.S}}.unique_keys DROP COLUMN IF EXISTS fingerprint;
