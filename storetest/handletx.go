package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
)

// HandleTxProof tells RunHandleTx how to reach the application tables of
// a SQL store's database through the transactions its contract.TxRunner
// opens.
type HandleTxProof struct {
	// Strategies to prove, each as subtest "strategy=<name>" (empty: one
	// run, strategy "").
	Strategies []contract.ClaimStrategy
	// New returns a fresh, migrated store implementing contract.TxRunner and
	// contract.TxCompleter; it registers its own cleanup.
	New func(t testing.TB, strategy contract.ClaimStrategy) contract.Store
	// ExecTx runs one statement in tx, a transaction of the store's
	// RunTx; queries name parameters with Param.
	ExecTx func(ctx context.Context, tx any, query string, args ...any) error
	// CountTx runs a query returning one integer in tx.
	CountTx func(ctx context.Context, tx any, query string, args ...any) (int64, error)
	// Param is the placeholder of parameter n (1-based): "$1" or "?".
	Param func(n int) string
	// SingleWriter is set for a database with one writer at a time
	// (SQLite): a rescue cannot run while a handler's transaction holds
	// the write lock, so the lease-lost proof rescues the job after its
	// claim and before its transaction begins instead of inside it.
	SingleWriter bool
}

// RunHandleTx proves core.HandleTx on a real database, once per strategy:
//
//   - retry-after-failure: a handler that inserts a row into an
//     application table and then fails on its first attempt leaves
//     exactly one row, the second attempt's, and the job completed;
//   - lease-lost-commits-nothing: a handler whose job is rescued while it
//     is inside its transaction (row inserted, completion not yet
//     written) commits nothing, and the job's next execution commits
//     its row once;
//   - continue-and-enqueue-commit-together: a handler that enqueues a
//     follow-up job with Client.EnqueueTx and returns a Continue commits
//     its row, the follow-up job and the next step together.
func RunHandleTx(t *testing.T, p HandleTxProof) {
	t.Helper()
	strategies := p.Strategies
	if len(strategies) == 0 {
		strategies = []contract.ClaimStrategy{""}
	}
	for _, strategy := range strategies {
		name := string(strategy)
		if name == "" {
			name = "default"
		}
		t.Run("strategy="+name, func(t *testing.T) {
			t.Run("retry-after-failure", func(t *testing.T) { p.retryAfterFailure(t, strategy) })
			t.Run("lease-lost-commits-nothing", func(t *testing.T) { p.leaseLost(t, strategy) })
			t.Run("continue-and-enqueue-commit-together", func(t *testing.T) { p.continueAndEnqueue(t, strategy) })
		})
	}
}

// TxEffectArgs are the args of the proofs' jobs.
type TxEffectArgs struct {
	Tag string `json:"tag"`
}

// Kind implements core.Args.
func (TxEffectArgs) Kind() string { return "storetest_tx_effect" }

// txFollowArgs are the args of the follow-up job of the Continue proof.
type txFollowArgs struct{}

func (txFollowArgs) Kind() string { return "storetest_tx_follow" }

// txProofEnv is one proof's store, application table and client.
type txProofEnv struct {
	t     *testing.T
	p     HandleTxProof
	ctx   context.Context
	s     contract.Store
	tr    contract.TxRunner
	table string
}

func (p HandleTxProof) env(t *testing.T, strategy contract.ClaimStrategy) *txProofEnv {
	t.Helper()
	s := p.New(t, strategy)
	tr, ok := s.(contract.TxRunner)
	if !ok {
		t.Fatalf("store %T does not implement contract.TxRunner", s)
	}
	e := &txProofEnv{t: t, p: p, ctx: t.Context(), s: s, tr: tr, table: fmt.Sprintf("htx_effects_%08x", rand.Uint32())}
	e.exec("CREATE TABLE " + e.table + " (job_id BIGINT NOT NULL, attempt INTEGER NOT NULL, tag VARCHAR(64) NOT NULL)")
	t.Cleanup(func() {
		_ = tr.RunTx(context.Background(), func(tx any) error {
			return p.ExecTx(context.Background(), tx, "DROP TABLE "+e.table)
		})
	})
	return e
}

// exec runs query in a transaction of its own.
func (e *txProofEnv) exec(query string, args ...any) {
	e.t.Helper()
	if err := e.tr.RunTx(e.ctx, func(tx any) error { return e.p.ExecTx(e.ctx, tx, query, args...) }); err != nil {
		e.t.Fatalf("%s: %v", query, err)
	}
}

// count runs a one-integer query in a transaction of its own.
func (e *txProofEnv) count(query string, args ...any) int64 {
	e.t.Helper()
	var n int64
	if err := e.tr.RunTx(e.ctx, func(tx any) (err error) { n, err = e.p.CountTx(e.ctx, tx, query, args...); return err }); err != nil {
		e.t.Fatalf("%s: %v", query, err)
	}
	return n
}

// insertEffect is the handler's own write: one row for job's attempt.
func (e *txProofEnv) insertEffect(ctx context.Context, tx any, job *core.TypedJob[TxEffectArgs]) error {
	return e.p.ExecTx(ctx, tx, fmt.Sprintf("INSERT INTO %s (job_id, attempt, tag) VALUES (%s, %s, %s)", e.table, e.p.Param(1), e.p.Param(2), e.p.Param(3)),
		job.ID, job.Attempt, job.Args.Tag)
}

