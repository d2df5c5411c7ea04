package mysql

import (
	"context"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/internal/sqlq"
)

// RunTx runs fn in one transaction on the store's *sql.DB
// (contract.TxRunner): tx is an *sql.Tx at READ COMMITTED, the isolation the
// store's own statements run at (Open sets it on every connection, New
// asks for it per transaction), committed when fn returns nil and rolled
// back otherwise (fn's error is returned unchanged; a panic rolls back and
// panics again). InsertTx and CompleteTx accept tx, and sqlx works on it
// as &sqlx.Tx{Tx: tx.(*sql.Tx), Mapper: db.Mapper} (see core.HandleTx).
// ctx bounds the transaction.
// It returns core.ErrClosed once the store is closed, and Begin's or
// Commit's error; nothing is retried (a deadlock fails the attempt, which
// its retry policy retries).
func (s *Store) RunTx(ctx context.Context, fn func(tx any) error) error {
	if s.closed.Load() {
		return contract.ErrClosed
	}
	return sqlq.RunTx(ctx, s.db, s.sdb.TxOptions, fn)
}
