package postgres

import (
	"context"
	"database/sql"
	"errors"
	"sync/atomic"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/internal/sqlq"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// querier is what pgxpool.Pool, pgx.Conn and pgx.Tx have in common.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// pgConn adapts a pgx querier to sqlq.Conn.
type pgConn struct{ q querier }

func (c pgConn) Exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	tag, err := c.q.Exec(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return result(tag.RowsAffected()), nil
}

func (c pgConn) Query(ctx context.Context, q string, args ...any) (sqlq.Rows, error) {
	r, err := c.q.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return rows{r}, nil
}

// rows adapts pgx.Rows to sqlq.Rows (pgx's Close returns nothing).
type rows struct{ pgx.Rows }

func (r rows) Close() error {
	r.Rows.Close()
	return r.Rows.Err()
}

// result adapts a command tag's row count to sql.Result.
type result int64

func (r result) RowsAffected() (int64, error) { return int64(r), nil }

func (result) LastInsertId() (int64, error) {
	return 0, errors.New("postgres: LastInsertId is not supported (use RETURNING)")
}

// poolDB adapts a pgxpool.Pool to sqlq.DB and fails every call after the
// store is closed.
type poolDB struct {
	pool   *pgxpool.Pool
	closed *atomic.Bool
}

func (d *poolDB) Exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if d.closed.Load() {
		return nil, contract.ErrClosed
	}
	return pgConn{d.pool}.Exec(ctx, q, args...)
}

func (d *poolDB) Query(ctx context.Context, q string, args ...any) (sqlq.Rows, error) {
	if d.closed.Load() {
		return nil, contract.ErrClosed
	}
	return pgConn{d.pool}.Query(ctx, q, args...)
}

// InTx runs fn in a read-committed transaction.
func (d *poolDB) InTx(ctx context.Context, fn func(sqlq.Conn) error) error {
	if d.closed.Load() {
		return contract.ErrClosed
	}
	return pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error { return fn(pgConn{tx}) })
}
