package postgres

import (
	"context"
	"testing"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/storetest"
)

func TestConformance(t *testing.T) {
	testDSN(t)
	storetest.Run(t, storetest.Factory{
		Strategies: []core.ClaimStrategy{core.StrategySkipLocked, core.StrategyOptimistic},
		New: func(t testing.TB, strategy core.ClaimStrategy) core.Store {
			return newTestStore(t, WithStrategy(strategy), WithVacuumThreshold(0, 0))
		},
		BeginTx: func(t testing.TB, s core.Store) (any, func() error, func() error) {
			tx, err := s.(*Store).Pool().Begin(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			return tx, func() error { return tx.Commit(context.Background()) }, func() error { return tx.Rollback(context.Background()) }
		},
		Reopen: func(t testing.TB, s core.Store) core.Store {
			ps := s.(*Store)
			r, err := Open(context.Background(), testDSN(t), WithSchema(ps.Schema()), WithStrategy(ps.Strategy()))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Close() })
			return r
		},
	})
}
