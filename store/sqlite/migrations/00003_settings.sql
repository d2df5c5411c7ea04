-- Schema version 3: settings, the core.Settings key-value table (the HTTP
-- API keeps its lease-token secret there). The primary key on name makes
-- get-or-create atomic: INSERT … ON CONFLICT DO NOTHING, then a read.

-- +goose Up
CREATE TABLE IF NOT EXISTS {{.P}}settings (
    name  TEXT PRIMARY KEY,
    value BLOB NOT NULL
);

-- +goose Down
DROP TABLE IF EXISTS {{.P}}settings;
