package sqlq

import (
	"context"
	"database/sql"
)

// RunTx runs fn in one transaction begun on db with opts (nil for the
// driver's default), for the stores' contract.TxRunner on database/sql: fn
// gets the *sql.Tx; it is committed when fn returns nil and rolled back
// otherwise (fn's error is returned unchanged; a panic rolls back and
// panics again). Begin's and Commit's errors are returned as they are;
// nothing is retried and no write lock of the store is taken.
func RunTx(ctx context.Context, db *sql.DB, opts *sql.TxOptions, fn func(tx any) error) error {
	tx, err := db.BeginTx(ctx, opts)
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			_ = tx.Rollback()
		}
	}()
	if err := fn(tx); err != nil {
		return err
	}
	done = true
	return tx.Commit()
}
