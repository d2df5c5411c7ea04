package postgres

import (
	"context"
	"fmt"
	"testing"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/storetest"
	"github.com/jackc/pgx/v5"
)

// TestHandleTx proves core.HandleTx on PostgreSQL with both claim
// strategies (storetest.RunHandleTx): a write in the handler's
// transaction happens exactly once across a failed attempt, a lease lost
// inside the transaction and a Continue.
func TestHandleTx(t *testing.T) {
	testDSN(t)
	storetest.RunHandleTx(t, storetest.HandleTxProof{
		Strategies: []contract.ClaimStrategy{contract.StrategySkipLocked, contract.StrategyOptimistic},
		New: func(t testing.TB, strategy contract.ClaimStrategy) contract.Store {
			return newTestStore(t, WithStrategy(strategy))
		},
		ExecTx: func(ctx context.Context, tx any, q string, args ...any) error {
			_, err := tx.(pgx.Tx).Exec(ctx, q, args...)
			return err
		},
		CountTx: func(ctx context.Context, tx any, q string, args ...any) (n int64, err error) {
			err = tx.(pgx.Tx).QueryRow(ctx, q, args...).Scan(&n)
			return n, err
		},
		Param: func(n int) string { return fmt.Sprintf("$%d", n) },
	})
}
