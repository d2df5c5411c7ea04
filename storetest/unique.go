package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

var uniqueTests = []test{
	{"unique/duplicate-returns-existing-job", testUniqueDuplicate},
	{"unique/same-key-twice-in-one-batch", testUniqueInBatch},
	{"unique/key-stays-taken-until-job-is-final", testUniqueWhileLive},
	{"unique/key-is-free-again-after-job-is-final", testUniqueAfterFinal},
	{"unique/empty-key-is-not-unique", testUniqueEmpty},
	{"unique/concurrent-inserts-of-one-key-yield-one-job", testUniqueConcurrent},
	{"unique/scope-queue", testUniqueScopeQueue},
	{"unique/scope-kind", testUniqueScopeKind},
	{"unique/scopes-do-not-collide", testUniqueScopesApart},
	{"unique/batch-with-duplicate-scoped-keys", testUniqueScopedBatch},
	{"unique/window-holds-after-complete", testUniqueWindowComplete},
	{"unique/window-holds-after-cancel-and-discard", testUniqueWindowCancelDiscard},
	{"unique/window-expires", testUniqueWindowExpires},
	{"unique/window-survives-delete-on-complete", testUniqueWindowDeleteOnComplete},
	{"unique/window-survives-prune", testUniqueWindowPrune},
	{"unique/window-survives-admin-delete", testUniqueWindowAdminDelete},
	{"unique/zero-window-frees-key-on-delete", testUniqueZeroWindowDelete},
	{"unique/delete-before-final-frees-key", testUniqueDeleteLive},
	{"unique/retry-after-key-passed-on-is-refused", testUniqueRetryPassed},
	{"unique/concurrent-one-job", testUniqueConcurrentWindow},
}

// window is the UniqueFor of the suite's jobs with a hold window.
const window = time.Hour

// scopedJob returns a due job of queue and kind with key in scope, held
// for uniqueFor after it is final.
func scopedJob(e *env, queue, kind, key string, scope contract.UniqueScope, uniqueFor time.Duration) contract.InsertParams {
	p := e.job(queue, kind)
	p.UniqueKey, p.UniqueScope, p.UniqueFor = key, scope, uniqueFor
	return p
}

// expectHeldBy fails unless inserting p returns job id as a duplicate.
func (e *env) expectHeldBy(p contract.InsertParams, id int64, why string) *contract.Job {
	e.Helper()
	res := e.insertResults(p)
	if !res[0].Duplicate || res[0].Job.ID != id {
		e.Fatalf("Insert of unique key %q (scope %s, queue %q, kind %q) at %s returned job %d with Duplicate=%v; want job %d with Duplicate=true (%s)",
			p.UniqueKey, p.UniqueScope, p.Queue, p.Kind, ts(e.now), res[0].Job.ID, res[0].Duplicate, id, why)
	}
	return res[0].Job
}

// expectFresh fails unless inserting p creates a new job, and returns it.
func (e *env) expectFresh(p contract.InsertParams, why string) *contract.Job {
	e.Helper()
	res := e.insertResults(p)
	if res[0].Duplicate {
		e.Fatalf("Insert of unique key %q (scope %s, queue %q, kind %q) at %s returned job %d with Duplicate=true; want a new job (%s)",
			p.UniqueKey, p.UniqueScope, p.Queue, p.Kind, ts(e.now), res[0].Job.ID, why)
	}
	return res[0].Job
}

// expectGoneHolder checks the job a duplicate insert returned for a
// holder whose row is gone: at least ID, Queue, Kind and UniqueKey.
func (e *env) expectGoneHolder(got *contract.Job, want *contract.Job) {
	e.Helper()
	if got.ID != want.ID || got.Queue != want.Queue || got.Kind != want.Kind || got.UniqueKey != want.UniqueKey {
		e.Fatalf("a duplicate insert whose holder's row is gone returned job {ID %d, Queue %q, Kind %q, UniqueKey %q}; want {ID %d, Queue %q, Kind %q, UniqueKey %q} (what the hold keeps)",
			got.ID, got.Queue, got.Kind, got.UniqueKey, want.ID, want.Queue, want.Kind, want.UniqueKey)
	}
}

