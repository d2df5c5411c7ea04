package sqlq

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/backlogq/backlog/core/contract"

	"github.com/jmoiron/sqlx"
)

// Rows is the cursor a Conn returns; *sql.Rows implements it, and a pgx.Rows
// needs a one-line adapter (its Close returns nothing).
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close() error
}

// Conn runs statements on a pool, a connection or a transaction.
type Conn interface {
	// Exec runs a statement that returns no rows.
	Exec(ctx context.Context, query string, args ...any) (sql.Result, error)
	// Query runs a statement that returns rows. The caller closes them.
	Query(ctx context.Context, query string, args ...any) (Rows, error)
}

// DB is what a Store runs on: Exec/Query for reads (and only reads), and InTx
// for every write.
type DB interface {
	Conn
	// InTx runs fn in one write transaction and commits when it returns
	// nil; it rolls back and returns fn's error otherwise. On SQLite the
	// transaction starts with BEGIN IMMEDIATE. InTx does not retry; the
	// Store retries transient errors around it, so fn may run several times.
	InTx(ctx context.Context, fn func(Conn) error) error
}

// StdExecer is the database/sql surface shared by *sql.DB, *sql.Tx,
// *sql.Conn, *sqlx.DB and *sqlx.Tx.
type StdExecer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// StdConn adapts a database/sql executor to Conn.
type StdConn struct{ X StdExecer }

// Exec runs ExecContext.
func (c StdConn) Exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return c.X.ExecContext(ctx, q, args...)
}

// Query runs QueryContext.
func (c StdConn) Query(ctx context.Context, q string, args ...any) (Rows, error) {
	r, err := c.X.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// StdDB adapts a *sql.DB to DB. Write transactions use TxOptions (nil for
// the driver's default; SQLite's "_txlock=immediate" DSN makes that BEGIN
// IMMEDIATE). When WriteLock is set, it is held around every write
// transaction, serialising this process's writers in Go instead of in the
// database's busy handler (used by SQLite, which allows one writer anyway).
//
// When Stmts is set, statements that repeat run as prepared statements
// (see StmtCache); it must be on the same *sql.DB.
type StdDB struct {
	DB        *sql.DB
	TxOptions *sql.TxOptions
	WriteLock sync.Locker
	Stmts     *StmtCache
}

// Exec runs ExecContext on the pool.
func (d *StdDB) Exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if st := d.stmt(ctx, q); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return d.DB.ExecContext(ctx, q, args...)
}

func (d *StdDB) stmt(ctx context.Context, q string) *sql.Stmt {
	if d.Stmts == nil {
		return nil
	}
	return d.Stmts.get(ctx, q)
}

// Query runs QueryContext on the pool.
func (d *StdDB) Query(ctx context.Context, q string, args ...any) (Rows, error) {
	var r *sql.Rows
	var err error
	if st := d.stmt(ctx, q); st != nil {
		r, err = st.QueryContext(ctx, args...)
	} else {
		r, err = d.DB.QueryContext(ctx, q, args...)
	}
	if err != nil {
		return nil, err
	}
	return r, nil
}

// InTx runs fn in a transaction begun with TxOptions, under WriteLock.
func (d *StdDB) InTx(ctx context.Context, fn func(Conn) error) (err error) {
	if d.WriteLock != nil {
		d.WriteLock.Lock()
		defer d.WriteLock.Unlock()
	}
	tx, err := d.DB.BeginTx(ctx, d.TxOptions)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	var c Conn = StdConn{tx}
	if d.Stmts != nil {
		c = cachedConn{tx: tx, cache: d.Stmts}
	}
	if err = fn(c); err != nil {
		return err
	}
	return tx.Commit()
}

// GuardedDB is a StdDB that fails every call with core.ErrClosed once
// Closed is set (the store's Close).
type GuardedDB struct {
	StdDB
	Closed *atomic.Bool
}

func (d *GuardedDB) Exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if d.Closed.Load() {
		return nil, contract.ErrClosed
	}
	return d.StdDB.Exec(ctx, q, args...)
}

func (d *GuardedDB) Query(ctx context.Context, q string, args ...any) (Rows, error) {
	if d.Closed.Load() {
		return nil, contract.ErrClosed
	}
	return d.StdDB.Query(ctx, q, args...)
}

func (d *GuardedDB) InTx(ctx context.Context, fn func(Conn) error) error {
	if d.Closed.Load() {
		return contract.ErrClosed
	}
	return d.StdDB.InTx(ctx, fn)
}

// TxConn returns the caller's transaction tx as a Conn, for the stores'
// InsertTx and CompleteTx on database/sql: a non-nil *sql.Tx or *sqlx.Tx.
// Anything else is an error wrapping core.ErrUnsupported, prefixed by name.
func TxConn(name string, tx any) (Conn, error) {
	switch t := tx.(type) {
	case *sql.Tx:
		if t != nil {
			return StdConn{X: t}, nil
		}
	case *sqlx.Tx:
		if t != nil && t.Tx != nil {
			return StdConn{X: t.Tx}, nil
		}
	}
	return nil, fmt.Errorf("%s: transaction of type %T (want *sql.Tx or *sqlx.Tx): %w", name, tx, contract.ErrUnsupported)
}
