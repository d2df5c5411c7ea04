package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/backlogq/backlog/core/contract"
)

var depsTests = []test{
	{"deps/waits-until-every-dependency-completed", testDepsWaitUntilCompleted},
	{"deps/settled-dependencies-count-at-insert", testDepsSettledAtInsert},
	{"deps/failed-dependency-cancels-dependants", testDepsFailedCancels},
	{"deps/run-policy-runs-after-a-failed-dependency", testDepsRunPolicy},
	{"deps/deleted-dependency-counts-as-cancelled", testDepsDeleted},
	{"deps/concurrent-settles-release-once", testDepsConcurrent},
	{"deps/jobs-read-back-with-their-dependencies", testDepsReadBack},
	{"deps/invalid-references-insert-nothing", testDepsInvalid},
	{"deps/retry-of-a-waiting-job-is-invalid-state", testDepsRetryWaiting},
	{"deps/waiting-job-past-its-deadline-is-discarded", testDepsDeadline},
	{"deps/dependency-ends-are-counted", testDepsEndsCounted},
	{"deps/list-by-workflow", testDepsListByWorkflow},
}

// testDepsEndsCounted: DependencyEnds counts the settled dependencies by
// their end, from insert on (a deleted one as cancelled), for the run
// policy to its release and for the cancel policy up to its cancel.
func testDepsEndsCounted(e *env) {
	e.deps()
	done := e.insertOne(e.job("ends", "k"))
	e.finishAs(done, contract.OutcomeComplete, false)
	var open [4]*contract.Job
	for i := range open {
		open[i] = e.insertOne(e.job(fmt.Sprintf("ends%d", i), "k"))
	}
	ids := []int64{done.ID, open[0].ID, open[1].ID, open[2].ID, open[3].ID}
	run := e.after(ids...)
	run.OnDependencyFailure = contract.DependencyRun
	r := e.insertOne(run)
	c := e.insertOne(e.after(ids...))
	want := contract.DependencyEnds{Completed: 1}
	for _, j := range []*contract.Job{r, c, e.get(r.ID)} {
		if j.DependencyEnds != want {
			e.Fatalf("a job inserted after one of its 5 dependencies completed has DependencyEnds %+v; want %+v", j.DependencyEnds, want)
		}
	}
	// The delete first: Delete takes no time, and the store's own clock
	// may be before the test's (see deps/deleted-dependency-counts-as-cancelled).
	if err := e.s.Delete(e.ctx, open[3].ID); err != nil {
		e.Fatalf("Delete: %v", err)
	}
	if _, err := e.s.Cancel(e.ctx, open[2].ID, e.now); err != nil {
		e.Fatalf("Cancel: %v", err)
	}
	e.finishAs(open[1], contract.OutcomeDiscard, false)
	e.finishAs(open[0], contract.OutcomeComplete, false)
	got := e.expectState(r.ID, contract.StateAvailable, "the run policy's dependencies all ended")
	if want := (contract.DependencyEnds{Completed: 2, Discarded: 1, Cancelled: 2}); got.DependencyEnds != want {
		e.Fatalf("DependencyEnds after two completed, one discarded, one cancelled and one deleted dependency: %+v; want %+v", got.DependencyEnds, want)
	}
	got = e.expectState(c.ID, contract.StateCancelled, "the cancel policy's dependency was deleted")
	if want := (contract.DependencyEnds{Completed: 1, Cancelled: 1}); got.DependencyEnds != want {
		e.Fatalf("DependencyEnds of the job cancelled by a deleted dependency: %+v; want %+v (counted up to its cancel)", got.DependencyEnds, want)
	}
	if got := e.claimOne("deps", "w"); got.ID != r.ID || got.DependencyEnds.Total() != 5 {
		e.Fatalf("Claim returned job %d with DependencyEnds %+v; want job %d carrying its 5 ends", got.ID, got.DependencyEnds, r.ID)
	}
}