func testUniqueScopeQueue(e *env) {
	a := e.expectFresh(scopedJob(e, "q1", "k", "key", contract.UniqueQueue, 0), "first use of the key in queue q1")
	b := e.expectFresh(scopedJob(e, "q2", "k", "key", contract.UniqueQueue, 0), "with queue scope the key is unique within a queue, and q2 has no job with it")
	if a.ID == b.ID {
		e.Fatalf("two queue-scoped inserts of one key in two queues returned the same job %d", a.ID)
	}
	e.expectHeldBy(scopedJob(e, "q1", "other-kind", "key", contract.UniqueQueue, 0), a.ID, "queue q1 already has a live job with the key; the kind does not matter in queue scope")
	e.expectHeldBy(scopedJob(e, "q2", "k", "key", contract.UniqueQueue, 0), b.ID, "queue q2 already has a live job with the key")
}

func testUniqueScopeKind(e *env) {
	a := e.expectFresh(scopedJob(e, "q", "kind-a", "key", contract.UniqueKind, 0), "first use of the key for kind-a")
	b := e.expectFresh(scopedJob(e, "q", "kind-b", "key", contract.UniqueKind, 0), "with kind scope the key is unique within a kind, and kind-b has no job with it")
	if a.ID == b.ID {
		e.Fatalf("two kind-scoped inserts of one key for two kinds returned the same job %d", a.ID)
	}
	e.expectHeldBy(scopedJob(e, "other-queue", "kind-a", "key", contract.UniqueKind, 0), a.ID, "kind-a already has a live job with the key; the queue does not matter in kind scope")
	e.expectHeldBy(scopedJob(e, "q", "kind-b", "key", contract.UniqueKind, 0), b.ID, "kind-b already has a live job with the key")
}

func testUniqueScopesApart(e *env) {
	// One key text in three scopes, and queue and kind names that would
	// run together with the key if the scoped key were a plain
	// concatenation.
	ps := []contract.InsertParams{
		scopedJob(e, "q", "q", "x", contract.UniqueGlobal, 0),
		scopedJob(e, "q", "q", "x", contract.UniqueQueue, 0),
		scopedJob(e, "q", "q", "x", contract.UniqueKind, 0),
		scopedJob(e, "a:b", "k", "c", contract.UniqueQueue, 0),
		scopedJob(e, "a", "k", "b:c", contract.UniqueQueue, 0),
		scopedJob(e, "q", "a:b", "c", contract.UniqueKind, 0),
		scopedJob(e, "q", "a", "b:c", contract.UniqueKind, 0),
	}
	for _, p := range ps {
		e.expectFresh(p, "no other scope, queue or kind shares this scoped key")
	}
}

func testUniqueScopedBatch(e *env) {
	ps := []contract.InsertParams{
		scopedJob(e, "q1", "a", "k", contract.UniqueQueue, window), // 0 new
		scopedJob(e, "q2", "b", "k", contract.UniqueQueue, window), // 1 new: other queue
		scopedJob(e, "q1", "c", "k", contract.UniqueQueue, window), // 2 dup of 0
		scopedJob(e, "q1", "d", "k", contract.UniqueGlobal, 0),     // 3 new: global scope
		scopedJob(e, "q2", "e", "k", contract.UniqueGlobal, 0),     // 4 dup of 3
		scopedJob(e, "q1", "a", "k", contract.UniqueKind, 0),       // 5 new: kind a
		e.job("q1", "plain"), // 6 new
	}
	res := e.insertResults(ps...)
	wantDup := []int{-1, -1, 0, -1, 3, -1, -1}
	for i, w := range wantDup {
		if w < 0 {
			if res[i].Duplicate {
				e.Fatalf("batch input %d (queue %q, kind %q, key %q, scope %s) was marked Duplicate; want a new job: no earlier input shares its scoped key", i, ps[i].Queue, ps[i].Kind, ps[i].UniqueKey, ps[i].UniqueScope)
			}
			continue
		}
		if !res[i].Duplicate || res[i].Job.ID != res[w].Job.ID {
			e.Fatalf("batch input %d (queue %q, kind %q, key %q, scope %s) returned job %d with Duplicate=%v; want input %d's job %d with Duplicate=true", i, ps[i].Queue, ps[i].Kind, ps[i].UniqueKey, ps[i].UniqueScope, res[i].Job.ID, res[i].Duplicate, w, res[w].Job.ID)
		}
	}
	seen := map[int64]bool{}
	for i, r := range res {
		if !r.Duplicate {
			if seen[r.Job.ID] {
				e.Fatalf("batch input %d returned job %d, already returned as new for another input", i, r.Job.ID)
			}
			seen[r.Job.ID] = true
			if got := e.get(r.Job.ID); got.Queue != ps[i].Queue || got.Kind != ps[i].Kind {
				e.Fatalf("batch input %d (queue %q, kind %q) returned job %d, which is stored with queue %q, kind %q; results must be in input order", i, ps[i].Queue, ps[i].Kind, r.Job.ID, got.Queue, got.Kind)
			}
		}
	}
}

