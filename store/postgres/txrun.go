package postgres

import (
	"context"
	"time"

	"github.com/backlogq/backlog/core/contract"

	"github.com/jackc/pgx/v5"
)

// rollbackTimeout bounds the rollback of a transaction whose context has
// ended.
const rollbackTimeout = 5 * time.Second

// RunTx runs fn in one transaction on the store's pool (contract.TxRunner): tx
// is a pgx.Tx at the database's default isolation level (READ COMMITTED
// unless the server says otherwise), committed when fn returns nil and
// rolled back otherwise (fn's error is returned unchanged; a panic rolls
// back and panics again). InsertTx and CompleteTx accept tx. ctx bounds
// the transaction. It returns core.ErrClosed once the store is closed, and
// Begin's or Commit's error; nothing is retried.
func (s *Store) RunTx(ctx context.Context, fn func(tx any) error) (err error) {
	if s.closed.Load() {
		return contract.ErrClosed
	}
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{})
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
			_ = tx.Rollback(rctx)
			cancel()
		}
	}()
	if err := fn(tx); err != nil {
		return err
	}
	done = true
	return tx.Commit(ctx)
}
