package postgres

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store"
	"github.com/backlogq/backlog/storetest"
)

func TestConformance(t *testing.T) {
	testDSN(t)
	storetest.Run(t, storetest.Factory{
		Strategies: []contract.ClaimStrategy{contract.StrategySkipLocked, contract.StrategyOptimistic},
		New: func(t testing.TB, strategy contract.ClaimStrategy) contract.Store {
			return newTestStore(t, WithStrategy(strategy), WithVacuumThreshold(0, 0))
		},
		BeginTx: beginTx,
		Reopen: func(t testing.TB, s contract.Store) contract.Store {
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

// beginTx is the suite's BeginTx for this store: a pgx.Tx on the store's
// pool.
func beginTx(t testing.TB, s contract.Store) (any, func() error, func() error) {
	tx, err := s.(*Store).Pool().Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return tx, func() error { return tx.Commit(context.Background()) }, func() error { return tx.Rollback(context.Background()) }
}

// urlFactory is the suite's factory for stores opened as users open them:
// from the URL base plus a fresh schema and the strategy, through the
// store registry (Reopen: the same schema again).
func urlFactory(base string) storetest.Factory {
	return storetest.Factory{
		Strategies: []contract.ClaimStrategy{contract.StrategySkipLocked, contract.StrategyOptimistic},
		New: func(t testing.TB, strategy contract.ClaimStrategy) contract.Store {
			return openStoreURL(t, base+"&schema="+randomSchema()+"&strategy="+string(strategy))
		},
		BeginTx: beginTx,
		Reopen: func(t testing.TB, s contract.Store) contract.Store {
			ps := s.(*Store)
			return openStoreURL(t, base+"&schema="+ps.Schema()+"&strategy="+string(ps.Strategy()))
		},
	}
}

// openStoreURL opens a store from url through the store registry, as the
// CLI and applications do, closed when t ends.
func openStoreURL(t testing.TB, url string) *Store {
	t.Helper()
	s, err := store.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s.(*Store)
}

// randomSchema is a fresh schema name, for stores on private servers that
// go away with their test (and their schemas with them).
func randomSchema() string {
	var b [6]byte
	_, _ = crand.Read(b[:])
	return "bl_url_" + hex.EncodeToString(b[:])
}
