package postgres

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/core/storekit"
	"github.com/backlogq/backlog/store/internal/sqlq"
	"github.com/jackc/pgx/v5"
)

// txQuerier accepts the transaction types InsertTx and CompleteTx support.
func txQuerier(tx any) (sqlq.Conn, error) {
	switch t := tx.(type) {
	case pgx.Tx:
		if t != nil {
			return pgConn{t}, nil
		}
	case *sql.Tx:
		if t != nil {
			return sqlq.StdConn{X: t}, nil
		}
	}
	return nil, fmt.Errorf("postgres: transaction of type %T (want pgx.Tx, or *sql.Tx of pgx's stdlib driver): %w", tx, contract.ErrUnsupported)
}

// InsertTx inserts jobs inside the caller's transaction (a pgx.Tx from
// Pool().Begin or any pgx connection to the same database, or a *sql.Tx of
// pgx's stdlib driver); they become
// visible when it commits, and the insert notifications are sent then too,
// so a rolled-back insert wakes nobody. Other transaction types return an
// error wrapping core.ErrUnsupported. Semantics otherwise match Insert; no
// transient error is retried (the caller owns the transaction).
func (s *Store) InsertTx(ctx context.Context, tx any, now time.Time, jobs []contract.InsertParams) ([]contract.InsertResult, error) {
	q, err := txQuerier(tx)
	if err != nil {
		return nil, err
	}
	if s.closed.Load() {
		return nil, contract.ErrClosed
	}
	if len(jobs) == 0 {
		return []contract.InsertResult{}, nil
	}
	if usesDependencies(jobs) {
		if err := storekit.CheckDependencies(jobs); err != nil {
			return nil, fmt.Errorf("postgres: %w", err)
		}
		return s.insertWithDependencies(ctx, q, now, jobs)
	}
	return s.insertOn(ctx, q, now, jobs)
}

// CompleteTx applies one fenced outcome inside the caller's transaction (a
// pgx.Tx, or a *sql.Tx of pgx's stdlib driver), so the handler's own writes and the job's completion commit
// together or not at all. It returns an error wrapping core.ErrLeaseLost
// when the fence fails (the job is no longer running under o.WorkerID at
// o.Attempt), and core.ErrUnsupported for other transaction types.
func (s *Store) CompleteTx(ctx context.Context, tx any, o contract.Outcome) error {
	q, err := txQuerier(tx)
	if err != nil {
		return err
	}
	if s.closed.Load() {
		return contract.ErrClosed
	}
	outcomes := []contract.Outcome{o}
	rounds, err := finishRounds(outcomes)
	if err != nil {
		return err
	}
	res, err := s.finishOn(ctx, q, outcomes, rounds)
	if err != nil {
		return err
	}
	if !res[0].Applied {
		return fmt.Errorf("job %d attempt %d worker %s: %w", o.JobID, o.Attempt, o.WorkerID, contract.ErrLeaseLost)
	}
	return nil
}