// testDepsListByWorkflow: the jobs of one Insert call that name a Step or
// set InWorkflow share the first one's id as WorkflowID, and
// ListParams.WorkflowID keeps them.
func testDepsListByWorkflow(e *env) {
	e.deps()
	e.insertOne(e.job("wf", "other"))
	member, step, outside := e.job("wf", "k"), e.job("wf", "k"), e.job("wf", "k")
	member.InWorkflow = true
	step.Step = "callback"
	step.DependsOnIndex = []int{0}
	got := e.insert(outside, member, step)
	if got[0].WorkflowID != 0 || got[1].WorkflowID != got[1].ID || got[2].WorkflowID != got[1].ID {
		e.Fatalf("Insert returned workflow ids %d, %d, %d; want 0 (neither step nor InWorkflow), then the first member's id %d twice",
			got[0].WorkflowID, got[1].WorkflowID, got[2].WorkflowID, got[1].ID)
	}
	e.insert(e.job("wf", "k")) // a later call: no workflow
	js := e.list(contract.ListParams{WorkflowID: got[1].ID, Limit: 10})
	if len(js) != 2 || js[0].ID != got[1].ID || js[1].ID != got[2].ID || js[0].WorkflowID != got[1].ID {
		ids := make([]int64, len(js))
		for i, j := range js {
			ids[i] = j.ID
		}
		e.Fatalf("List with WorkflowID %d returned jobs %v; want [%d %d]", got[1].ID, ids, got[1].ID, got[2].ID)
	}
	if js := e.list(contract.ListParams{WorkflowID: got[1].ID, States: []contract.State{contract.StateWaiting}, Limit: 10}); len(js) != 1 || js[0].Step != "callback" {
		e.Fatalf("List with WorkflowID and state waiting returned %d jobs; want the callback step", len(js))
	}
	second := e.job("wf", "k")
	second.Step = "only"
	other := e.insert(e.job("wf", "k"), second)
	if js := e.list(contract.ListParams{WorkflowFirst: true, Limit: 10}); len(js) != 2 || js[0].ID != got[1].ID || js[1].ID != other[1].ID {
		e.Fatalf("List with WorkflowFirst returned %d jobs; want the first job of each of the two workflows, %d and %d", len(js), got[1].ID, other[1].ID)
	}
}

func testDepsDeadline(e *env) {
	e.deps()
	a := e.insertOne(e.job("root", "k"))
	p := e.after(a.ID)
	p.Deadline = e.now.Add(lease)
	j := e.insertOne(p)
	after := e.insertOne(e.after(j.ID))
	n, err := e.s.DiscardExpired(e.ctx, e.now.Add(2*lease), 100)
	if err != nil {
		e.Fatalf("DiscardExpired: %v", err)
	}
	if n != 1 {
		e.Fatalf("DiscardExpired discarded %d jobs; want 1, the waiting job past its deadline", n)
	}
	e.expectState(j.ID, contract.StateDiscarded, "a waiting job whose deadline passed")
	e.expectDependencyCancel(after.ID, j.ID, "its dependency was discarded past its deadline")
}

// deps skips unless the store implements contract.Dependencies.
func (e *env) deps() {
	e.Helper()
	if _, ok := e.s.(contract.Dependencies); !ok {
		e.Skip("the store does not implement contract.Dependencies")
	}
}

// after returns a job of queue "deps" that depends on ids.
func (e *env) after(ids ...int64) contract.InsertParams {
	p := e.job("deps", "k")
	p.DependsOn = ids
	return p
}

// expectWaiting fails unless job id waits for n dependencies.
func (e *env) expectWaiting(id int64, n int, why string) {
	e.Helper()
	j := e.expectState(id, contract.StateWaiting, why)
	if j.WaitingFor != n {
		e.Fatalf("%s: job %d waits for %d dependencies; want %d", why, id, j.WaitingFor, n)
	}
}

// expectDependencyCancel fails unless job id was cancelled for a failed
// dependency: state cancelled, FinishedAt set, the last error entry of
// Cause CauseDependency naming dep.
func (e *env) expectDependencyCancel(id, dep int64, why string) {
	e.Helper()
	j := e.expectState(id, contract.StateCancelled, why)
	if j.FinishedAt.IsZero() || len(j.Errors) == 0 {
		e.Fatalf("%s: job %d is cancelled with FinishedAt %v and %d error entries; want FinishedAt set and an entry saying why", why, id, j.FinishedAt, len(j.Errors))
	}
	last := j.Errors[len(j.Errors)-1]
	if last.Cause != contract.CauseDependency || !strings.Contains(last.Error, fmt.Sprint(dep)) {
		e.Fatalf("%s: job %d's last error entry is %+v; want Cause %q naming dependency %d", why, id, last, contract.CauseDependency, dep)
	}
}

