package storetest

import (
	"errors"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

var txTests = []test{
	{"tx/insert-is-visible-after-commit", testTxInsertCommit},
	{"tx/insert-is-gone-after-rollback", testTxInsertRollback},
	{"tx/insert-enforces-unique-keys", testTxInsertUnique},
	{"tx/insert-rejects-unsupported-tx-type", testTxInsertUnsupported},
	{"tx/complete-applies-on-commit", testTxCompleteCommit},
	{"tx/complete-is-undone-by-rollback", testTxCompleteRollback},
	{"tx/complete-with-stale-fence-returns-lease-lost", testTxCompleteStale},
	{"tx/complete-rejects-unsupported-tx-type", testTxCompleteUnsupported},
}

// unsupportedTx is a transaction type no store accepts.
type unsupportedTx struct{}

// txInserter returns the store's TxInserter, skipping when it has none and
// failing when Factory.BeginTx is missing.
func (e *env) txInserter() contract.TxInserter {
	e.Helper()
	ti, ok := e.s.(contract.TxInserter)
	if !ok {
		e.Skip("the store does not implement contract.TxInserter")
	}
	if e.f.BeginTx == nil {
		e.Fatal("the store implements contract.TxInserter but Factory.BeginTx is nil: set BeginTx to open a transaction of the type InsertTx accepts, so the suite can prove commit and rollback")
	}
	return ti
}

// txCompleter is txInserter's counterpart for contract.TxCompleter.
func (e *env) txCompleter() contract.TxCompleter {
	e.Helper()
	tc, ok := e.s.(contract.TxCompleter)
	if !ok {
		e.Skip("the store does not implement contract.TxCompleter")
	}
	if e.f.BeginTx == nil {
		e.Fatal("the store implements contract.TxCompleter but Factory.BeginTx is nil: set BeginTx to open a transaction of the type CompleteTx accepts, so the suite can prove commit and rollback")
	}
	return tc
}

// begin opens a transaction through the factory.
func (e *env) begin() (tx any, commit, rollback func() error) {
	e.Helper()
	tx, commit, rollback = e.f.BeginTx(e.T, e.s)
	if tx == nil || commit == nil || rollback == nil {
		e.Fatal("Factory.BeginTx returned a nil transaction, commit or rollback func")
	}
	return tx, commit, rollback
}

// insertTx inserts inside tx and checks the shape of the answer.
func (e *env) insertTx(ti contract.TxInserter, tx any, ps ...contract.InsertParams) []contract.InsertResult {
	e.Helper()
	res, err := ti.InsertTx(e.ctx, tx, e.now, ps)
	if err != nil {
		e.Fatalf("InsertTx of %d job(s): unexpected error: %v", len(ps), err)
	}
	if len(res) != len(ps) {
		e.Fatalf("InsertTx of %d job(s) returned %d results; want one per input", len(ps), len(res))
	}
	return res
}

func testTxInsertCommit(e *env) {
	ti := e.txInserter()
	tx, commit, _ := e.begin()
	res := e.insertTx(ti, tx, e.job("q", "in-tx"))
	if res[0].Job == nil || res[0].Duplicate || res[0].Job.State != contract.StateAvailable {
		e.Fatalf("InsertTx returned %+v; want a new available job", res[0])
	}
	if err := commit(); err != nil {
		e.Fatalf("commit: %v", err)
	}
	got := e.get(res[0].Job.ID)
	if got.Kind != "in-tx" {
		e.Fatalf("job %d inserted in a committed transaction has kind %q; want \"in-tx\"", got.ID, got.Kind)
	}
	if j := e.claimOne("q", "w"); j.ID != got.ID {
		e.Fatalf("claim returned job %d; want the committed job %d", j.ID, got.ID)
	}
}

func testTxInsertRollback(e *env) {
	ti := e.txInserter()
	tx, _, rollback := e.begin()
	res := e.insertTx(ti, tx, e.job("q", "in-tx"), e.job("q", "in-tx"))
	if err := rollback(); err != nil {
		e.Fatalf("rollback: %v", err)
	}
	for _, r := range res {
		if r.Job == nil {
			continue
		}
		if got, err := e.s.Get(e.ctx, r.Job.ID); !errors.Is(err, contract.ErrNotFound) {
			e.Errorf("job %d inserted in a rolled-back transaction: Get returned (%+v, %s); want ErrNotFound (it must vanish on rollback)", r.Job.ID, got, errMsg(err))
		}
	}
	if got := e.claim("q", "w", 10); len(got) != 0 {
		e.Fatalf("claim after rollback returned %v; the rolled-back jobs must never be claimed", ids(got))
	}
}

func testTxInsertUnique(e *env) {
	ti := e.txInserter()
	committed := e.insertOne(uniqueJob(e, "outside", "k"))
	tx, commit, _ := e.begin()
	res := e.insertTx(ti, tx, uniqueJob(e, "outside", "k"), uniqueJob(e, "inside", "k"), uniqueJob(e, "inside", "k"))
	if !res[0].Duplicate || res[0].Job == nil || res[0].Job.ID != committed.ID {
		e.Errorf("InsertTx of unique key \"outside\", held by committed job %d, returned %+v; want that job with Duplicate=true", committed.ID, res[0])
	}
	if res[1].Duplicate || !res[2].Duplicate {
		e.Errorf("InsertTx of unique key \"inside\" twice in one batch returned Duplicate %v, %v; want false, true", res[1].Duplicate, res[2].Duplicate)
	}
	if err := commit(); err != nil {
		e.Fatalf("commit: %v", err)
	}
	if r := e.insertResults(uniqueJob(e, "inside", "k")); !r[0].Duplicate {
		e.Errorf("Insert of unique key \"inside\" after the transaction that inserted it committed was not a duplicate")
	}
}

func testTxInsertUnsupported(e *env) {
	ti := e.txInserter()
	_, err := ti.InsertTx(e.ctx, unsupportedTx{}, e.now, []contract.InsertParams{e.job("q", "k")})
	if !errors.Is(err, contract.ErrUnsupported) {
		e.Fatalf("InsertTx with a transaction of type storetest.unsupportedTx returned error %s; want one wrapping core.ErrUnsupported", errMsg(err))
	}
	if got := e.claim("q", "w", 10); len(got) != 0 {
		e.Fatalf("InsertTx with an unsupported transaction type inserted jobs %v anyway", ids(got))
	}
}

func testTxCompleteCommit(e *env) {
	tc := e.txCompleter()
	j := e.claimJob(e.job("q", "k"), "w")
	e.advance(time.Second)
	tx, commit, _ := e.begin()
	o := e.outcome(j, contract.OutcomeComplete)
	o.Result = []byte(`"done"`)
	if err := tc.CompleteTx(e.ctx, tx, o); err != nil {
		e.Fatalf("CompleteTx of running job %d by its holder: unexpected error: %v", j.ID, err)
	}
	if err := commit(); err != nil {
		e.Fatalf("commit: %v", err)
	}
	got := e.expectState(j.ID, contract.StateCompleted, "its completion was committed with the caller's transaction")
	if !got.FinishedAt.Equal(e.now) || string(got.Result) != `"done"` || !got.LeaseUntil.IsZero() {
		e.Fatalf("job completed in a transaction has FinishedAt %s, Result %q, LeaseUntil %s; want %s, %q, zero", ts(got.FinishedAt), got.Result, ts(got.LeaseUntil), ts(e.now), `"done"`)
	}
}

func testTxCompleteRollback(e *env) {
	tc := e.txCompleter()
	j := e.claimJob(e.job("q", "k"), "w")
	before := e.get(j.ID)
	tx, _, rollback := e.begin()
	if err := tc.CompleteTx(e.ctx, tx, e.outcome(j, contract.OutcomeComplete)); err != nil {
		e.Fatalf("CompleteTx: unexpected error: %v", err)
	}
	if err := rollback(); err != nil {
		e.Fatalf("rollback: %v", err)
	}
	e.expectUnchanged(before, "a completion whose transaction rolled back")
	e.apply(e.outcome(j, contract.OutcomeComplete)) // still held: a normal finish works
}

func testTxCompleteStale(e *env) {
	tc := e.txCompleter()
	j := e.claimJob(e.job("q", "k"), "w")
	before := e.get(j.ID)
	for _, o := range []contract.Outcome{
		func() contract.Outcome { o := e.outcome(j, contract.OutcomeComplete); o.WorkerID = "other"; return o }(),
		func() contract.Outcome {
			o := e.outcome(j, contract.OutcomeComplete)
			o.ClaimSeq = j.ClaimSeq + 1
			return o
		}(),
	} {
		tx, commit, rollback := e.begin()
		err := tc.CompleteTx(e.ctx, tx, o)
		if !errors.Is(err, contract.ErrLeaseLost) {
			rollback()
			e.Fatalf("CompleteTx of job %d by worker %q at claim_seq %d (held by %q at claim_seq %d) returned %s; want an error wrapping core.ErrLeaseLost", j.ID, o.WorkerID, o.ClaimSeq, j.WorkerID, j.ClaimSeq, errMsg(err))
		}
		if err := commit(); err != nil {
			rollback()
		}
		e.expectUnchanged(before, "a fenced-out CompleteTx")
	}
}

func testTxCompleteUnsupported(e *env) {
	tc := e.txCompleter()
	j := e.claimJob(e.job("q", "k"), "w")
	before := e.get(j.ID)
	if err := tc.CompleteTx(e.ctx, unsupportedTx{}, e.outcome(j, contract.OutcomeComplete)); !errors.Is(err, contract.ErrUnsupported) {
		e.Fatalf("CompleteTx with a transaction of type storetest.unsupportedTx returned %s; want an error wrapping core.ErrUnsupported", errMsg(err))
	}
	e.expectUnchanged(before, "CompleteTx with an unsupported transaction type")
}
