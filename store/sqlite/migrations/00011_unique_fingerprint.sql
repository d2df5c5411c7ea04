-- Schema version 11: a hold on a unique key keeps the fingerprint of the
-- insert that took it (core.InsertParams.UniqueFingerprint, such as the
-- HTTP API's hash of a submission made with an Idempotency-Key), so that
-- a later insert of the key can tell whether it asked for the same thing,
-- even once the holder's row is gone.
--
-- Holds taken before the upgrade keep a NULL fingerprint (read as ""):
-- ADD COLUMN of a nullable column without a default rewrites no row.

-- +goose Up
ALTER TABLE {{.P}}unique_keys ADD COLUMN fingerprint TEXT;

-- +goose Down
ALTER TABLE {{.P}}unique_keys DROP COLUMN fingerprint;
