package storetest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

var claimTests = []test{
	{"claim/orders-by-priority-then-run-at-then-id", testClaimOrder},
	{"claim/never-returns-future-jobs", testClaimFuture},
	{"claim/takes-scheduled-and-retryable-jobs-once-due", testClaimOnceDue},
	{"claim/respects-limit", testClaimLimit},
	{"claim/takes-only-from-the-named-queue", testClaimQueue},
	{"claim/marks-jobs-running-for-the-worker", testClaimMarks},
	{"claim/empty-queue-returns-nothing", testClaimEmpty},
	{"claim/concurrent-claimers-never-share-a-job", testClaimConcurrent},
	{"claim/limit-below-one-is-an-invalid-argument", testClaimLimitBelowOne},
}

func testClaimOrder(e *env) {
	// Inserted out of order on purpose. Expected claim order: priority,
	// then run_at, then id.
	type spec struct {
		name     string
		priority int
		runAgo   time.Duration
	}
	specs := []spec{
		{"p5-old", 5, 3 * time.Minute},
		{"p1-new", 1, 1 * time.Minute},
		{"p10-oldest", 10, 10 * time.Minute},
		{"p5-new-a", 5, 1 * time.Minute},
		{"p1-old", 1, 2 * time.Minute},
		{"p5-new-b", 5, 1 * time.Minute}, // same priority and run_at as p5-new-a: id decides
		{"p3-now", 3, 0},
	}
	want := []string{"p1-old", "p1-new", "p3-now", "p5-old", "p5-new-a", "p5-new-b", "p10-oldest"}
	for _, s := range specs {
		p := e.job("q", s.name)
		p.Priority = s.priority
		p.RunAt = e.now.Add(-s.runAgo)
		e.insertOne(p)
	}

	// One at a time, then all at once on a fresh copy of the queue.
	var got []string
	for range want {
		j := e.claimOne("q", "w1")
		got = append(got, j.Kind)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		e.Errorf("claims of one job at a time returned kinds %v; want %v (priority 1 first, then earlier run_at, then lower id)", got, want)
	}

	for _, s := range specs {
		p := e.job("q2", s.name)
		p.Priority = s.priority
		p.RunAt = e.now.Add(-s.runAgo)
		e.insertOne(p)
	}
	got = got[:0]
	for _, j := range e.claim("q2", "w1", 100) {
		got = append(got, j.Kind)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		e.Errorf("one claim of all jobs returned kinds %v; want %v in claim order (priority 1 first, then earlier run_at, then lower id)", got, want)
	}
}

func testClaimFuture(e *env) {
	p := e.job("q", "future")
	p.RunAt = e.now.Add(time.Microsecond)
	j := e.insertOne(p)
	p.RunAt = e.now.Add(24 * time.Hour)
	far := e.insertOne(p)

	if got := e.claim("q", "w", 10); len(got) != 0 {
		e.Fatalf("Claim at %s returned job(s) %v whose RunAt is later (%s); a claim must never return a job that is not due", ts(e.now), ids(got), ts(got[0].RunAt))
	}
	e.advance(time.Microsecond)
	got := e.claim("q", "w", 10)
	if len(got) != 1 || got[0].ID != j.ID {
		e.Fatalf("Claim at exactly the job's RunAt %s returned %v; want [%d] (due means run_at ≤ now) and not job %d, due tomorrow", ts(e.now), ids(got), j.ID, far.ID)
	}
	e.expectState(far.ID, contract.StateScheduled, "a job due tomorrow stays scheduled")
}

