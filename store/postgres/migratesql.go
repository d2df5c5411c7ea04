package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/pressly/goose/v3"

	"github.com/backlogq/backlog/store/internal/sqlq"
)

// MigrationSQL returns the names of the migrations Migrate would apply to
// the store's schema now (00013_claim_no_seqscan, oldest first) and their
// SQL as one script rendered for the schema, for applying them with
// another tool; it applies nothing. Each migration runs in a transaction
// (unless goose runs it outside one) with the insert that records its
// version in <schema>.goose_db_version, so that Migrate later finds it
// applied; a schema without versions gets CREATE SCHEMA and the version
// table first. Nothing pending: no names and "". Errors are the
// database's (reading the version) or contract.ErrClosed.
func (s *Store) MigrationSQL(ctx context.Context) (pending []string, script string, err error) {
	applied, _, err := s.SchemaVersion(ctx)
	if err != nil {
		return nil, "", err
	}
	fsys, _, err := sqlq.RenderMigrations(migrationFiles, struct{ S string }{s.schema})
	if err != nil {
		return nil, "", fmt.Errorf("postgres: render migrations: %w", err)
	}
	return sqlq.MigrationScript(fsys, goose.DialectPostgres, s.schema+".goose_db_version", applied,
		"CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{s.schema}.Sanitize()+";")
}