// finishAs claims job j (the only due job of its queue) and finishes it with k.
func (e *env) finishAs(j *contract.Job, k contract.OutcomeKind, del bool) {
	e.Helper()
	c := e.claimOne(j.Queue, "w")
	if c.ID != j.ID {
		e.Fatalf("setup: claimed job %d; want %d", c.ID, j.ID)
	}
	o := e.outcome(c, k)
	o.Delete = del
	e.apply(o)
}

func testDepsWaitUntilCompleted(e *env) {
	e.deps()
	a := e.insertOne(e.job("a", "k"))
	b := e.insertOne(e.job("b", "k"))
	c := e.insertOne(e.after(a.ID, b.ID))
	if c.State != contract.StateWaiting || c.WaitingFor != 2 {
		e.Fatalf("Insert of a job depending on two due jobs returned state %q waiting for %d; want waiting for 2", c.State, c.WaitingFor)
	}
	if got := e.claim("deps", "w", 10); len(got) != 0 {
		e.Fatalf("Claim returned %d jobs of queue deps; a waiting job is never claimed", len(got))
	}
	e.finishAs(a, contract.OutcomeComplete, false)
	e.expectWaiting(c.ID, 1, "one of its two dependencies completed")
	e.finishAs(b, contract.OutcomeComplete, true) // completed and deleted at once
	e.expectState(c.ID, contract.StateAvailable, "its last dependency completed (its row deleted with the completion)")
	if got := e.claimOne("deps", "w"); got.ID != c.ID {
		e.Fatalf("Claim returned job %d; want the released job %d", got.ID, c.ID)
	}
}

func testDepsSettledAtInsert(e *env) {
	e.deps()
	done := e.insertOne(e.job("done", "k"))
	e.finishAs(done, contract.OutcomeComplete, false)
	failed := e.insertOne(e.job("failed", "k"))
	e.finishAs(failed, contract.OutcomeDiscard, false)

	if j := e.insertOne(e.after(done.ID)); j.State != contract.StateAvailable {
		e.Fatalf("Insert of a job whose only dependency completed: state %q; want available", j.State)
	}
	later := e.after(done.ID)
	later.RunAt = e.now.Add(lease)
	if j := e.insertOne(later); j.State != contract.StateScheduled {
		e.Fatalf("Insert of a job whose only dependency completed and whose run_at is ahead: state %q; want scheduled", j.State)
	}
	cancelled := e.insertOne(e.after(done.ID, failed.ID))
	e.expectDependencyCancel(cancelled.ID, failed.ID, "inserted depending on a discarded job (DependencyCancel)")
	run := e.after(failed.ID)
	run.OnDependencyFailure = contract.DependencyRun
	if j := e.insertOne(run); j.State != contract.StateAvailable {
		e.Fatalf("Insert of a job whose only dependency was discarded, with DependencyRun: state %q; want available", j.State)
	}
	// Within one call, by index.
	first, second := e.job("call", "k"), e.job("call", "k")
	second.DependsOnIndex = []int{0}
	got := e.insert(first, second)
	if got[1].State != contract.StateWaiting || got[1].WaitingFor != 1 || !slices.Equal(got[1].DependsOn, []int64{got[0].ID}) {
		e.Fatalf("the second job of a call depending on the first (DependsOnIndex 0): %+v; want waiting for 1, DependsOn [%d]", got[1], got[0].ID)
	}
}

func testDepsFailedCancels(e *env) {
	e.deps()
	// a ← b ← c (cancel), a ← d (run)
	a, b, c, d := e.job("root", "k"), e.job("deps", "k"), e.job("deps", "k"), e.job("deps", "k")
	b.DependsOnIndex, c.DependsOnIndex, d.DependsOnIndex = []int{0}, []int{1}, []int{0}
	d.OnDependencyFailure = contract.DependencyRun
	got := e.insert(a, b, c, d)
	e.finishAs(got[0], contract.OutcomeDiscard, false)
	e.expectDependencyCancel(got[1].ID, got[0].ID, "its dependency was discarded")
	e.expectDependencyCancel(got[2].ID, got[1].ID, "its dependency was cancelled because its own dependency was discarded")
	e.expectState(got[3].ID, contract.StateAvailable, "its only dependency was discarded and its policy is DependencyRun")
}