// client starts a client on the proof's store running handlers; it is
// stopped at cleanup.
func (e *txProofEnv) client(handlers *core.Handlers, mw ...core.Middleware) *core.Client {
	e.t.Helper()
	c, err := core.NewClient(e.s, core.Config{
		Queues:            map[string]core.QueueConfig{contract.DefaultQueue: {MaxWorkers: 2}},
		Handlers:          handlers,
		PollInterval:      20 * time.Millisecond,
		LeaseDuration:     time.Minute,
		HeartbeatInterval: 20 * time.Second, // the fence, not the heartbeat, must find the lost lease
		Middleware:        mw,
		Retention:         &core.Retention{Completed: time.Hour},
	})
	if err != nil {
		e.t.Fatalf("NewClient: %v", err)
	}
	if err := c.Start(e.ctx); err != nil {
		e.t.Fatalf("Start: %v", err)
	}
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Stop(ctx)
	})
	return c
}

// enqueue enqueues one job of the proofs' kind.
func (e *txProofEnv) enqueue(c *core.Client, tag string) *contract.Job {
	e.t.Helper()
	r, err := c.Enqueue(e.ctx, TxEffectArgs{Tag: tag}, nil)
	if err != nil {
		e.t.Fatalf("Enqueue: %v", err)
	}
	return r.Job
}