func testClaimOnceDue(e *env) {
	p := e.job("q", "scheduled")
	p.RunAt = e.now.Add(time.Minute)
	sched := e.insertOne(p)

	r := e.claimJob(e.job("q", "retryable"), "w")
	o := e.outcome(r, contract.OutcomeRetry)
	o.RunAt = e.now.Add(2 * time.Minute)
	o.Error = &contract.AttemptError{Attempt: 1, At: e.now, Error: "boom"}
	e.apply(o)
	e.expectState(r.ID, contract.StateRetryable, "Finish with OutcomeRetry")

	if got := e.claim("q", "w", 10); len(got) != 0 {
		e.Fatalf("Claim returned %v before any job was due", ids(got))
	}
	e.advance(time.Minute)
	got := e.claim("q", "w", 10)
	if len(got) != 1 || got[0].ID != sched.ID {
		e.Fatalf("Claim once the scheduled job %d is due returned %v; want only it (a claim treats due scheduled jobs as available; no sweep promotes them first)", sched.ID, ids(got))
	}
	e.advance(time.Minute)
	got = e.claim("q", "w", 10)
	if len(got) != 1 || got[0].ID != r.ID {
		e.Fatalf("Claim once the retryable job %d is due returned %v; want only it (a claim treats due retryable jobs as available)", r.ID, ids(got))
	}
	if got[0].State != contract.StateRunning || got[0].Attempt != 2 {
		e.Fatalf("the retryable job claimed again has state %q, attempt %d; want running, attempt 2", got[0].State, got[0].Attempt)
	}
}

func testClaimLimit(e *env) {
	for range 10 {
		e.insertOne(e.job("q", "k"))
	}
	var sizes []int
	for range 5 {
		sizes = append(sizes, len(e.claim("q", "w", 3)))
	}
	if fmt.Sprint(sizes) != "[3 3 3 1 0]" {
		e.Fatalf("five claims with Limit 3 from a queue of 10 due jobs returned %v jobs; want [3 3 3 1 0]", sizes)
	}
}

func testClaimQueue(e *env) {
	for _, q := range []string{"alpha", "alph", "alpha2", "beta"} {
		e.insertOne(e.job(q, "in-"+q))
	}
	got := e.claim("alpha", "w", 10)
	if len(got) != 1 || got[0].Queue != "alpha" {
		var qs []string
		for _, j := range got {
			qs = append(qs, j.Queue)
		}
		e.Fatalf("Claim from queue \"alpha\" returned jobs of queues %q; want exactly the one job of \"alpha\" (queues \"alph\", \"alpha2\" and \"beta\" also have due jobs)", qs)
	}
	st := e.stats()
	for _, q := range []string{"alph", "alpha2", "beta"} {
		if st[q].Counts[contract.StateAvailable] != 1 {
			e.Errorf("queue %q has counts %v after a claim from \"alpha\"; want its job still available", q, st[q].Counts)
		}
	}
}

func testClaimMarks(e *env) {
	j := e.insertOne(e.job("q", "k"))
	e.advance(time.Second)
	until := e.now.Add(lease)
	got := e.claimWith(contract.ClaimParams{Queue: "q", WorkerID: "worker-🐝-1", Limit: 5, Now: e.now, LeaseUntil: until})
	if len(got) != 1 {
		e.Fatalf("Claim returned %d jobs; want the 1 due job", len(got))
	}
	want := *j
	want.State = contract.StateRunning
	want.Attempt = 1
	want.AttemptedAt = e.now
	want.WorkerID = "worker-🐝-1"
	want.LeaseUntil = until
	if d := diffJob(got[0], &want); len(d) > 0 {
		e.Errorf("the job returned by Claim is not the job as it now is (running, attempt+1, AttemptedAt=Now, WorkerID, LeaseUntil):\n%s", lines(d))
	}
	if d := diffJob(e.get(j.ID), &want); len(d) > 0 {
		e.Errorf("Get after Claim returns a job that is not running for the worker:\n%s", lines(d))
	}
}

func testClaimEmpty(e *env) {
	if got := e.claim("never-used", "w", 10); len(got) != 0 {
		e.Fatalf("Claim from a queue with no jobs returned %v", ids(got))
	}
}

