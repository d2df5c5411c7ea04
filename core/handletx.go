package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/backlogq/backlog/core/contract"
)

// TxHandlerFunc runs one attempt of a job of kind T inside tx, the
// transaction HandleTx opened on the store's database (pgx.Tx for
// PostgreSQL, *sql.Tx for SQLite and MySQL/MariaDB; to use sqlx, wrap it
// as &sqlx.Tx{Tx: tx.(*sql.Tx), Mapper: db.Mapper} with db the
// application's *sqlx.DB: its driver name unset, sqlx keeps '?'
// placeholders, the form of both). Its return decides the outcome as for
// Handle, and whether tx commits (see HandleTx).
type TxHandlerFunc[T Args] func(ctx context.Context, tx any, job *TypedJob[T]) error

// HandleTx registers fn for T's kind as a transactional handler: for each
// attempt the engine begins a transaction on the store's own database
// (contract.TxRunner), calls fn with it and, when fn returns nil or a
// Continue, writes the job's outcome (its completion with the result that
// RecordResult recorded, its deletion when completed jobs are not kept, or
// its Continue to the next step) in the same transaction, fenced by the
// attempt's worker and claim sequence, and commits once. The handler's
// writes and the job's outcome so commit together or not at all:
//
//   - fn returns any other error (Snooze, Cancel and Permanent included)
//     or panics: the transaction rolls back and the engine writes that
//     outcome through its normal path, so the job follows its kind's
//     retry policy;
//   - the lease was lost (the job was rescued and maybe runs elsewhere,
//     or was cancelled or deleted): the fenced write changes no row, the
//     transaction rolls back, and the attempt ends with an error wrapping
//     ErrLeaseLost;
//   - the commit fails: the attempt fails with the commit's error and is
//     retried; a commit that applied all the same leaves the job finished
//     (the retry's write fails its fence).
//
// The transaction runs at the store's isolation level: READ COMMITTED on
// PostgreSQL (the server's default) and on MySQL/MariaDB (the level the
// store's own statements use), SERIALIZABLE on SQLite; a PostgreSQL handler may raise it with SET TRANSACTION as
// its first statement. ctx carries the kind's timeout and the job's
// deadline: when either passes, the database statements fail and the
// transaction rolls back. Jobs enqueued through Client.EnqueueTx(ctx, tx,
// …) commit with the handler's writes (follow-up jobs exist exactly when
// the attempt completed). On SQLite the transaction holds the database's
// single write lock while fn runs, so other writers (this node's claims
// and heartbeats included) wait for it: keep handlers short there.
//
// fn must not commit or roll back tx, call CompleteTx, keep tx after it
// returns, or use it from goroutines that outlive it; nor, on SQLite,
// write through the store outside tx (the write waits on tx's lock).
// Args are decoded as for Handle. It panics when T's kind already has a
// handler; NewClient returns an error wrapping ErrUnsupported when the
// store lacks TxRunner or TxCompleter.
func HandleTx[T Args](h *Handlers, fn TxHandlerFunc[T], opts ...KindOption) {
	var zero T
	kind := zero.Kind()
	h.HandleRaw(kind, func(ctx context.Context, job *Job) error {
		var args T
		if err := json.Unmarshal(job.Args, &args); err != nil {
			return Permanent(fmt.Errorf("decode %s args: %w", job.Kind, err))
		}
		return runTx(ctx, func(ctx context.Context, tx any) error {
			return fn(ctx, tx, &TypedJob[T]{Job: job, Args: args})
		})
	}, opts...)
	h.mu.Lock()
	h.m[kind].tx = true
	h.mu.Unlock()
}

// errNoTxStore is the error of a transactional handler on a store that
// cannot run it.
var errNoTxStore = fmt.Errorf("%w: transactional handlers (HandleTx) need a store with contract.TxRunner and contract.TxCompleter (PostgreSQL, MySQL/MariaDB, SQLite; not the memory store)", ErrUnsupported)

// txStore returns s's TxRunner and TxCompleter, or errNoTxStore.
func txStore(s contract.Store) (contract.TxRunner, contract.TxCompleter, error) {
	if sc, ok := s.(sealingTxCompleter); ok {
		s = sc.Store
	}
	tr, ok1 := s.(contract.TxRunner)
	tc, ok2 := s.(contract.TxCompleter)
	if !ok1 || !ok2 {
		return nil, nil, errNoTxStore
	}
	return tr, tc, nil
}

// checkTxHandlers refuses transactional handlers on a store without the
// capability; NewClient calls it.
func checkTxHandlers(s contract.Store, h *Handlers) error {
	if h == nil {
		return nil
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	for kind, e := range h.m {
		if e.tx {
			if _, _, err := txStore(s); err != nil {
				return fmt.Errorf("backlog: kind %q: %w", kind, err)
			}
		}
	}
	return nil
}

// runTx runs fn in a transaction of the attempt in ctx and writes the
// attempt's outcome in it when fn returns nil or a Continue (see
// HandleTx).
func runTx(ctx context.Context, fn func(ctx context.Context, tx any) error) error {
	st := execFrom(ctx)
	if st == nil || st.client == nil {
		return errors.New("backlog: transactional handler called outside the engine")
	}
	tr, tc, err := txStore(st.store)
	if err != nil {
		return err // NewClient refuses these; a store swapped under it is not retried forever
	}
	var herr error
	err = tr.RunTx(ctx, func(tx any) error {
		herr = CallSafely(func() error { return fn(ctx, tx) })
		if k := Classify(ctx, herr).Kind; k != contract.OutcomeComplete && k != contract.OutcomeContinue {
			return herr
		}
		po := st.client.decide(ctx, st.job, herr, st)
		if po.o.Kind != contract.OutcomeComplete && po.o.Kind != contract.OutcomeContinue {
			return herr // an invalid Continue: the engine decides it again
		}
		st.client.cfg.Encryption.SealOutcome(&po.o, st.job.Kind)
		if err := tc.CompleteTx(ctx, tx, po.o); err != nil {
			if errors.Is(err, ErrLeaseLost) {
				return fmt.Errorf("backlog: transaction rolled back: %w", err)
			}
			return fmt.Errorf("backlog: write the outcome in the transaction: %w", err)
		}
		return nil
	})
	if err != nil {
		if herr != nil && errors.Is(err, herr) {
			return herr
		}
		// The heartbeat cancels ctx when it finds the lease lost: a
		// statement that failed on that cancellation names its cause.
		if cause := context.Cause(ctx); ctx.Err() != nil && errors.Is(cause, ErrLeaseLost) && !errors.Is(err, ErrLeaseLost) {
			return fmt.Errorf("%w (%w)", err, cause)
		}
		return err
	}
	st.mu.Lock()
	st.completedTx, st.committedTx = true, true
	st.mu.Unlock()
	return herr // nil, or the Continue the engine's own (fenced-out) write repeats
}
