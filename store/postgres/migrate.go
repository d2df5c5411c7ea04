package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/internal/sqlq"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
)

//go:embed migrations/*.sql migrations/*.tmpl
var migrationFiles embed.FS

// Migrate creates the schema if needed and brings it to the newest version
// with a goose Provider (versions in <schema>.goose_db_version). It is safe
// to run repeatedly and from several processes at once, also through a
// transaction pooler: a transaction-scoped advisory lock keyed by the
// schema name, held by a transaction that stays open while the migrations
// run on other connections, serialises migrators, and a store already at
// the newest version returns after one query.
func (s *Store) Migrate(ctx context.Context) error {
	if s.closed.Load() {
		return contract.ErrClosed
	}
	fsys, newest, err := sqlq.RenderMigrations(migrationFiles, struct{ S string }{s.schema})
	if err != nil {
		return fmt.Errorf("postgres: render migrations: %w", err)
	}
	if v, err := s.schemaVersion(ctx); err == nil && v >= newest {
		return nil
	}
	// Hold the lock around the whole run, schema and version-table creation
	// included: goose's own session locker is taken after it creates its
	// table, so concurrent first migrations would race there.
	unlock, err := s.lockMigrations(ctx)
	if err != nil {
		return fmt.Errorf("postgres: migrate schema %s: %w", s.schema, poolerHint(err))
	}
	defer unlock()
	if v, err := s.schemaVersion(ctx); err == nil && v >= newest {
		return nil
	}
	if err := s.createSchema(ctx); err != nil {
		return err
	}
	db := stdlib.OpenDBFromPool(s.pool)
	defer db.Close()
	err = sqlq.Migrate(ctx, db, goose.DialectPostgres, fsys, s.schema+".goose_db_version")
	if err != nil {
		return fmt.Errorf("postgres: migrate schema %s: %w", s.schema, poolerHint(err))
	}
	return nil
}

// schemaVersion returns the newest applied migration of the schema; 0
// when the version table does not exist yet or holds no applied migration.
func (s *Store) schemaVersion(ctx context.Context) (int64, error) {
	var exists bool
	if err := s.pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", s.schema+".goose_db_version").Scan(&exists); err != nil {
		return 0, err
	}
	if !exists {
		return 0, nil
	}
	var v *int64
	err := s.pool.QueryRow(ctx, "SELECT max(version_id) FROM "+s.schema+".goose_db_version WHERE is_applied").Scan(&v)
	if err != nil {
		return 0, err
	}
	if v == nil {
		return 0, nil
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

// lockMigrations takes the schema's migration lock and returns its
// release. The lock is pg_advisory_xact_lock's, taken in a transaction that
// stays open (idle, without a snapshot) while the migrations run on other
// connections, and released when that transaction ends: by the release, or
// by PostgreSQL when the migrator's connection dies. A transaction keeps
// its server session through a transaction pooler, which a session-level
// lock does not: there the lock and the unlock would travel on different
// server sessions, serialise nothing, and leave locks held in sessions the
// pooler hands to others.
//
// The holder is idle in its transaction without a snapshot (backend_xmin
// empty in pg_stat_activity), so CREATE INDEX CONCURRENTLY does not wait
// for it.
//
// A waiting migrator polls pg_try_advisory_xact_lock every 50 ms, each try
// in a transaction of its own, instead of blocking in
// pg_advisory_xact_lock: a statement blocked there keeps its snapshot, and
// CREATE INDEX CONCURRENTLY (schema version 7) waits for every transaction
// with an older snapshot to end, so the holder would wait for the waiter
// that waits for it, a deadlock PostgreSQL does not detect. (goose's own
// Postgres locker polls every 5 s.)
func (s *Store) lockMigrations(ctx context.Context) (release func(), err error) {
	key := lockKey(s.schema)
	for {
		tx, err := s.pool.Begin(ctx)
		if err != nil {
			return nil, fmt.Errorf("take migration lock: %w", err)
		}
		var got bool
		// The simple protocol: its portal is dropped when the statement
		// ends, and with it the statement's snapshot. An extended-protocol
		// portal lives until the next Bind or the end of the transaction,
		// keeping the idle holder's xmin, for which CREATE INDEX
		// CONCURRENTLY would wait forever.
		if err := tx.QueryRow(ctx, "SELECT pg_try_advisory_xact_lock($1)", pgx.QueryExecModeSimpleProtocol, key).Scan(&got); err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
			return nil, fmt.Errorf("take migration lock: %w", err)
		}
		if got {
			return func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }, nil
		}
		_ = tx.Rollback(context.WithoutCancel(ctx))
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("take migration lock: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// lockKey is the advisory lock key of a schema's migrations.
func lockKey(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("backlog migrate " + schema))
	return int64(h.Sum64())
}

// poolerHint adds advice to the errors a transaction pooler causes when the
// store was not told of it: prepared statements that already exist
// (42P05) or do not exist (26000) on the server session a statement landed
// on.
func poolerHint(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "42P05" || pe.Code == "26000") {
		return fmt.Errorf("%w (a transaction pooler such as PgBouncer with pool_mode=transaction in front of PostgreSQL? add pooler=transaction to the store URL: docs/postgres.md)", err)
	}
	return err
}

// SchemaVersion returns the newest migration applied to the store's schema
// (0 when none is: a new schema or prefix) and the newest migration this
// build has. Migrate brings applied up to newest.
func (s *Store) SchemaVersion(ctx context.Context) (applied, newest int64, err error) {
	if s.closed.Load() {
		return 0, 0, contract.ErrClosed
	}
	_, newest, err = sqlq.RenderMigrations(migrationFiles, struct{ S string }{s.schema})
	if err != nil {
		return 0, 0, fmt.Errorf("postgres: render migrations: %w", err)
	}
	v, err := s.schemaVersion(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("postgres: schema version: %w", err)
	}
	return v, newest, nil
}