func testUniqueWindowComplete(e *env) {
	p := scopedJob(e, "q", "k", "report", contract.UniqueGlobal, window)
	j := e.claimJob(p, "w")
	e.apply(e.outcome(j, contract.OutcomeComplete))
	e.advance(window / 2)
	got := e.expectHeldBy(scopedJob(e, "q", "k", "report", contract.UniqueGlobal, window), j.ID,
		"the holder completed half its UniqueFor ago, so the key is still held")
	if got.State != contract.StateCompleted {
		e.Fatalf("a duplicate insert returned the completed holder in state %q; want it as it now is (completed)", got.State)
	}
	e.advance(window/2 - time.Microsecond)
	e.expectHeldBy(p, j.ID, "one microsecond before FinishedAt+UniqueFor the key is still held")
}

func testUniqueWindowCancelDiscard(e *env) {
	c := e.insertOne(scopedJob(e, "q", "k", "cancelled", contract.UniqueGlobal, window))
	if _, err := e.s.Cancel(e.ctx, c.ID, e.now); err != nil {
		e.Fatalf("Cancel(%d): %v", c.ID, err)
	}
	e.advance(time.Minute)
	d := e.claimJob(scopedJob(e, "q", "k", "discarded", contract.UniqueGlobal, window), "w")
	e.apply(e.outcome(d, contract.OutcomeDiscard))
	e.advance(window - 2*time.Minute)
	e.expectHeldBy(scopedJob(e, "q", "k", "cancelled", contract.UniqueGlobal, 0), c.ID, "the holder was cancelled inside its UniqueFor")
	e.expectHeldBy(scopedJob(e, "q", "k", "discarded", contract.UniqueGlobal, 0), d.ID, "the holder was discarded inside its UniqueFor")
}

func testUniqueWindowExpires(e *env) {
	p := scopedJob(e, "q", "k", "report", contract.UniqueQueue, window)
	j := e.claimJob(p, "w")
	e.apply(e.outcome(j, contract.OutcomeComplete))
	e.advance(window)
	n := e.expectFresh(p, "at FinishedAt+UniqueFor the hold has ended (a key is held while now < FinishedAt+UniqueFor)")
	if n.ID == j.ID {
		e.Fatalf("the new job has the old job's id %d", j.ID)
	}
	e.expectHeldBy(p, n.ID, "the new job took the hold over")
	if got := e.get(j.ID); got.State != contract.StateCompleted {
		e.Fatalf("the old holder %d is %q after its key passed on; want it untouched (completed)", j.ID, got.State)
	}
}

func testUniqueWindowDeleteOnComplete(e *env) {
	p := scopedJob(e, "q", "k", "mail", contract.UniqueKind, window)
	j := e.claimJob(p, "w")
	o := e.outcome(j, contract.OutcomeComplete)
	o.Delete = true
	e.apply(o)
	if _, err := e.s.Get(e.ctx, j.ID); !errors.Is(err, contract.ErrNotFound) {
		e.Fatalf("Get(%d) after a completion with Delete: error %v; want ErrNotFound", j.ID, err)
	}
	e.advance(window - time.Second)
	got := e.expectHeldBy(p, j.ID, "the row was deleted at completion, but the key stays held for UniqueFor after it")
	e.expectGoneHolder(got, j)
	e.advance(time.Second)
	e.expectFresh(p, "the window after the deleted holder's completion is over")
}

func testUniqueWindowPrune(e *env) {
	p := scopedJob(e, "q", "k", "prune-me", contract.UniqueGlobal, window)
	j := e.claimJob(p, "w")
	e.apply(e.outcome(j, contract.OutcomeComplete))
	e.advance(time.Minute)
	if n, err := e.s.Prune(e.ctx, contract.StateCompleted, e.now, 100); err != nil || n != 1 {
		e.Fatalf("Prune(completed, before now) = %d, %v; want 1, nil", n, err)
	}
	got := e.expectHeldBy(p, j.ID, "pruning the holder's row inside its UniqueFor must not free the key")
	e.expectGoneHolder(got, j)
	// A prune that forgets ended holds must not forget this one early.
	if _, err := e.s.Prune(e.ctx, contract.StateCompleted, e.now, 100); err != nil {
		e.Fatalf("Prune: %v", err)
	}
	e.expectHeldBy(p, j.ID, "a later Prune must not forget a hold before it ends")
	e.advance(window)
	if _, err := e.s.Prune(e.ctx, contract.StateCompleted, e.now, 100); err != nil {
		e.Fatalf("Prune: %v", err)
	}
	e.expectFresh(p, "the window is over (and Prune may have forgotten the hold)")
}

