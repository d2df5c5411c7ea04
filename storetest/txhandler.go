package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

// txRunTests are the rules of contract.TxRunner, the capability behind
// core.HandleTx: the handler's writes (here a job inserted with InsertTx)
// and the fenced completion commit together or not at all.
var txRunTests = []test{
	{"tx/run-commits-writes-with-completion", testTxRunCommit},
	{"tx/run-rolls-back-on-error", testTxRunRollback},
	{"tx/run-rolls-back-on-panic", testTxRunPanic},
	{"tx/run-lease-lost-commits-nothing", testTxRunLeaseLost},
	{"tx/run-writes-continue-and-delete", testTxRunContinueDelete},
}

// txRunner returns the store's TxRunner with the TxInserter and
// TxCompleter its transactions serve, skipping when it has no TxRunner
// and failing when it lacks the other two (HandleTx needs TxCompleter;
// the rules write through InsertTx).
func (e *env) txRunner() (contract.TxRunner, contract.TxInserter, contract.TxCompleter) {
	e.Helper()
	tr, ok := e.s.(contract.TxRunner)
	if !ok {
		e.Skip("the store does not implement contract.TxRunner")
	}
	ti, ok1 := e.s.(contract.TxInserter)
	tc, ok2 := e.s.(contract.TxCompleter)
	if !ok1 || !ok2 {
		e.Fatalf("the store implements contract.TxRunner but not contract.TxInserter (%v) and contract.TxCompleter (%v): HandleTx writes the completion with CompleteTx in RunTx's transaction, and the rules write with InsertTx", ok1, ok2)
	}
	return tr, ti, tc
}

// runTxWork runs, in one RunTx transaction, what a transactional handler
// of claimed job j does: a write of its own (a job of kind "effect"
// inserted with InsertTx), then j's fenced completion o; then after
// returns what fn returns. It returns RunTx's error and the effect's id
// (0 when the insert did not happen).
func (e *env) runTxWork(j *contract.Job, o contract.Outcome, after func() error) (effect int64, err error) {
	e.Helper()
	tr, ti, tc := e.txRunner()
	err = tr.RunTx(e.ctx, func(tx any) error {
		res, err := ti.InsertTx(e.ctx, tx, e.now, []contract.InsertParams{e.job("effects", "effect")})
		if err != nil {
			return fmt.Errorf("InsertTx in RunTx's transaction: %w", err)
		}
		if len(res) == 1 && res[0].Job != nil {
			effect = res[0].Job.ID
		}
		if err := tc.CompleteTx(e.ctx, tx, o); err != nil {
			return err
		}
		if after != nil {
			return after()
		}
		return nil
	})
	return effect, err
}

// expectNoEffect fails when the job inserted in a rolled-back RunTx
// exists.
func (e *env) expectNoEffect(id int64, why string) {
	e.Helper()
	if id == 0 {
		return
	}
	if got, err := e.s.Get(e.ctx, id); !errors.Is(err, contract.ErrNotFound) {
		e.Fatalf("job %d inserted in RunTx's transaction after %s: Get returned (%+v, %s); want ErrNotFound (the transaction must roll back)", id, why, got, errMsg(err))
	}
}

func testTxRunCommit(e *env) {
	j := e.claimJob(e.job("q", "k"), "w")
	e.advance(time.Second)
	o := e.outcome(j, contract.OutcomeComplete)
	o.Result = []byte(`"done"`)
	effect, err := e.runTxWork(j, o, nil)
	if err != nil {
		e.Fatalf("RunTx whose fn inserted a job and completed running job %d: unexpected error: %v", j.ID, err)
	}
	if effect == 0 {
		e.Fatalf("InsertTx in RunTx's transaction returned no job")
	}
	got := e.expectState(j.ID, contract.StateCompleted, "RunTx committed its completion")
	if string(got.Result) != `"done"` || !got.FinishedAt.Equal(e.now) {
		e.Fatalf("job completed in RunTx has Result %q, FinishedAt %s; want %q, %s", got.Result, ts(got.FinishedAt), `"done"`, ts(e.now))
	}
	if eff := e.get(effect); eff.Kind != "effect" {
		e.Fatalf("job %d inserted in RunTx's committed transaction has kind %q; want \"effect\"", effect, eff.Kind)
	}
}

