package postgres

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/store/internal/sqlq"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrate creates the schema if needed and brings it to the newest version
// with a goose Provider (versions in <schema>.goose_db_version). It is safe
// to run repeatedly and from several processes at once: a session-level
// advisory lock keyed by the schema name serialises migrators, and a store
// already at the newest version returns after one query.
func (s *Store) Migrate(ctx context.Context) error {
	if s.closed.Load() {
		return core.ErrClosed
	}
	fsys, newest, err := sqlq.RenderMigrations(migrationFiles, struct{ S string }{s.schema})
	if err != nil {
		return fmt.Errorf("postgres: render migrations: %w", err)
	}
	if v, err := s.schemaVersion(ctx); err == nil && v >= newest {
		return nil
	}
	db := stdlib.OpenDBFromPool(s.pool)
	defer db.Close()
	// Hold the lock around the whole run, schema and version-table creation
	// included: goose's own session locker is taken after it creates its
	// table, so concurrent first migrations would race there.
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("postgres: migrate schema %s: %w", s.schema, err)
	}
	defer conn.Close()
	lock := &advisoryLocker{schema: s.schema}
	if err := lock.SessionLock(ctx, conn); err != nil {
		return fmt.Errorf("postgres: migrate schema %s: %w", s.schema, err)
	}
	defer lock.SessionUnlock(context.WithoutCancel(ctx), conn)
	if v, err := s.schemaVersion(ctx); err == nil && v >= newest {
		return nil
	}
	if err := s.createSchema(ctx); err != nil {
		return err
	}
	err = sqlq.Migrate(ctx, db, goose.DialectPostgres, fsys, s.schema+".goose_db_version")
	if err != nil {
		return fmt.Errorf("postgres: migrate schema %s: %w", s.schema, err)
	}
	return nil
}

// schemaVersion returns the newest applied migration of the schema; an
// error when the version table does not exist yet.
func (s *Store) schemaVersion(ctx context.Context) (int64, error) {
	var exists bool
	if err := s.pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", s.schema+".goose_db_version").Scan(&exists); err != nil {
		return 0, err
	}
	if !exists {
		return 0, errors.New("no version table")
	}
	var v *int64
	err := s.pool.QueryRow(ctx, "SELECT max(version_id) FROM "+s.schema+".goose_db_version WHERE is_applied").Scan(&v)
	if err != nil {
		return 0, err
	}
	if v == nil {
		return 0, errors.New("no migrations applied")
	}
	return *v, nil
}

// createSchema creates the schema if it is missing, before goose puts its
// version table there. Concurrent creators may collide on the catalog's
// unique index; the loser finds the schema created.
func (s *Store) createSchema(ctx context.Context) error {
	var err error
	for range 3 {
		_, err = s.pool.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{s.schema}.Sanitize())
		var pe *pgconn.PgError
		if err == nil || !errors.As(err, &pe) || (pe.Code != "23505" && pe.Code != "42P06") {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("postgres: create schema %s: %w", s.schema, err)
	}
	return nil
}

// advisoryLocker is a session-level advisory lock keyed by the schema name.
// A waiting migrator polls pg_try_advisory_lock every 50 ms instead of
// blocking in pg_advisory_lock: a statement blocked there keeps its
// snapshot, and CREATE INDEX CONCURRENTLY (schema version 7) waits for
// every transaction with an older snapshot to end, so the holder would
// wait for the waiter that waits for it, a deadlock PostgreSQL does not
// detect. (goose's own Postgres locker polls every 5 s.)
type advisoryLocker struct{ schema string }

// lockKey is the advisory lock key of a schema's migrations.
func lockKey(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("backlog migrate " + schema))
	return int64(h.Sum64())
}

// SessionLock waits for the lock on conn, polling every 50 ms.
func (l *advisoryLocker) SessionLock(ctx context.Context, conn *sql.Conn) error {
	for {
		var got bool
		if err := conn.QueryRowContext(ctx, "SELECT pg_try_advisory_lock($1)", lockKey(l.schema)).Scan(&got); err != nil {
			return fmt.Errorf("take migration lock: %w", err)
		}
		if got {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("take migration lock: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// SessionUnlock releases the lock.
func (l *advisoryLocker) SessionUnlock(ctx context.Context, conn *sql.Conn) error {
	_, err := conn.ExecContext(ctx, "SELECT pg_advisory_unlock($1)", lockKey(l.schema))
	return err
}
