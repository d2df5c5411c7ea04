-- Schema version 11: run_at_idx indexes every job by (run_at, id), the
-- order of a list by run_at (core.ListParams.ByRunAt; see the PostgreSQL
-- store's version 11). A page of such a list is then one range read in
-- index order that stops after the page's jobs, instead of a sort of
-- every matching job per page. Lists by id read the primary key. The
-- index is built online (InnoDB's in-place ADD INDEX: reads and writes go
-- on meanwhile).

-- +goose Up
ALTER TABLE {{.P}}jobs ADD INDEX run_at_idx (run_at, id);

-- +goose Down
ALTER TABLE {{.P}}jobs DROP INDEX run_at_idx;
