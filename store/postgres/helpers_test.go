package postgres

import (
	"database/sql"

	"context"
	crand "crypto/rand"
	"encoding/hex"
	"github.com/jackc/pgx/v5/stdlib"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// testDSN returns the PostgreSQL DSN of BACKLOG_TEST_POSTGRES_DSN. Without
// it the test is skipped, or fails when BACKLOG_REQUIRE_DBS=1.
func testDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv("BACKLOG_TEST_POSTGRES_DSN")
	if dsn == "" {
		if os.Getenv("BACKLOG_REQUIRE_DBS") == "1" {
			t.Fatal("BACKLOG_TEST_POSTGRES_DSN is not set and BACKLOG_REQUIRE_DBS=1: PostgreSQL tests must not be skipped")
		}
		t.Skip("BACKLOG_TEST_POSTGRES_DSN is not set")
	}
	return dsn
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
