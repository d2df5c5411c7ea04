package storetest

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/backlogq/backlog/core"
)

var uniqueTests = []test{
	{"unique/duplicate-returns-existing-job", testUniqueDuplicate},
	{"unique/same-key-twice-in-one-batch", testUniqueInBatch},
	{"unique/key-stays-taken-until-job-is-final", testUniqueWhileLive},
	{"unique/key-is-free-again-after-job-is-final", testUniqueAfterFinal},
	{"unique/empty-key-is-not-unique", testUniqueEmpty},
	{"unique/concurrent-inserts-of-one-key-yield-one-job", testUniqueConcurrent},
}

func uniqueJob(e *env, key, kind string) core.InsertParams {
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
	if st := e.stats()["q"].Counts; st[core.StateAvailable] != 1 || nonZero(st) != 1 {
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
	if n := e.stats()["q"].Counts[core.StateAvailable]; n != 3 {
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
	o := e.outcome(c, core.OutcomeRetry)
	o.RunAt = e.now.Add(3600e9)
	e.apply(o)
	expectDup("retryable")
}

func testUniqueAfterFinal(e *env) {
	finishers := map[core.State]func(j *core.Job){
		core.StateCompleted: func(j *core.Job) { e.apply(e.outcome(j, core.OutcomeComplete)) },
		core.StateDiscarded: func(j *core.Job) { e.apply(e.outcome(j, core.OutcomeDiscard)) },
		core.StateCancelled: func(j *core.Job) {
			if _, err := e.s.Cancel(e.ctx, j.ID, e.now); err != nil {
				e.Fatalf("Cancel(%d): %v", j.ID, err)
			}
		},
	}
	for _, state := range []core.State{core.StateCompleted, core.StateDiscarded, core.StateCancelled} {
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
				res, err := e.s.Insert(e.ctx, e.now, []core.InsertParams{p})
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
	if n := e.stats()["q"].Counts[core.StateAvailable]; n != keys {
		e.Fatalf("after concurrent inserts of %d unique keys Stats counts %d jobs; want %d", keys, n, keys)
	}
}
