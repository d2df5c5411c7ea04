package mysql

import (
	"context"
	"sync"
	"testing"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/storetest"
	"github.com/backlogq/backlog/storetest/dbtest"
)

// TestConformance runs the suite once per claim strategy, each subtest on
// a fresh database of the server named by BACKLOG_TEST_MYSQL_DSN.
func TestConformance(t *testing.T) {
	conformance(t)
}

// TestConformanceNoReturning runs the suite with MySQL's statement forms
// (no INSERT/DELETE … RETURNING) on whatever server is configured, so the
// paths MySQL takes are proven on MariaDB too.
func TestConformanceNoReturning(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode")
	}
	conformance(t, func(c *config) { c.noReturning = true })
}

func conformance(t *testing.T, opts ...Option) {
	var mu sync.Mutex
	dsns := map[contract.Store]string{}
	storetest.Run(t, storetest.Factory{
		Strategies: []contract.ClaimStrategy{contract.StrategySkipLocked, contract.StrategyOptimistic},
		New: func(t testing.TB, strategy contract.ClaimStrategy) contract.Store {
			dsn := dbtest.MySQLDSN(t)
			s, err := Open(context.Background(), dsn, append(opts, WithStrategy(strategy), WithMaxOpenConns(8))...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			mu.Lock()
			dsns[s] = dsn
			mu.Unlock()
			return s
		},
		BeginTx: beginTx,
		Reopen: func(t testing.TB, s contract.Store) contract.Store {
			mu.Lock()
			dsn := dsns[s]
			mu.Unlock()
			ms := s.(*Store)
			r, err := Open(context.Background(), dsn, append(opts, WithPrefix(ms.Prefix()), WithStrategy(ms.Strategy()), WithMigrate(false))...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Close() })
			return r
		},
	})
}

// beginTx is the suite's BeginTx for this store: a *sql.Tx on the store's
// database.
func beginTx(t testing.TB, s contract.Store) (any, func() error, func() error) {
	tx, err := s.(*Store).DB().BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return tx, tx.Commit, tx.Rollback
}