var errTxRunFailed = errors.New("storetest: the handler failed")

func testTxRunRollback(e *env) {
	j := e.claimJob(e.job("q", "k"), "w")
	before := e.get(j.ID)
	effect, err := e.runTxWork(j, e.outcome(j, contract.OutcomeComplete), func() error { return errTxRunFailed })
	if !errors.Is(err, errTxRunFailed) {
		e.Fatalf("RunTx whose fn returned an error returned %s; want fn's error", errMsg(err))
	}
	e.expectNoEffect(effect, "fn returned an error")
	e.expectUnchanged(before, "a completion whose RunTx fn returned an error")
	e.apply(e.outcome(j, contract.OutcomeComplete)) // still held: a normal finish works
}

func testTxRunPanic(e *env) {
	j := e.claimJob(e.job("q", "k"), "w")
	before := e.get(j.ID)
	var effect int64
	recovered := func() (r any) {
		defer func() { r = recover() }()
		effect, _ = e.runTxWork(j, e.outcome(j, contract.OutcomeComplete), func() error { panic("storetest: handler panic") })
		return nil
	}()
	if recovered == nil {
		e.Fatalf("RunTx whose fn panicked returned; want the panic to go on after the rollback")
	}
	e.expectUnchanged(before, "a completion whose RunTx fn panicked")
	e.expectNoEffect(effect, "fn panicked")
	e.apply(e.outcome(j, contract.OutcomeComplete))
}

func testTxRunLeaseLost(e *env) {
	j := e.claimJob(e.job("q", "k"), "w")
	e.advance(lease + time.Second)
	if got := e.rescue(10); len(got) != 1 || got[0].ID != j.ID {
		e.Fatalf("Rescue past job %d's lease returned %v; want that job", j.ID, ids(got))
	}
	before := e.get(j.ID)
	effect, err := e.runTxWork(j, e.outcome(j, contract.OutcomeComplete), nil)
	if !errors.Is(err, contract.ErrLeaseLost) {
		e.Fatalf("RunTx completing job %d after it was rescued returned %s; want CompleteTx's error wrapping core.ErrLeaseLost", j.ID, errMsg(err))
	}
	e.expectNoEffect(effect, "the completion in it lost its lease")
	e.expectUnchanged(before, "a RunTx whose completion lost its lease")
}

// testTxRunContinueDelete: besides a plain completion, HandleTx writes in
// its transaction a completion that deletes the job (completed jobs not
// kept) and a Continue to the next step; CompleteTx applies both as
// Finish does, in RunTx's transaction.
func testTxRunContinueDelete(e *env) {
	j := e.claimJob(e.job("q", "k"), "w")
	o := e.outcome(j, contract.OutcomeComplete)
	o.Delete = true
	if _, err := e.runTxWork(j, o, nil); err != nil {
		e.Fatalf("RunTx completing job %d with Delete: unexpected error: %v", j.ID, err)
	}
	if got, err := e.s.Get(e.ctx, j.ID); !errors.Is(err, contract.ErrNotFound) {
		e.Fatalf("job %d completed with Delete in RunTx: Get returned (%+v, %s); want ErrNotFound", j.ID, got, errMsg(err))
	}

	j = e.claimJob(e.job("q", "step-1"), "w")
	e.advance(time.Second)
	o = e.outcome(j, contract.OutcomeContinue)
	o.NextKind = "step-2"
	o.NextArgs = json.RawMessage(`{"step":2}`)
	o.RunAt = e.now.Add(time.Minute)
	if _, err := e.runTxWork(j, o, nil); err != nil {
		e.Fatalf("RunTx continuing job %d: unexpected error: %v", j.ID, err)
	}
	got := e.get(j.ID)
	if got.State != contract.StateScheduled || got.Kind != "step-2" || diffJSON(got.Args, o.NextArgs) != "" || !got.RunAt.Equal(o.RunAt) || got.Attempt != 0 {
		e.Fatalf("job %d continued in RunTx has state %q, kind %q, args %s, run_at %s, attempt %d; want scheduled, \"step-2\", {\"step\":2}, %s, 0", j.ID, got.State, got.Kind, got.Args, ts(got.RunAt), got.Attempt, ts(o.RunAt))
	}
}