func testUniqueWindowAdminDelete(e *env) {
	p := scopedJob(e, "q", "k", "admin", contract.UniqueGlobal, window)
	j := e.claimJob(p, "w")
	e.apply(e.outcome(j, contract.OutcomeDiscard))
	e.advance(time.Minute)
	if err := e.s.Delete(e.ctx, j.ID); err != nil {
		e.Fatalf("Delete(%d) of a discarded job: %v", j.ID, err)
	}
	got := e.expectHeldBy(p, j.ID, "deleting a final holder inside its UniqueFor must not free the key")
	e.expectGoneHolder(got, j)
	e.advance(window - time.Minute)
	e.expectFresh(p, "the window after the deleted holder was discarded is over")
}

func testUniqueZeroWindowDelete(e *env) {
	p := scopedJob(e, "q", "k", "zero", contract.UniqueGlobal, 0)
	j := e.claimJob(p, "w")
	o := e.outcome(j, contract.OutcomeComplete)
	o.Delete = true
	e.apply(o)
	n := e.expectFresh(p, "with UniqueFor 0 the key is free once the holder is final, deleted or not")
	if _, err := e.s.Cancel(e.ctx, n.ID, e.now); err != nil {
		e.Fatalf("Cancel(%d): %v", n.ID, err)
	}
	if err := e.s.Delete(e.ctx, n.ID); err != nil {
		e.Fatalf("Delete(%d): %v", n.ID, err)
	}
	e.expectFresh(p, "with UniqueFor 0 the key is free after an admin delete")
}

func testUniqueDeleteLive(e *env) {
	p := scopedJob(e, "q", "k", "live", contract.UniqueGlobal, window)
	j := e.insertOne(p)
	if err := e.s.Delete(e.ctx, j.ID); err != nil {
		e.Fatalf("Delete(%d): %v", j.ID, err)
	}
	e.expectFresh(p, "a job deleted before it reached a final state never started its window, so its key is free")
}

func testUniqueRetryPassed(e *env) {
	p := scopedJob(e, "q", "k", "passed", contract.UniqueGlobal, 0)
	old := e.claimJob(p, "w")
	e.apply(e.outcome(old, contract.OutcomeDiscard))
	// While its hold is its own, a final job can be retried.
	if _, err := e.s.Retry(e.ctx, old.ID, e.now); err != nil {
		e.Fatalf("Retry(%d) of a discarded job still holding its key: %v", old.ID, err)
	}
	e.expectHeldBy(p, old.ID, "the retried job is live again")
	c := e.claimOne("q", "w")
	e.apply(e.outcome(c, contract.OutcomeDiscard))
	n := e.expectFresh(p, "the holder is final and UniqueFor is 0")
	if _, err := e.s.Retry(e.ctx, old.ID, e.now); !errors.Is(err, contract.ErrInvalidState) {
		e.Fatalf("Retry(%d) of a job whose key has passed to job %d: error %v; want ErrInvalidState", old.ID, n.ID, err)
	}
	if got := e.get(old.ID); got.State != contract.StateDiscarded {
		e.Fatalf("a refused Retry left job %d in state %q; want it unchanged (discarded)", old.ID, got.State)
	}
	e.expectHeldBy(p, n.ID, "the key still names the newer job")
}

