package sqlite

import (
	"context"
	crand "crypto/rand"
	"database/sql"
	"embed"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/internal/sqlq"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrate brings the schema to the newest version with a goose Provider
// (no goose globals). With lock set, a lock row in <prefix>migrate_lock
// serialises concurrent migrations from several processes.
func migrate(ctx context.Context, db *sql.DB, prefix string, lock bool) error {
	fsys, _, err := sqlq.RenderMigrations(migrationFiles, struct{ P string }{prefix})
	if err != nil {
		return fmt.Errorf("sqlite: render migrations: %w", err)
	}
	var opts []goose.ProviderOption
	if lock {
		opts = append(opts, goose.WithLocker(&migrationLocker{table: prefix + "migrate_lock"}))
	}
	if err := sqlq.Migrate(ctx, db, goose.DialectSQLite3, fsys, prefix+"goose_db_version", opts...); err != nil {
		return fmt.Errorf("sqlite: migrate: %w", err)
	}
	return nil
}

// migrationLock is how long a lock row is honoured; a process that died
// while migrating blocks others at most this long.
const migrationLock = 2 * time.Minute

// migrationLocker is a goose lock.Locker for SQLite, which has no advisory
// locks: a single-row table whose row is the lock, with an expiry so a crashed
// migrator does not block others forever.
type migrationLocker struct {
	table string
	owner string
}

// Lock waits until it owns the lock row or ctx ends.
func (l *migrationLocker) Lock(ctx context.Context, db *sql.DB) error {
	var id [8]byte
	_, _ = crand.Read(id[:])
	l.owner = hex.EncodeToString(id[:])
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+l.table+
		` (id INTEGER PRIMARY KEY CHECK (id = 1), owner TEXT NOT NULL, expires_at INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("sqlite: create migration lock table: %w", err)
	}
	for {
		now := time.Now()
		res, err := db.ExecContext(ctx, `INSERT INTO `+l.table+` (id, owner, expires_at) VALUES (1, ?, ?)
			ON CONFLICT (id) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
			WHERE `+l.table+`.expires_at < ?`, l.owner, now.Add(migrationLock).UnixMicro(), now.UnixMicro())
		if err == nil {
			if n, _ := res.RowsAffected(); n == 1 {
				return nil
			}
		} else if !(dialect{}).Transient(err) {
			return fmt.Errorf("sqlite: take migration lock: %w", err)
		}
		t := time.NewTimer(20*time.Millisecond + rand.N(30*time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("sqlite: wait for migration lock: %w", ctx.Err())
		case <-t.C:
		}
	}
}

// Unlock releases the lock row if this locker still owns it.
func (l *migrationLocker) Unlock(ctx context.Context, db *sql.DB) error {
	var err error
	for i := 0; i < 50; i++ {
		if _, err = db.ExecContext(ctx, `DELETE FROM `+l.table+` WHERE owner = ?`, l.owner); err == nil || !(dialect{}).Transient(err) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return err
}

// SchemaVersion returns the newest migration applied to the store's tables
// (0 when none is: a new database or prefix) and the newest migration this
// build has. Migrate brings applied up to newest.
func (s *Store) SchemaVersion(ctx context.Context) (applied, newest int64, err error) {
	if s.closed.Load() {
		return 0, 0, contract.ErrClosed
	}
	_, newest, err = sqlq.RenderMigrations(migrationFiles, struct{ P string }{s.prefix})
	if err != nil {
		return 0, 0, fmt.Errorf("sqlite: render migrations: %w", err)
	}
	var n int
	if err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?", s.prefix+"goose_db_version").Scan(&n); err != nil {
		return 0, 0, fmt.Errorf("sqlite: schema version: %w", err)
	}
	if n == 0 {
		return 0, newest, nil
	}
	var v sql.NullInt64
	if err := s.db.QueryRowContext(ctx, "SELECT MAX(version_id) FROM "+s.prefix+"goose_db_version WHERE is_applied").Scan(&v); err != nil {
		return 0, 0, fmt.Errorf("sqlite: schema version: %w", err)
	}
	return v.Int64, newest, nil
}
