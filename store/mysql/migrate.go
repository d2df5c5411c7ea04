package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"fmt"
	"hash/fnv"

	"github.com/backlogq/backlog/core/contract"

	"github.com/pressly/goose/v3"

	"github.com/backlogq/backlog/store/internal/sqlq"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrate brings the schema to the newest version with a goose Provider
// (versions in <prefix>goose_db_version). It is safe to run repeatedly and
// from several processes at once: GET_LOCK on a name derived from the
// database and prefix serialises migrators, and a schema already at the
// newest version returns after one query. On a Galera node it first waits
// until the node has applied what the cluster committed (causalWait), so
// that it never reads the version a migration through another node has
// just moved past; GET_LOCK is the node's own there, so processes that
// migrate at the same moment should do it through one node.
func (s *Store) Migrate(ctx context.Context) error {
	if s.closed.Load() {
		return contract.ErrClosed
	}
	fsys, newest, err := sqlq.RenderMigrations(migrationFiles, struct{ P string }{s.prefix})
	if err != nil {
		return fmt.Errorf("mysql: render migrations: %w", err)
	}
	if s.server.galera {
		if err := s.causalWait(ctx); err != nil {
			return fmt.Errorf("mysql: migrate: %w", err)
		}
	}
	if v, err := s.schemaVersion(ctx); err == nil && v >= newest {
		return nil
	}
	// Hold the lock around the whole goose run, version-table creation
	// included: goose's own session locker is taken after it creates the
	// table, and a second migrator then reads a table whose first row is not
	// written yet ("missing zero version migration").
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("mysql: migrate: %w", err)
	}
	defer conn.Close()
	lock := &getLocker{prefix: s.prefix}
	if err := lock.SessionLock(ctx, conn); err != nil {
		return fmt.Errorf("mysql: migrate: %w", err)
	}
	defer lock.SessionUnlock(context.WithoutCancel(ctx), conn)
	if v, err := s.schemaVersion(ctx); err == nil && v >= newest {
		return nil
	}
	err = sqlq.Migrate(ctx, s.db, goose.DialectMySQL, fsys, s.prefix+"goose_db_version")
	if err != nil {
		return fmt.Errorf("mysql: migrate (prefix %q): %w", s.prefix, err)
	}
	return nil
}

// schemaVersion returns the newest applied migration; 0 when the version
// table does not exist yet or holds no applied migration.
func (s *Store) schemaVersion(ctx context.Context) (int64, error) {
	var n int
	err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?",
		s.prefix+"goose_db_version").Scan(&n)
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, nil
	}
	var v sql.NullInt64
	if err := s.db.QueryRowContext(ctx, "SELECT MAX(version_id) FROM "+s.prefix+"goose_db_version WHERE is_applied").Scan(&v); err != nil {
		return 0, err
	}
	return v.Int64, nil
}

// getLocker is a session lock on GET_LOCK, a server-wide named lock
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

// causalWait returns once this Galera node has applied every write set
// the cluster committed before it was called: one read with
// wsrep_sync_wait = 1 on a connection of the pool (the node applies write
// sets in order for all its sessions, so later reads on any connection
// see at least as much). Without it, a store opened on one node right
// after another migrated through another node can read the old schema
// version while the migration's DDL is already applied, and run it again
// ("Duplicate column name").
func (s *Store) causalWait(ctx context.Context) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SET SESSION wsrep_sync_wait = 1"); err != nil {
		return fmt.Errorf("causal wait: %w", err)
	}
	var n int
	err = conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE()").Scan(&n)
	if _, rerr := conn.ExecContext(context.WithoutCancel(ctx), "SET SESSION wsrep_sync_wait = DEFAULT"); rerr != nil {
		conn.Raw(func(any) error { return driver.ErrBadConn }) // not back to the pool with the wait on
	}
	if err != nil {
		return fmt.Errorf("causal wait: %w", err)
	}
	return nil
}

// SchemaVersion returns the newest migration applied to the store's schema
// (0 when none is: a new schema or prefix) and the newest migration this
// build has. Migrate brings applied up to newest.
func (s *Store) SchemaVersion(ctx context.Context) (applied, newest int64, err error) {
	if s.closed.Load() {
		return 0, 0, contract.ErrClosed
	}
	_, newest, err = sqlq.RenderMigrations(migrationFiles, struct{ P string }{s.prefix})
	if err != nil {
		return 0, 0, fmt.Errorf("mysql: render migrations: %w", err)
	}
	v, err := s.schemaVersion(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("mysql: schema version: %w", err)
	}
	return v, newest, nil
}