// testUniqueConcurrentWindow races inserts of one scoped key, over two
// handles when Factory.Reopen is set: on a fresh key, on a key whose
// holder's window is still open (deleted row), and on a key whose window
// just ended (the hold is taken over once).
func testUniqueConcurrentWindow(e *env) {
	const goroutines = 8
	handles := []contract.Store{e.s}
	if e.f.Reopen != nil {
		s2 := e.f.Reopen(e.T, e.s)
		if s2 == nil {
			e.Fatal("Factory.Reopen returned a nil store")
		}
		handles = append(handles, s2)
	}
	race := func(p contract.InsertParams) (fresh []int64, holders map[int64]bool) {
		var (
			wg sync.WaitGroup
			mu sync.Mutex
		)
		holders = map[int64]bool{}
		for g := range goroutines {
			wg.Go(func() {
				q := p
				q.Kind = fmt.Sprintf("%s-g%d", p.Kind, g)
				res, err := handles[g%len(handles)].Insert(e.ctx, e.now, []contract.InsertParams{q})
				if err != nil {
					e.Errorf("concurrent Insert of unique key %q: unexpected error: %v (a collision is a Duplicate result, not an error; transient errors are retried inside the store)", p.UniqueKey, err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if !res[0].Duplicate {
					fresh = append(fresh, res[0].Job.ID)
				}
				holders[res[0].Job.ID] = true
			})
		}
		wg.Wait()
		if e.Failed() {
			e.FailNow()
		}
		return fresh, holders
	}
	for k := range 3 {
		p := scopedJob(e, fmt.Sprintf("race%d", k), "race", "window", contract.UniqueQueue, window)
		fresh, holders := race(p)
		if len(fresh) != 1 || len(holders) != 1 {
			e.Fatalf("%d concurrent inserts of fresh queue-scoped key %q created jobs %v and returned jobs %v; want exactly one new job, returned to every caller (the database must enforce it: a primary key on the scoped key)", goroutines, p.UniqueKey, fresh, holders)
		}
		first := fresh[0]
		j := e.claimOne(p.Queue, "w")
		if j.ID != first {
			e.Fatalf("claimed job %d; want %d", j.ID, first)
		}
		o := e.outcome(j, contract.OutcomeComplete)
		o.Delete = true
		e.apply(o)
		e.advance(time.Minute)
		fresh, holders = race(p)
		if len(fresh) != 0 || len(holders) != 1 || !holders[first] {
			e.Fatalf("%d concurrent inserts of key %q inside the window of deleted holder %d created jobs %v and returned jobs %v; want no new job, holder %d returned to every caller", goroutines, p.UniqueKey, first, fresh, holders, first)
		}
		e.advance(window)
		fresh, holders = race(p)
		if len(fresh) != 1 || len(holders) != 1 {
			e.Fatalf("%d concurrent inserts of key %q after the window of holder %d ended created jobs %v and returned jobs %v; want exactly one new job taking the hold over, returned to every caller", goroutines, p.UniqueKey, first, fresh, holders)
		}
	}
	st := e.stats()
	for k := range 3 {
		q := fmt.Sprintf("race%d", k)
		if n := st[q].Counts[contract.StateAvailable]; n != 1 {
			e.Fatalf("after the races Stats counts %d available jobs in queue %q; want 1 (one key per queue, queue scope)", n, q)
		}
	}
}

func uniqueJob(e *env, key, kind string) contract.InsertParams {
	p := e.job("q", kind)
	p.UniqueKey = key
	return p
}

func testUniqueDuplicate(e *env) {
	first := e.insertOne(uniqueJob(e, "report:2030-01", "first"))
	dupP := uniqueJob(e, "report:2030-01", "second")
	dupP.Args = json.RawMessage(`{"other":true}`)
	res := e.insertResults(dupP)
	if !res[0].Duplicate {
		e.Fatalf("Insert of a job whose unique key %q is held by live job %d returned a result with Duplicate=false (job %d); want Duplicate=true", dupP.UniqueKey, first.ID, res[0].Job.ID)
	}
	if d := diffJob(res[0].Job, e.get(first.ID)); len(d) > 0 {
		e.Fatalf("a duplicate insert must return the existing job as it is; it returned:\n%s", lines(d))
	}
	if st := e.stats()["q"].Counts; st[contract.StateAvailable] != 1 || nonZero(st) != 1 {
		e.Fatalf("after a duplicate insert Stats counts %v; want exactly the 1 original job", st)
	}
}

func testUniqueInBatch(e *env) {
	res := e.insertResults(uniqueJob(e, "k1", "a"), uniqueJob(e, "k2", "b"), uniqueJob(e, "k1", "c"), e.job("q", "d"))
	if res[0].Duplicate || res[1].Duplicate || !res[2].Duplicate || res[3].Duplicate {
		e.Fatalf("a batch holding unique key \"k1\" twice returned Duplicate flags %v, %v, %v, %v; want false, false, true, false (the second use of the key is the duplicate)", res[0].Duplicate, res[1].Duplicate, res[2].Duplicate, res[3].Duplicate)
	}
	if res[2].Job.ID != res[0].Job.ID || res[2].Job.Kind != "a" {
		e.Fatalf("the duplicate within the batch returned job %d (kind %q); want the batch's first job with that key, %d (kind \"a\")", res[2].Job.ID, res[2].Job.Kind, res[0].Job.ID)
	}
	if n := e.stats()["q"].Counts[contract.StateAvailable]; n != 3 {
		e.Fatalf("after a batch of 4 with one duplicate Stats counts %d available jobs; want 3", n)
	}
}

func testUniqueWhileLive(e *env) {
	// Scheduled, available, running and retryable all hold the key.
	p := uniqueJob(e, "live", "k")
	p.MaxAttempts = 5
	j := e.insertOne(p)
	expectDup := func(state string) {
		e.Helper()
		res := e.insertResults(uniqueJob(e, "live", "again"))
		if !res[0].Duplicate || res[0].Job.ID != j.ID {
			e.Fatalf("Insert with unique key \"live\" while job %d holding it is %s returned job %d with Duplicate=%v; want job %d with Duplicate=true", j.ID, state, res[0].Job.ID, res[0].Duplicate, j.ID)
		}
	}
	expectDup("available")
	c := e.claimOne("q", "w")
	expectDup("running")
	o := e.outcome(c, contract.OutcomeRetry)
	o.RunAt = e.now.Add(3600e9)
	e.apply(o)
	expectDup("retryable")
}

func testUniqueAfterFinal(e *env) {
	finishers := map[contract.State]func(j *contract.Job){
		contract.StateCompleted: func(j *contract.Job) { e.apply(e.outcome(j, contract.OutcomeComplete)) },
		contract.StateDiscarded: func(j *contract.Job) { e.apply(e.outcome(j, contract.OutcomeDiscard)) },
		contract.StateCancelled: func(j *contract.Job) {
			if _, err := e.s.Cancel(e.ctx, j.ID, e.now); err != nil {
				e.Fatalf("Cancel(%d): %v", j.ID, err)
			}
		},
	}
	for _, state := range []contract.State{contract.StateCompleted, contract.StateDiscarded, contract.StateCancelled} {
		key := "key-" + string(state)
		j := e.claimJob(uniqueJob(e, key, "k"), "w")
		finishers[state](j)
		e.expectState(j.ID, state, "setup")
		res := e.insertResults(uniqueJob(e, key, "k"))
		if res[0].Duplicate || res[0].Job.ID == j.ID {
			e.Errorf("Insert with unique key %q after the job holding it became %s returned job %d with Duplicate=%v; want a new job (keys are unique only among jobs not in a final state)", key, state, res[0].Job.ID, res[0].Duplicate)
		}
		// The new job must be claimable so the test's queue stays tidy.
		e.claimOne("q", "w")
	}
}

func testUniqueEmpty(e *env) {
	res := e.insertResults(e.job("q", "a"), e.job("q", "b"))
	res = append(res, e.insertResults(e.job("q", "c"))...)
	for i, r := range res {
		if r.Duplicate {
			e.Fatalf("job %d without a unique key was marked Duplicate; an empty UniqueKey means none", i)
		}
	}
}

func testUniqueConcurrent(e *env) {
	const (
		goroutines = 8
		keys       = 5
	)
	for k := range keys {
		key := fmt.Sprintf("concurrent-%d", k)
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			fresh   []int64
			holders = make(map[int64]bool)
		)
		for g := range goroutines {
			wg.Go(func() {
				p := uniqueJob(e, key, fmt.Sprintf("g%d", g))
				res, err := e.s.Insert(e.ctx, e.now, []contract.InsertParams{p})
				if err != nil {
					e.Errorf("concurrent Insert of unique key %q: unexpected error: %v (a collision is a Duplicate result, not an error; transient errors are retried inside the store)", key, err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if !res[0].Duplicate {
					fresh = append(fresh, res[0].Job.ID)
				}
				holders[res[0].Job.ID] = true
			})
		}
		wg.Wait()
		if e.Failed() {
			return
		}
		if len(fresh) != 1 || len(holders) != 1 {
			e.Fatalf("%d concurrent inserts of unique key %q created jobs %v and returned jobs %v; want exactly one new job, returned to every caller (enforce uniqueness with a unique index, not select-then-insert)", goroutines, key, fresh, holders)
		}
	}
	if n := e.stats()["q"].Counts[contract.StateAvailable]; n != keys {
		e.Fatalf("after concurrent inserts of %d unique keys Stats counts %d jobs; want %d", keys, n, keys)
	}
}
