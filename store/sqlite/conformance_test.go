package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Factory{
		Strategies: []core.ClaimStrategy{core.StrategyOptimistic},
		New: func(t testing.TB, strategy core.ClaimStrategy) core.Store {
			s, err := Open(context.Background(), filepath.Join(t.TempDir(), "conformance.db"), WithStrategy(strategy))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
		BeginTx: func(t testing.TB, s core.Store) (any, func() error, func() error) {
			tx, err := s.(*Store).DB().BeginTx(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			return tx, tx.Commit, tx.Rollback
		},
		Reopen: func(t testing.TB, s core.Store) core.Store {
			var path string
			if err := s.(*Store).DB().QueryRow("SELECT file FROM pragma_database_list WHERE name = 'main'").Scan(&path); err != nil {
				t.Fatal(err)
			}
			r, err := Open(context.Background(), path, WithPrefix(s.(*Store).Prefix()))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Close() })
			return r
		},
	})
}
