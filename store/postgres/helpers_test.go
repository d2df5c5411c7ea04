package postgres

import (
	"context"
	crand "crypto/rand"
	"database/sql"
	"encoding/hex"
	"sync"
	"testing"
	"time"

	"github.com/backlogq/backlog/storetest/dbtest"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
)

// testDSN returns the PostgreSQL server's DSN from dbtest: the one in
// BACKLOG_TEST_POSTGRES_DSN, else a skip (a failure when
// BACKLOG_REQUIRE_DBS=1). Tests isolate themselves
// with a fresh schema each.
func testDSN(t testing.TB) string {
	t.Helper()
	return dbtest.PostgresServerDSN(t)
}

var (
	sharedOnce sync.Once
	sharedPool *pgxpool.Pool
	sharedErr  error
)

// testPool returns a pool shared by the tests of this package.
func testPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	dsn := testDSN(t)
	sharedOnce.Do(func() {
		cfg, err := pgxpool.ParseConfig(dsn)
		if err != nil {
			sharedErr = err
			return
		}
		cfg.MaxConns = 16
		sharedPool, sharedErr = pgxpool.NewWithConfig(context.Background(), cfg)
	})
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return sharedPool
}

// freshSchema returns the name of a new, unused schema (created by the
// store's migration) and drops it when the test ends.
func freshSchema(t testing.TB) string {
	t.Helper()
	var b [6]byte
	_, _ = crand.Read(b[:])
	name := "bl_test_" + hex.EncodeToString(b[:])
	pool := testPool(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+name+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", name, err)
		}
	})
	return name
}

// newTestStore returns a migrated store on a fresh schema and the shared
// pool, closed when the test ends.
func newTestStore(t testing.TB, opts ...Option) *Store {
	t.Helper()
	pool := testPool(t)
	opts = append([]Option{WithSchema(freshSchema(t))}, opts...)
	s, err := New(context.Background(), pool, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// stdlibDB opens a *sql.DB on the store's pool through pgx's stdlib driver.
func stdlibDB(s *Store) *sql.DB { return stdlib.OpenDBFromPool(s.Pool()) }
