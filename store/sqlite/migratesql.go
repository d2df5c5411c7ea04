package sqlite

import (
	"context"
	"fmt"

	"github.com/pressly/goose/v3"

	"github.com/backlogq/backlog/store/internal/sqlq"
)

// MigrationSQL returns the names of the migrations Migrate would apply now
// (00012_pending_predicate, oldest first) and their SQL as one script
// rendered for the table prefix, for applying them with another tool; it
// applies nothing. Each migration runs in a transaction (unless goose runs
// it outside one) with the insert that records its version in
// <prefix>goose_db_version, so that Migrate later finds it applied; a
// database without versions gets the version table first. Nothing
// pending: no names and "". Errors are the database's (reading the
// version) or contract.ErrClosed.
func (s *Store) MigrationSQL(ctx context.Context) (pending []string, script string, err error) {
	applied, _, err := s.SchemaVersion(ctx)
	if err != nil {
		return nil, "", err
	}
	fsys, _, err := sqlq.RenderMigrations(migrationFiles, struct{ P string }{s.prefix})
	if err != nil {
		return nil, "", fmt.Errorf("sqlite: render migrations: %w", err)
	}
	return sqlq.MigrationScript(fsys, goose.DialectSQLite3, s.prefix+"goose_db_version", applied)
}