func testDepsRunPolicy(e *env) {
	e.deps()
	a := e.insertOne(e.job("root", "k"))
	b := e.insertOne(e.job("root2", "k"))
	p := e.after(a.ID, b.ID)
	p.OnDependencyFailure = contract.DependencyRun
	j := e.insertOne(p)
	if _, err := e.s.Cancel(e.ctx, a.ID, e.now); err != nil {
		e.Fatalf("Cancel(%d): %v", a.ID, err)
	}
	e.expectWaiting(j.ID, 1, "one dependency cancelled (DependencyRun), one still due")
	e.finishAs(b, contract.OutcomeComplete, false)
	e.expectState(j.ID, contract.StateAvailable, "both dependencies ended, one cancelled (DependencyRun)")
}

func testDepsDeleted(e *env) {
	e.deps()
	a := e.insertOne(e.job("root", "k"))
	cancel := e.insertOne(e.after(a.ID))
	p := e.after(a.ID)
	p.OnDependencyFailure = contract.DependencyRun
	run := e.insertOne(p)
	if err := e.s.Delete(e.ctx, a.ID); err != nil {
		e.Fatalf("Delete(%d): %v", a.ID, err)
	}
	e.expectDependencyCancel(cancel.ID, a.ID, "its dependency was deleted before it ended")
	// Delete takes no time: the store decides by its own clock whether
	// the released job is available or scheduled until its run_at; a
	// claim at its run_at takes it either way.
	if j := e.get(run.ID); j.State != contract.StateAvailable && j.State != contract.StateScheduled {
		e.Fatalf("job %d has state %q after its dependency was deleted (DependencyRun); want it released (available, or scheduled until its run_at)", run.ID, j.State)
	}
	if got := e.claimOne("deps", "w"); got.ID != run.ID {
		e.Fatalf("Claim returned job %d; want the released job %d", got.ID, run.ID)
	}
}