// await waits up to 30 s for job id to reach state.
func (e *txProofEnv) await(id int64, state contract.State) *contract.Job {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		j, err := e.s.Get(e.ctx, id)
		if err == nil && j.State == state {
			return j
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("job %d did not reach %s in 30s: %+v, %v", id, state, j, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// expectRows fails unless the application table holds exactly want rows
// for job id, the last of them from attempt.
func (e *txProofEnv) expectRows(id int64, want int64, attempt int, why string) {
	e.t.Helper()
	q := fmt.Sprintf("SELECT COUNT(*) FROM %s WHERE job_id = %s", e.table, e.p.Param(1))
	if n := e.count(q, id); n != want {
		e.t.Fatalf("%s: the application table holds %d rows for job %d; want %d (exactly once)", why, n, id, want)
	}
	if want == 0 {
		return
	}
	q = fmt.Sprintf("SELECT COUNT(*) FROM %s WHERE job_id = %s AND attempt = %s", e.table, e.p.Param(1), e.p.Param(2))
	if n := e.count(q, id, attempt); n != want {
		e.t.Fatalf("%s: job %d's row is not from attempt %d", why, id, attempt)
	}
}

var errFirstAttempt = errors.New("storetest: the first attempt fails after its write")

func (p HandleTxProof) retryAfterFailure(t *testing.T, strategy contract.ClaimStrategy) {
	e := p.env(t, strategy)
	h := core.NewHandlers()
	core.HandleTx(h, func(ctx context.Context, tx any, job *core.TypedJob[TxEffectArgs]) error {
		if err := e.insertEffect(ctx, tx, job); err != nil {
			return err
		}
		if job.Attempt == 1 {
			return errFirstAttempt
		}
		return core.RecordResult(ctx, job.Attempt)
	}, core.WithRetry(core.DelayList{10 * time.Millisecond}))
	c := e.client(h)
	j := e.enqueue(c, "retry")
	got := e.await(j.ID, contract.StateCompleted)
	if got.Attempt != 2 || string(got.Result) != "2" || len(got.Errors) != 1 {
		t.Fatalf("job %d completed at attempt %d with result %q and %d error entries; want attempt 2, result 2 and the first attempt's error", j.ID, got.Attempt, got.Result, len(got.Errors))
	}
	e.expectRows(j.ID, 1, 2, "a handler that wrote and failed on attempt 1, then completed")
}

func (p HandleTxProof) leaseLost(t *testing.T, strategy contract.ClaimStrategy) {
	e := p.env(t, strategy)
	// rescue forces the running attempt's rescue, as another node's
	// maintenance does once the lease has run out.
	// Rescue skips a row another transaction holds locked for a moment
	// (SKIP LOCKED: the client's own heartbeat extending the lease, say),
	// as a maintenance round would and then try again; so does this.
	rescue := func(id int64) {
		deadline := time.Now().Add(5 * time.Second)
		for {
			now := time.Now().UTC()
			got, err := e.s.Rescue(context.WithoutCancel(e.ctx), now.Add(2*time.Hour), 100, func(j *contract.Job, lastSeen time.Time) contract.Outcome {
				return core.DecideRescue(j, core.CauseLeaseExpired, lastSeen, now)
			})
			if err == nil && len(got) == 0 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			if err != nil || len(got) != 1 || got[0].ID != id {
				t.Errorf("forced Rescue of job %d: %d jobs, %v", id, len(got), err)
			}
			return
		}
	}
	// The first attempt's end is recorded once it returns: with the
	// rescue before the transaction (single writer), the second attempt
	// may complete the job while the first still waits for its
	// transaction, so the test waits for both.
	var firstErr error
	firstEnded := make(chan struct{})
	var firstOnce sync.Once
	firstDone := func(err error) {
		firstOnce.Do(func() { firstErr = err; close(firstEnded) })
	}
	h := core.NewHandlers()
	core.HandleTx(h, func(ctx context.Context, tx any, job *core.TypedJob[TxEffectArgs]) error {
		if err := e.insertEffect(ctx, tx, job); err != nil {
			return err
		}
		if job.Attempt == 1 && !p.SingleWriter {
			rescue(job.ID) // the row is written, the completion is not
		}
		return nil
	})
	var mw []core.Middleware
	if p.SingleWriter {
		mw = append(mw, func(next core.HandlerFunc) core.HandlerFunc {
			return func(ctx context.Context, job *contract.Job) error {
				if job.Attempt == 1 {
					rescue(job.ID) // claimed, transaction not begun
				}
				err := next(ctx, job)
				if job.Attempt == 1 {
					firstDone(err)
				}
				return err
			}
		})
	} else {
		mw = append(mw, func(next core.HandlerFunc) core.HandlerFunc {
			return func(ctx context.Context, job *contract.Job) error {
				err := next(ctx, job)
				if job.Attempt == 1 {
					firstDone(err)
				}
				return err
			}
		})
	}
	c := e.client(h, mw...)
	j := e.enqueue(c, "lease")
	got := e.await(j.ID, contract.StateCompleted)
	if got.Attempt != 2 {
		t.Fatalf("job %d completed at attempt %d; want 2 (the rescued attempt 1 must not complete it)", j.ID, got.Attempt)
	}
	select {
	case <-firstEnded:
	case <-time.After(30 * time.Second):
		t.Fatalf("job %d completed, but its rescued first attempt has not returned after 30 s", j.ID)
	}
	if !errors.Is(firstErr, contract.ErrLeaseLost) {
		t.Fatalf("the rescued attempt ended with %v; want an error wrapping core.ErrLeaseLost", firstErr)
	}
	e.expectRows(j.ID, 1, 2, "a handler whose lease was lost inside its transaction, then a second execution")
}

func (p HandleTxProof) continueAndEnqueue(t *testing.T, strategy contract.ClaimStrategy) {
	e := p.env(t, strategy)
	var client atomic.Pointer[core.Client]
	var follow, rolledBack atomic.Int64
	h := core.NewHandlers()
	core.HandleTx(h, func(ctx context.Context, tx any, job *core.TypedJob[TxEffectArgs]) error {
		if err := e.insertEffect(ctx, tx, job); err != nil {
			return err
		}
		if job.Args.Tag == "next" {
			return nil
		}
		res, err := client.Load().EnqueueTx(ctx, tx, []contract.InsertParams{{Kind: txFollowArgs{}.Kind(), Args: []byte(`{}`), RunAt: time.Now().Add(time.Hour)}})
		if err != nil {
			return err
		}
		follow.Store(res[0].Job.ID)
		if job.Attempt == 1 {
			rolledBack.Store(res[0].Job.ID)
			return errFirstAttempt // the follow-up job and the row roll back
		}
		return core.ContinueWith(TxEffectArgs{Tag: "next"}, time.Time{})
	}, core.WithRetry(core.DelayList{10 * time.Millisecond}))
	h.Declare(txFollowArgs{}.Kind())
	c := e.client(h)
	client.Store(c)
	j := e.enqueue(c, "first")
	got := e.await(j.ID, contract.StateCompleted)
	if got.Kind != (TxEffectArgs{}).Kind() || got.Attempt < 1 {
		t.Fatalf("job %d: %+v", j.ID, got)
	}
	q := fmt.Sprintf("SELECT COUNT(*) FROM %s WHERE job_id = %s", e.table, e.p.Param(1))
	// attempt 1 rolled back; attempt 2 continued (one row); the next step
	// completed (one row of its own attempt).
	if n := e.count(q, j.ID); n != 2 {
		t.Fatalf("the application table holds %d rows for job %d; want 2 (the continued attempt's and the next step's)", n, j.ID)
	}
	f := e.await(follow.Load(), contract.StateScheduled)
	if f.Kind != (txFollowArgs{}).Kind() {
		t.Fatalf("follow-up job %d has kind %q", f.ID, f.Kind)
	}
	if rolledBack.Load() == 0 {
		t.Fatalf("the first attempt enqueued no follow-up job")
	}
	// The failed attempt's follow-up rolled back (SQLite may give its id
	// to the next one): one follow-up job in all.
	if fs, err := e.s.List(e.ctx, contract.ListParams{Kind: txFollowArgs{}.Kind(), Limit: 10}); err != nil || len(fs) != 1 || fs[0].ID != f.ID {
		t.Fatalf("follow-up jobs: %d, %v; want only job %d (the one the failed attempt enqueued rolled back)", len(fs), err, f.ID)
	}
	n := e.count(fmt.Sprintf("SELECT COUNT(*) FROM %s", e.table))
	if n != 2 {
		t.Fatalf("the application table holds %d rows; want 2", n)
	}
}
