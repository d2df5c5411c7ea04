package core_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/memory"
	"github.com/backlogq/backlog/store/sqlite"
)

// txArgs are the args of the HandleTx tests' jobs.
type txArgs struct{}

func (txArgs) Kind() string { return "tx_effect" }

// TestHandleTxNeedsTxRunner: a client with a HandleTx kind on a store
// without contract.TxRunner (the memory store) is refused with an error
// wrapping ErrUnsupported that names the kind.
func TestHandleTxNeedsTxRunner(t *testing.T) {
	h := core.NewHandlers()
	core.HandleTx(h, func(context.Context, any, *core.TypedJob[txArgs]) error { return nil })
	_, err := core.NewClient(memory.New(), core.Config{Handlers: h})
	if !errors.Is(err, core.ErrUnsupported) || !strings.Contains(err.Error(), `"tx_effect"`) || !strings.Contains(err.Error(), "TxRunner") {
		t.Fatalf("NewClient with a HandleTx kind on the memory store returned %v; want an error wrapping ErrUnsupported naming the kind and contract.TxRunner", err)
	}
}

// TestHandleTxPanicRollsBackAndDeleteCommits: a transactional handler
// that panics after its write on attempt 1 leaves nothing, and the
// completion of attempt 2 is the deletion of the job (completed jobs not
// kept), committed with its write.
func TestHandleTxPanicRollsBackAndDeleteCommits(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "jobs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.DB().Exec("CREATE TABLE effects (job_id INTEGER, attempt INTEGER)"); err != nil {
		t.Fatal(err)
	}
	h := core.NewHandlers()
	core.HandleTx(h, func(ctx context.Context, tx any, j *core.TypedJob[txArgs]) error {
		if _, err := tx.(*sql.Tx).ExecContext(ctx, "INSERT INTO effects VALUES (?, ?)", j.ID, j.Attempt); err != nil {
			return err
		}
		if j.Attempt == 1 {
			panic("after the write")
		}
		return nil
	}, core.WithRetry(core.DelayList{time.Millisecond}))
	c, err := core.NewClient(st, core.Config{Handlers: h, Queues: map[string]core.QueueConfig{core.DefaultQueue: {MaxWorkers: 1}}, PollInterval: 10 * time.Millisecond, Retention: &core.Retention{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer c.Stop(context.Background())
	r, err := c.Enqueue(t.Context(), txArgs{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := st.Get(t.Context(), r.Job.ID)
		if errors.Is(err, core.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %d was not deleted on completion: %v", r.Job.ID, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	var n, attempt int
	if err := st.DB().QueryRow("SELECT COUNT(*), MAX(attempt) FROM effects").Scan(&n, &attempt); err != nil {
		t.Fatal(err)
	}
	if n != 1 || attempt != 2 {
		t.Fatalf("effects: %d rows, last attempt %d; want 1 row from attempt 2 (the panicking attempt 1 rolls back)", n, attempt)
	}
}

// TestHandleTxReportsItsOutcome: a job completed in its handler's
// transaction is reported as completed (EventJobCompleted, with its
// duration), as every completed job is, and not as a lost lease, though
// the engine's own fenced write after the commit changes nothing.
func TestHandleTxReportsItsOutcome(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "jobs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	events := make(chan core.Event, 100)
	h := core.NewHandlers()
	core.HandleTx(h, func(ctx context.Context, tx any, j *core.TypedJob[txArgs]) error { return nil })
	c, err := core.NewClient(st, core.Config{
		Handlers: h, Queues: map[string]core.QueueConfig{core.DefaultQueue: {MaxWorkers: 1}}, PollInterval: 10 * time.Millisecond,
		Observers: []core.Observer{core.ObserverFunc(func(e core.Event) {
			if e.Kind == core.EventJobCompleted || e.Kind == core.EventLeaseLost {
				events <- e
			}
		})},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer c.Stop(context.Background())
	r, err := c.Enqueue(t.Context(), txArgs{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-events:
		if e.Kind != core.EventJobCompleted || e.Job == nil || e.Job.ID != r.Job.ID || e.Duration <= 0 {
			t.Fatalf("event %s for job %v (duration %s); want %s for job %d with its duration", e.Kind, e.Job, e.Duration, core.EventJobCompleted, r.Job.ID)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s event for job %d completed in its handler's transaction", core.EventJobCompleted, r.Job.ID)
	}
}

// txRunnerStore runs HandleTx transactions without a database: RunTx
// calls fn with a nil transaction, and CompleteTx records what the
// engine writes in it instead of applying it.
type txRunnerStore struct {
	contract.Store
	got chan contract.Outcome
}

func (s *txRunnerStore) RunTx(ctx context.Context, fn func(tx any) error) error { return fn(nil) }

func (s *txRunnerStore) CompleteTx(ctx context.Context, tx any, o contract.Outcome) error {
	s.got <- o
	return nil
}

// TestHandleTxSealsResult: with Config.Encryption sealing results, the
// result a HandleTx handler records is sealed in the outcome written in
// its transaction, once (it opens to what the handler recorded).
func TestHandleTxSealsResult(t *testing.T) {
	st := &txRunnerStore{Store: memory.New(), got: make(chan contract.Outcome, 1)}
	h := core.NewHandlers()
	core.HandleTx(h, func(ctx context.Context, tx any, j *core.TypedJob[txArgs]) error {
		return core.RecordRawResult(ctx, []byte(`"`+secretText+`"`))
	})
	k := mustKeyring(t, "k1", map[string][]byte{"k1": testKey(1)})
	w := encClient(t, st, h, &core.Encryption{Keys: k, Results: true})
	if _, err := w.Enqueue(context.Background(), txArgs{}, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case o := <-st.got:
		if o.Kind != contract.OutcomeComplete || bytes.Contains(o.Result, []byte(secretText)) || !contract.IsSealed(o.Result) {
			t.Fatalf("outcome written in the transaction: kind %s, result %s; want a completion with a sealed result", o.Kind, o.Result)
		}
		if res, err := k.OpenResult(txArgs{}.Kind(), o.Result); err != nil || string(res) != `"`+secretText+`"` {
			t.Fatalf("opened %s, %v", res, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no outcome written in the handler's transaction")
	}
}