// testDepsConcurrent: the dependencies of one job finished at once from
// two handles (when Factory.Reopen is set; else from goroutines on one)
// release it once.
func testDepsConcurrent(e *env) {
	e.deps()
	const n = 40
	ps := make([]contract.InsertParams, n+1)
	for i := range n {
		ps[i] = e.job("many", "k")
		ps[n].DependsOnIndex = append(ps[n].DependsOnIndex, i)
	}
	ps[n] = e.job("deps", "k")
	for i := range n {
		ps[n].DependsOnIndex = append(ps[n].DependsOnIndex, i)
	}
	got := e.insert(ps...)
	last := got[n]
	claimed := e.claim("many", "w", n)
	if len(claimed) != n {
		e.Fatalf("setup: claimed %d of %d jobs", len(claimed), n)
	}
	stores := []contract.Store{e.s, e.s}
	if e.f.Reopen != nil {
		stores[1] = e.f.Reopen(e.T, e.s)
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i, c := range claimed {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := stores[i%2].Finish(e.ctx, []contract.Outcome{e.outcome(c, contract.OutcomeComplete)})
			if err == nil && !res[0].Applied {
				err = errors.New("not applied")
			}
			if err != nil {
				errs <- fmt.Errorf("finish of job %d: %w", c.ID, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		e.Fatalf("%v", err)
	}
	e.expectState(last.ID, contract.StateAvailable, fmt.Sprintf("its %d dependencies completed at once from two handles", n))
	if j := e.get(last.ID); j.WaitingFor != 0 {
		e.Fatalf("the released job waits for %d; want 0", j.WaitingFor)
	}
	if got := e.claim("deps", "w", 10); len(got) != 1 || got[0].ID != last.ID {
		e.Fatalf("Claim after the release returned %d jobs; want the released job once", len(got))
	}
}

func testDepsReadBack(e *env) {
	e.deps()
	old := e.insertOne(e.job("old", "k"))
	extract, load := e.job("wf", "extract"), e.job("wf", "load")
	extract.Step, load.Step = "extract", "load"
	load.DependsOn, load.DependsOnIndex = []int64{old.ID}, []int{0}
	load.OnDependencyFailure = contract.DependencyRun
	got := e.insert(extract, load)
	for _, j := range []*contract.Job{e.get(got[1].ID), e.list(contract.ListParams{Queue: "wf", Limit: 10})[1]} {
		if j.WorkflowID != got[0].ID || j.Step != "load" || !slices.Equal(j.DependsOn, []int64{old.ID, got[0].ID}) ||
			j.WaitingFor != 2 || j.OnDependencyFailure != contract.DependencyRun || j.State != contract.StateWaiting {
			e.Fatalf("job read back: workflow %d step %q depends on %v waiting for %d policy %q state %q; want workflow %d (the first step's id), step load, [%d %d], 2, run, waiting",
				j.WorkflowID, j.Step, j.DependsOn, j.WaitingFor, j.OnDependencyFailure, j.State, got[0].ID, old.ID, got[0].ID)
		}
	}
	if j := e.get(got[0].ID); j.WorkflowID != got[0].ID || j.Step != "extract" {
		e.Fatalf("the first step read back: workflow %d step %q", j.WorkflowID, j.Step)
	}
	if n := e.stats()["wf"].Counts[contract.StateWaiting]; n != 1 {
		e.Fatalf("Stats counts %d waiting jobs in queue wf; want 1", n)
	}
	if js := e.list(contract.ListParams{States: []contract.State{contract.StateWaiting}, Limit: 10}); len(js) != 1 || js[0].ID != got[1].ID {
		e.Fatalf("List of state waiting returned %d jobs; want the one waiting job", len(js))
	}
}

func testDepsInvalid(e *env) {
	e.deps()
	a := e.insertOne(e.job("root", "k"))
	self := e.job("bad", "k")
	self.DependsOnIndex = []int{0}
	neg := e.job("bad", "k")
	neg.DependsOnIndex = []int{-1}
	zero := e.after(0)
	long := e.job("bad", "k")
	long.Step = strings.Repeat("s", contract.MaxStepLen+1)
	policy := e.after(a.ID)
	policy.OnDependencyFailure = "sometimes"
	dupA, dupB := e.job("bad", "k"), e.job("bad", "k")
	dupA.Step, dupB.Step = "same", "same"
	many := e.job("bad", "k")
	for i := range contract.MaxDependencies + 1 {
		many.DependsOn = append(many.DependsOn, a.ID+int64(i))
	}
	for _, c := range []struct {
		what string
		ps   []contract.InsertParams
	}{
		{"DependsOnIndex naming the job itself", []contract.InsertParams{e.job("bad", "k"), self, e.job("bad", "k")}[1:2]},
		{"DependsOnIndex -1", []contract.InsertParams{e.job("bad", "k"), neg}},
		{"a dependency id of 0", []contract.InsertParams{e.job("bad", "k"), zero}},
		{"a step name over MaxStepLen", []contract.InsertParams{long}},
		{"an unknown policy", []contract.InsertParams{policy}},
		{"one step name twice", []contract.InsertParams{dupA, dupB}},
		{"more than MaxDependencies dependencies", []contract.InsertParams{many}},
	} {
		_, err := e.s.Insert(e.ctx, e.now, c.ps)
		if !errors.Is(err, contract.ErrInvalidArgument) {
			e.Fatalf("Insert with %s: error %v; want one wrapping ErrInvalidArgument", c.what, err)
		}
	}
	_, err := e.s.Insert(e.ctx, e.now, []contract.InsertParams{e.job("bad", "k"), e.after(a.ID + 1000)})
	if !errors.Is(err, contract.ErrInvalidArgument) || !errors.Is(err, contract.ErrNotFound) {
		e.Fatalf("Insert depending on an id no job has: error %v; want one wrapping ErrInvalidArgument and ErrNotFound", err)
	}
	if js := e.list(contract.ListParams{Queue: "bad", Limit: 10}); len(js) != 0 {
		e.Fatalf("refused inserts left %d jobs in queue bad; want none (a refused call inserts nothing)", len(js))
	}
}

func testDepsRetryWaiting(e *env) {
	e.deps()
	a := e.insertOne(e.job("root", "k"))
	j := e.insertOne(e.after(a.ID))
	if _, err := e.s.Retry(e.ctx, j.ID, e.now); !errors.Is(err, contract.ErrInvalidState) {
		e.Fatalf("Retry of a waiting job: error %v; want one wrapping ErrInvalidState (it would run before its dependencies)", err)
	}
	e.expectWaiting(j.ID, 1, "a refused Retry")
}
