-- Schema version 12: a hold on a unique key keeps the fingerprint of the
-- insert that took it (core.InsertParams.UniqueFingerprint, such as the
-- HTTP API's hash of a submission made with an Idempotency-Key), so that
-- a later insert of the key can tell whether it asked for the same thing,
-- even once the holder's row is gone. At most
-- core.MaxUniqueFingerprintLen (128) bytes of printable ASCII.
--
-- Holds taken before the upgrade keep a NULL fingerprint (read as ""). The
-- ALTER touches unique_keys only, never jobs, and names no algorithm: a
-- nullable column added last is an instant change on MySQL 8.0.12+ and
-- MariaDB 10.3+ (metadata only, no row rewritten), and an in-place one
-- that lets inserts go on elsewhere.

-- +goose Up
ALTER TABLE {{.P}}unique_keys ADD COLUMN fingerprint VARCHAR(128) NULL;

-- +goose Down
ALTER TABLE {{.P}}unique_keys DROP COLUMN fingerprint;
