package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

// Factory tells the suite how to make stores.
type Factory struct {
	// Strategies the store supports; the suite runs once per strategy as
	// subtest "strategy=<name>". Empty = run once, subtest
	// "strategy=default", strategy "".
	Strategies []contract.ClaimStrategy

	// New returns a fresh, empty, ready (migrated) store for one subtest. It
	// registers its own cleanup with t.Cleanup.
	New func(t testing.TB, strategy contract.ClaimStrategy) contract.Store

	// BeginTx opens a transaction on s of the type s's TxInserter/TxCompleter
	// accepts, returning it with commit and rollback funcs. Required when the
	// store implements TxInserter or TxCompleter; the suite fails with a
	// clear message otherwise.
	BeginTx func(t testing.TB, s contract.Store) (tx any, commit, rollback func() error)

	// Reopen, optional: a second independent handle (own connection pool) on
	// the same database as s, used to prove claim exclusivity across
	// handles/processes.
	Reopen func(t testing.TB, s contract.Store) contract.Store
}

// Run runs the conformance suite against the stores f makes: every rule of
// the contract.Store contract as a named subtest, once per claim strategy.
func Run(t *testing.T, f Factory) {
	t.Helper()
	if f.New == nil {
		t.Fatal("storetest: Factory.New is nil; it must return a fresh, empty, migrated store for each subtest")
	}
	strategies := f.Strategies
	if len(strategies) == 0 {
		strategies = []contract.ClaimStrategy{""}
	}
	for _, strategy := range strategies {
		name := string(strategy)
		if name == "" {
			name = "default"
		}
		t.Run("strategy="+name, func(t *testing.T) {
			for _, tc := range allTests() {
				t.Run(tc.name, func(t *testing.T) {
					tc.run(newEnv(t, f, strategy))
				})
			}
		})
	}
}

// test is one rule of the contract.
type test struct {
	name string
	run  func(e *env)
}

// allTests lists every subtest in the order they run.
func allTests() []test {
	return slices.Concat(
		insertTests,
		claimTests,
		finishTests,
		leaseTests,
		deadlineTests,
		uniqueTests,
		uniqueHoldTests,
		progressTests,
		txTests,
		txRunTests,
		queueTests,
		adminTests,
		listTests,
		pruneTests,
		archiveTests,
		workerTests,
		settingsTests,
		rewriteTests,
		vacuumTests,
		routingTests,
		limitsTests,
		policyTests,
		historyTests,
		deadWorkerTests,
		notifyTests,
		notifyFinishTests,
		depsTests,
		semanticsTests,
		closeTests,
	)
}

// start is the suite's fixed "now" at the beginning of every subtest. It is
// in the future so that no store can pass by reading a real clock.
var start = time.Date(2030, 1, 2, 3, 4, 5, 123456000, time.UTC)

// lease is the lease length the suite's claims ask for.
const lease = 30 * time.Second

// env is one subtest's store and clock, with helpers that fail the test
// with a message naming the contract rule involved.
type env struct {
	*testing.T
	ctx      context.Context
	f        Factory
	strategy contract.ClaimStrategy
	s        contract.Store
	now      time.Time
}

func newEnv(t *testing.T, f Factory, strategy contract.ClaimStrategy) *env {
	s := f.New(t, strategy)
	if s == nil {
		t.Fatal("storetest: Factory.New returned a nil store")
	}
	return &env{T: t, ctx: t.Context(), f: f, strategy: strategy, s: s, now: start}
}

// advance moves the fake clock forward.
func (e *env) advance(d time.Duration) { e.now = e.now.Add(d) }

// job returns insert parameters for a due job with the suite's defaults:
// args {}, priority 5, 3 attempts.
func (e *env) job(queue, kind string) contract.InsertParams {
	return contract.InsertParams{
		Queue:       queue,
		Kind:        kind,
		Args:        json.RawMessage(`{}`),
		Priority:    contract.PriorityDefault,
		MaxAttempts: 3,
		RunAt:       e.now,
	}
}

// insertResults calls Insert at e.now and checks the shape of the answer.
func (e *env) insertResults(ps ...contract.InsertParams) []contract.InsertResult {
	e.Helper()
	res, err := e.s.Insert(e.ctx, e.now, ps)
	if err != nil {
		e.Fatalf("Insert of %d job(s): unexpected error: %v", len(ps), err)
	}
	if len(res) != len(ps) {
		e.Fatalf("Insert of %d job(s) returned %d results; want one result per input, in input order", len(ps), len(res))
	}
	for i, r := range res {
		if r.Job == nil {
			e.Fatalf("Insert result %d has a nil Job; every result must hold the inserted (or existing duplicate) job", i)
		}
	}
	return res
}

// insert inserts jobs that must not be duplicates and returns them.
func (e *env) insert(ps ...contract.InsertParams) []*contract.Job {
	e.Helper()
	res := e.insertResults(ps...)
	jobs := make([]*contract.Job, len(res))
	for i, r := range res {
		if r.Duplicate {
			e.Fatalf("Insert result %d (kind %q, unique key %q) is marked Duplicate, but no live job holds that key", i, ps[i].Kind, ps[i].UniqueKey)
		}
		jobs[i] = r.Job
	}
	return jobs
}

// insertOne inserts one job that must not be a duplicate.
func (e *env) insertOne(p contract.InsertParams) *contract.Job {
	e.Helper()
	return e.insert(p)[0]
}

// claimAt claims with explicit parameters and fails on error.
func (e *env) claimWith(p contract.ClaimParams) []*contract.Job {
	e.Helper()
	jobs, err := e.s.Claim(e.ctx, p)
	if err != nil {
		e.Fatalf("Claim(queue %q, worker %q, limit %d): unexpected error: %v", p.Queue, p.WorkerID, p.Limit, err)
	}
	if len(jobs) > p.Limit {
		e.Fatalf("Claim with Limit %d returned %d jobs; a claim must never return more than Limit", p.Limit, len(jobs))
	}
	return jobs
}

