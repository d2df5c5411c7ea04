package mysql

import (
	"bytes"
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"testing/fstest"
	"text/template"

	"github.com/pressly/goose/v3"

	"github.com/backlogq/backlog/core"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// renderMigrations returns the embedded migrations with the table prefix
// applied, as a file system goose can read, and the newest version.
func renderMigrations(prefix string) (fs.FS, int64, error) {
	out := fstest.MapFS{}
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, 0, err
	}
	var newest int64
	for _, e := range entries {
		raw, err := migrationFiles.ReadFile("migrations/" + e.Name())
		if err != nil {
			return nil, 0, err
		}
		t, err := template.New(e.Name()).Option("missingkey=error").Parse(string(raw))
		if err != nil {
			return nil, 0, err
		}
		var b bytes.Buffer
		if err := t.Execute(&b, struct{ P string }{prefix}); err != nil {
			return nil, 0, err
		}
		out[e.Name()] = &fstest.MapFile{Data: b.Bytes(), Mode: 0o444}
		if v, err := goose.NumericComponent(e.Name()); err == nil {
			newest = max(newest, v)
		}
	}
	return out, newest, nil
}

// Migrate brings the schema to the newest version with a goose Provider
// (versions in <prefix>goose_db_version). It is safe to run repeatedly and
// from several processes at once: GET_LOCK on a name derived from the
// database and prefix serialises migrators, and a schema already at the
// newest version returns after one query.
func (s *Store) Migrate(ctx context.Context) error {
	if s.closed.Load() {
		return core.ErrClosed
	}
	fsys, newest, err := renderMigrations(s.prefix)
	if err != nil {
		return fmt.Errorf("mysql: render migrations: %w", err)
	}
	if v, err := s.schemaVersion(ctx); err == nil && v >= newest {
		return nil
	}
	p, err := goose.NewProvider(goose.DialectMySQL, s.db, fsys,
		goose.WithTableName(s.prefix+"goose_db_version"),
		goose.WithDisableGlobalRegistry(true),
		goose.WithLogger(goose.NopLogger()),
		goose.WithSessionLocker(&getLocker{prefix: s.prefix}),
	)
	if err != nil {
		return fmt.Errorf("mysql: migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("mysql: migrate (prefix %q): %w", s.prefix, err)
	}
	return nil
}

// schemaVersion returns the newest applied migration; an error when the
// version table does not exist yet.
func (s *Store) schemaVersion(ctx context.Context) (int64, error) {
	var n int
	err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?",
		s.prefix+"goose_db_version").Scan(&n)
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, errors.New("no version table")
	}
	var v sql.NullInt64
	if err := s.db.QueryRowContext(ctx, "SELECT MAX(version_id) FROM "+s.prefix+"goose_db_version WHERE is_applied").Scan(&v); err != nil {
		return 0, err
	}
	if !v.Valid {
		return 0, errors.New("no migrations applied")
	}
	return v.Int64, nil
}

// getLocker is a goose SessionLocker on GET_LOCK, a server-wide named lock
// held by the session: it waits while another process migrates the same
// database and prefix, and the server releases it if that process dies.
type getLocker struct{ prefix string }

// lockName is the GET_LOCK name of the current database and prefix (at
// most 64 characters).
func (l *getLocker) lockName(ctx context.Context, conn *sql.Conn) (string, error) {
	var db sql.NullString
	if err := conn.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&db); err != nil {
		return "", err
	}
	h := fnv.New64a()
	h.Write([]byte(db.String + "\x00" + l.prefix))
	return fmt.Sprintf("backlog-migrate-%016x", h.Sum64()), nil
}

// SessionLock waits (up to 10 minutes, or until ctx ends) for the lock.
func (l *getLocker) SessionLock(ctx context.Context, conn *sql.Conn) error {
	name, err := l.lockName(ctx, conn)
	if err != nil {
		return fmt.Errorf("take migration lock: %w", err)
	}
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 600)", name).Scan(&got); err != nil {
		return fmt.Errorf("take migration lock %s: %w", name, err)
	}
	if got.Int64 != 1 {
		return fmt.Errorf("take migration lock %s: timed out after 10 minutes", name)
	}
	return nil
}

// SessionUnlock releases the lock.
func (l *getLocker) SessionUnlock(ctx context.Context, conn *sql.Conn) error {
	name, err := l.lockName(ctx, conn)
	if err != nil {
		return err
	}
	_, err = conn.ExecContext(ctx, "SELECT RELEASE_LOCK(?)", name)
	return err
}
