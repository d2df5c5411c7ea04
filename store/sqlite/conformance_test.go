package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/storetest"
)

// TestConformance runs the suite against the store as Open configures it.
func TestConformance(t *testing.T) {
	conformance(t)
}

func conformance(t *testing.T, opts ...Option) {
	storetest.Run(t, storetest.Factory{
		Strategies: []contract.ClaimStrategy{contract.StrategySerialized},
		New: func(t testing.TB, strategy contract.ClaimStrategy) contract.Store {
			s, err := Open(context.Background(), filepath.Join(t.TempDir(), "conformance.db"), append(opts, WithStrategy(strategy))...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
		BeginTx: func(t testing.TB, s contract.Store) (any, func() error, func() error) {
			tx, err := s.(*Store).DB().BeginTx(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			return tx, tx.Commit, tx.Rollback
		},
		Reopen: func(t testing.TB, s contract.Store) contract.Store {
			var path string
			if err := s.(*Store).DB().QueryRow("SELECT file FROM pragma_database_list WHERE name = 'main'").Scan(&path); err != nil {
				t.Fatal(err)
			}
			r, err := Open(context.Background(), path, append(opts, WithPrefix(s.(*Store).Prefix()))...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Close() })
			return r
		},
	})
}