// claim claims up to limit due jobs of queue for worker at e.now with a
// lease of e.now+lease.
func (e *env) claim(queue, worker string, limit int) []*contract.Job {
	e.Helper()
	return e.claimWith(contract.ClaimParams{Queue: queue, WorkerID: worker, Limit: limit, Now: e.now, LeaseUntil: e.now.Add(lease)})
}

// claimOne claims exactly one job and fails when there is none. Tags are
// the claiming worker's capabilities.
func (e *env) claimOne(queue, worker string, tags ...string) *contract.Job {
	e.Helper()
	jobs := e.claimTags(queue, worker, 1, tags...)
	if len(jobs) != 1 {
		e.Fatalf("Claim(queue %q, limit 1, tags %q) at %s returned %d jobs; want the 1 due job the suite inserted", queue, tags, e.now.Format(time.RFC3339Nano), len(jobs))
	}
	return jobs[0]
}

// claimJob inserts p, claims it and returns the running job.
func (e *env) claimJob(p contract.InsertParams, worker string) *contract.Job {
	e.Helper()
	j := e.insertOne(p)
	c := e.claimOne(p.Queue, worker, p.Tags...)
	if c.ID != j.ID {
		e.Fatalf("Claim returned job %d; want job %d, the only due job in queue %q", c.ID, j.ID, p.Queue)
	}
	return c
}

// outcome returns an outcome of kind k for the running job j, fenced by
// its current worker and claim, at e.now.
func (e *env) outcome(j *contract.Job, k contract.OutcomeKind) contract.Outcome {
	return contract.Outcome{JobID: j.ID, WorkerID: j.WorkerID, ClaimSeq: j.ClaimSeq, Attempt: j.Attempt, Kind: k, At: e.now, RunAt: e.now}
}

// finish calls Finish and checks the shape of the answer.
func (e *env) finish(os ...contract.Outcome) []contract.FinishResult {
	e.Helper()
	res, err := e.s.Finish(e.ctx, os)
	if err != nil {
		e.Fatalf("Finish of %d outcome(s): unexpected error: %v (a failed fence is Applied=false, not an error)", len(os), err)
	}
	if len(res) != len(os) {
		e.Fatalf("Finish of %d outcome(s) returned %d results; want one per outcome, in input order", len(os), len(res))
	}
	for i, r := range res {
		if r.JobID != os[i].JobID {
			e.Fatalf("Finish result %d has JobID %d; want %d (results must be in input order)", i, r.JobID, os[i].JobID)
		}
	}
	return res
}

// apply finishes one outcome that must pass its fence.
func (e *env) apply(o contract.Outcome) {
	e.Helper()
	if !e.finish(o)[0].Applied {
		e.Fatalf("Finish(%s) of job %d by worker %q at attempt %d: Applied=false, but the job is running under that worker and attempt, so the fence must pass", o.Kind, o.JobID, o.WorkerID, o.Attempt)
	}
}

// get returns a job that must exist.
func (e *env) get(id int64) *contract.Job {
	e.Helper()
	j, err := e.s.Get(e.ctx, id)
	if err != nil {
		e.Fatalf("Get(%d): unexpected error: %v", id, err)
	}
	if j == nil {
		e.Fatalf("Get(%d) returned a nil job and a nil error", id)
	}
	return j
}

// expectState fails unless job id is in state want.
func (e *env) expectState(id int64, want contract.State, why string) *contract.Job {
	e.Helper()
	j := e.get(id)
	if j.State != want {
		e.Fatalf("job %d has state %q; want %q (%s)", id, j.State, want, why)
	}
	return j
}

// expectUnchanged fails when job id differs from before.
func (e *env) expectUnchanged(before *contract.Job, why string) {
	e.Helper()
	after := e.get(before.ID)
	if d := diffJob(after, before); len(d) > 0 {
		e.Fatalf("job %d changed, but %s must leave it untouched:\n%s", before.ID, why, lines(d))
	}
}

// stats returns Stats keyed by queue.
func (e *env) stats() map[string]contract.QueueStats {
	e.Helper()
	st, err := e.s.Stats(e.ctx)
	if err != nil {
		e.Fatalf("Stats: unexpected error: %v", err)
	}
	m := make(map[string]contract.QueueStats, len(st))
	for i, q := range st {
		if i > 0 && st[i-1].Queue >= q.Queue {
			e.Fatalf("Stats lists queue %q after %q; want one entry per queue ordered by name", q.Queue, st[i-1].Queue)
		}
		m[q.Queue] = q
	}
	return m
}

// list calls List and fails on error.
func (e *env) list(p contract.ListParams) []*contract.Job {
	e.Helper()
	jobs, err := e.s.List(e.ctx, p)
	if err != nil {
		e.Fatalf("List(%+v): unexpected error: %v", p, err)
	}
	return jobs
}

// ids returns the ids of jobs.
func ids(jobs []*contract.Job) []int64 {
	out := make([]int64, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

// ts formats a time for failure messages.
func ts(t time.Time) string {
	if t.IsZero() {
		return "zero"
	}
	return t.Format(time.RFC3339Nano) + " (" + t.Location().String() + ")"
}

// lines joins failure details one per line, indented.
func lines(d []string) string {
	s := ""
	for _, l := range d {
		s += "\t" + l + "\n"
	}
	return s
}

// errMsg formats a possibly nil error.
func errMsg(err error) string {
	if err == nil {
		return "nil"
	}
	return fmt.Sprintf("%q", err.Error())
}