// testClaimConcurrent runs claimers concurrently (half of them on a second
// handle when Factory.Reopen is set) until every job is completed, and
// checks that no job was ever handed to two claimers.
func testClaimConcurrent(e *env) {
	const (
		jobs     = 5000
		claimers = 8
		batch    = 50
	)
	insertMany(e, "race", jobs)

	stores := []contract.Store{e.s}
	if e.f.Reopen != nil {
		s2 := e.f.Reopen(e.T, e.s)
		if s2 == nil {
			e.Fatal("Factory.Reopen returned a nil store")
		}
		stores = append(stores, s2)
	}

	var (
		mu        sync.Mutex
		claimedBy = make(map[int64]int, jobs) // job id → claimer
		done      atomic.Int64
	)
	ctx, cancel := context.WithTimeout(e.ctx, 2*time.Minute)
	defer cancel()
	now := e.now
	var wg sync.WaitGroup
	for c := range claimers {
		s := stores[c%len(stores)]
		worker := fmt.Sprintf("claimer-%d", c)
		wg.Go(func() {
			for done.Load() < jobs {
				if ctx.Err() != nil {
					e.Errorf("%s: gave up after 2 minutes with %d of %d jobs completed: claims stop returning due jobs", worker, done.Load(), jobs)
					return
				}
				got, err := s.Claim(ctx, contract.ClaimParams{Queue: "race", WorkerID: worker, Limit: batch, Now: now, LeaseUntil: now.Add(time.Hour)})
				if err != nil {
					e.Errorf("%s: Claim: unexpected error under concurrency: %v (transient errors must be retried inside the store)", worker, err)
					return
				}
				if len(got) == 0 {
					time.Sleep(time.Millisecond) // others hold the rest; let them finish
					continue
				}
				outs := make([]contract.Outcome, len(got))
				mu.Lock()
				for i, j := range got {
					if other, dup := claimedBy[j.ID]; dup {
						e.Errorf("job %d was returned by Claim to claimer-%d and again to %s (attempt %d): claims must be exclusive across goroutines and handles", j.ID, other, worker, j.Attempt)
					}
					claimedBy[j.ID] = c
					if j.WorkerID != worker || j.Attempt != 1 {
						e.Errorf("%s claimed job %d showing WorkerID %q, attempt %d; want %q, attempt 1", worker, j.ID, j.WorkerID, j.Attempt, worker)
					}
					outs[i] = contract.Outcome{JobID: j.ID, WorkerID: worker, ClaimSeq: j.ClaimSeq, Attempt: j.Attempt, Kind: contract.OutcomeComplete, At: now}
				}
				mu.Unlock()
				res, err := s.Finish(ctx, outs)
				if err != nil {
					e.Errorf("%s: Finish: unexpected error under concurrency: %v", worker, err)
					return
				}
				for _, r := range res {
					if !r.Applied {
						e.Errorf("%s: completion of job %d it had just claimed was not applied: another claimer must have taken it too", worker, r.JobID)
					}
				}
				done.Add(int64(len(got)))
			}
		})
	}
	wg.Wait()
	if e.Failed() {
		return
	}
	if len(claimedBy) != jobs {
		e.Fatalf("%d distinct jobs were claimed; want all %d", len(claimedBy), jobs)
	}
	counts := e.stats()["race"].Counts
	if counts[contract.StateCompleted] != jobs || nonZero(counts) != 1 {
		e.Fatalf("after %d claimers drained the queue, Stats counts %v; want %d completed and nothing else", claimers, counts, jobs)
	}
	if left := e.claim("race", "w", 10); len(left) != 0 {
		e.Fatalf("the drained queue still hands out jobs %v", ids(left))
	}
}

// insertMany inserts n due jobs into queue in batches of 1000.
func insertMany(e *env, queue string, n int) []*contract.Job {
	e.Helper()
	var out []*contract.Job
	for n > 0 {
		b := min(n, 1000)
		ps := make([]contract.InsertParams, b)
		for i := range ps {
			ps[i] = e.job(queue, "k")
		}
		out = append(out, e.insert(ps...)...)
		n -= b
	}
	return out
}

// nonZero counts the states with a non-zero count.
func nonZero(m map[contract.State]int) int {
	n := 0
	for _, c := range m {
		if c != 0 {
			n++
		}
	}
	return n
}
