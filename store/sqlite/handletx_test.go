package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/storetest"
)

// TestHandleTx proves core.HandleTx on SQLite (storetest.RunHandleTx): a
// write in the handler's transaction happens exactly once across a
// failed attempt, a lost lease and a Continue.
func TestHandleTx(t *testing.T) {
	storetest.RunHandleTx(t, storetest.HandleTxProof{
		Strategies: []contract.ClaimStrategy{contract.StrategySerialized},
		New: func(t testing.TB, strategy contract.ClaimStrategy) contract.Store {
			s, err := Open(context.Background(), filepath.Join(t.TempDir(), "handletx.db"), WithStrategy(strategy))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
		ExecTx: func(ctx context.Context, tx any, q string, args ...any) error {
			_, err := tx.(*sql.Tx).ExecContext(ctx, q, args...)
			return err
		},
		CountTx: func(ctx context.Context, tx any, q string, args ...any) (n int64, err error) {
			err = tx.(*sql.Tx).QueryRowContext(ctx, q, args...).Scan(&n)
			return n, err
		},
		Param:        func(int) string { return "?" },
		SingleWriter: true,
	})
}
