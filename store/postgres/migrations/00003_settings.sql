-- Schema version 3: settings, the core.Settings key-value table (the HTTP
-- API keeps its lease-token secret there). The primary key on name makes
-- get-or-create atomic: INSERT … ON CONFLICT DO NOTHING waits for a
-- concurrent insert of the same name and then does nothing. A new table
-- takes no lock on the existing ones.

-- +goose Up
CREATE TABLE IF NOT EXISTS {{.S}}.settings (
    name  text  PRIMARY KEY,
    value bytea NOT NULL
);

-- +goose Down
DROP TABLE IF EXISTS {{.S}}.settings;
