package sqlite

import (
	"context"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/internal/sqlq"
)

// RunTx runs fn in one transaction on the store's *sql.DB
// (contract.TxRunner): tx is an *sql.Tx (SERIALIZABLE, as every SQLite
// transaction; BEGIN IMMEDIATE with Open's DSN, so it holds the
// database's write lock from the start), committed when fn returns nil and
// rolled back otherwise (fn's error is returned unchanged; a panic rolls
// back and panics again). InsertTx and CompleteTx accept tx, and so does
// sqlx through &sqlx.Tx{Tx: tx.(*sql.Tx), Mapper: db.Mapper}.
//
// While fn runs, every other writer of the file waits on its lock (this
// process's claims, heartbeats and inserts included: they wait up to the
// busy timeout and retry), and on a ":memory:" store, whose pool has one
// connection, every other call of the store waits for the commit: fn must
// not use the store outside tx. ctx bounds the transaction. It returns
// core.ErrClosed once the store is closed, and Begin's or Commit's error;
// nothing is retried.
func (s *Store) RunTx(ctx context.Context, fn func(tx any) error) error {
	if s.closed.Load() {
		return contract.ErrClosed
	}
	return sqlq.RunTx(ctx, s.db, nil, fn)
}
