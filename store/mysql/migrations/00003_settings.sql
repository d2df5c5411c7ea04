-- Schema version 3: settings, the core.Settings key-value table (the HTTP
-- API keeps its lease-token secret there). The primary key on name makes
-- get-or-create atomic: INSERT IGNORE waits for a concurrent insert of the
-- same name and then does nothing (the store checks the bounds first, so
-- IGNORE never hides a truncation). utf8mb4_bin: names compare byte for
-- byte.

-- +goose Up
CREATE TABLE IF NOT EXISTS {{.P}}settings (
    name  VARCHAR(255) NOT NULL,
    value BLOB         NOT NULL,
    PRIMARY KEY (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE IF EXISTS {{.P}}settings;
