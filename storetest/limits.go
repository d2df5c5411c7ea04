package storetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
)

var limitsTests = []test{
	{"limits/set-init-and-read-back", testLimitsRoundTrip},
	{"limits/queue-max-running", testLimitsQueue},
	{"limits/kind-max-running", testLimitsKind},
	{"limits/partition-max-running", testLimitsPartition},
	{"limits/over-limit-jobs-do-not-block", testLimitsNoBlock},
	{"limits/freed-slot-reused-at-once", testLimitsFreedSlot},
	{"limits/rescue-and-cancel-free-the-slot", testLimitsRescueCancel},
	{"limits/other-queues-and-pause-unaffected", testLimitsOthers},
	{"limits/concurrent-claimers-never-exceed", testLimitsConcurrent},
	{"limits/concurrent-claimers-ample-room-never-exceed", testLimitsConcurrentAmple},
}

// limiter returns s's contract.QueueLimiter, skipping when it has none.
func (e *env) limiter(s contract.Store) contract.QueueLimiter {
	e.Helper()
	l, ok := s.(contract.QueueLimiter)
	if !ok {
		e.Skip("the store does not implement contract.QueueLimiter")
	}
	return l
}

// setLimits stores limits of queue and fails on error.
func (e *env) setLimits(queue string, l contract.QueueLimits) {
	e.Helper()
	if err := e.limiter(e.s).SetQueueLimits(e.ctx, queue, l, e.now); err != nil {
		e.Fatalf("SetQueueLimits(%q, %+v): unexpected error: %v", queue, l, err)
	}
}

// jobIn returns insert parameters for a due job of kind with partition key
// part in queue.
func (e *env) jobIn(queue, kind, part string) contract.InsertParams {
	p := e.job(queue, kind)
	p.PartitionKey = part
	return p
}

// expectClaimIDs claims up to limit jobs of queue and fails unless it
// returns exactly want, in that order.
func (e *env) expectClaimIDs(queue string, limit int, want []*contract.Job, why string) []*contract.Job {
	e.Helper()
	got := e.claim(queue, "w", limit)
	if !slices.Equal(ids(got), ids(want)) {
		e.Fatalf("Claim(queue %q, limit %d) returned jobs %v; want %v (%s)", queue, limit, ids(got), ids(want), why)
	}
	return got
}

func testLimitsRoundTrip(e *env) {
	ql := e.limiter(e.s)
	got, err := ql.QueueLimits(e.ctx, "never-set")
	if err != nil || !got.IsZero() {
		e.Fatalf("QueueLimits of a queue without limits returned %+v, %v; want zero limits and a nil error", got, err)
	}
	e.pause("paused-first")
	l := contract.QueueLimits{MaxRunning: 7, MaxRunningPerKind: map[string]int{"mail": 2, "résumé ✓": 1, "unlimited": 0}, MaxRunningPerPartition: 3}
	e.setLimits("paused-first", l)
	got, err = ql.QueueLimits(e.ctx, "paused-first")
	if err != nil {
		e.Fatalf("QueueLimits: unexpected error: %v", err)
	}
	want := l.Normalized()
	if got.MaxRunning != want.MaxRunning || got.MaxRunningPerPartition != want.MaxRunningPerPartition || !maps.Equal(got.MaxRunningPerKind, want.MaxRunningPerKind) {
		e.Fatalf("QueueLimits after SetQueueLimits(%+v) returned %+v; want %+v (per-kind limits of 0 are dropped)", l, got, want)
	}
	if !e.stats()["paused-first"].Paused {
		e.Fatal("SetQueueLimits of a paused queue lifted its pause; the limits and the pause are independent")
	}
	// InitQueueLimits stores nothing once limits were set, even to zero.
	stored, created, err := ql.InitQueueLimits(e.ctx, "paused-first", contract.QueueLimits{MaxRunning: 1}, e.now)
	if err != nil || created || stored.MaxRunning != 7 {
		e.Fatalf("InitQueueLimits of a queue with limits returned %+v, created=%v, %v; want the stored limits (MaxRunning 7), created=false", stored, created, err)
	}
	e.setLimits("paused-first", contract.QueueLimits{})
	if got, _ := ql.QueueLimits(e.ctx, "paused-first"); !got.IsZero() {
		e.Fatalf("QueueLimits after setting zero limits returned %+v; want zero", got)
	}
	if _, created, _ := ql.InitQueueLimits(e.ctx, "paused-first", contract.QueueLimits{MaxRunning: 1}, e.now); created {
		e.Fatal("InitQueueLimits stored limits on a queue whose limits were set to zero; set limits, zero included, win over InitQueueLimits")
	}
	// A pause alone is not limits: InitQueueLimits stores them.
	e.pause("pause-only")
	stored, created, err = ql.InitQueueLimits(e.ctx, "pause-only", contract.QueueLimits{MaxRunning: 4}, e.now)
	if err != nil || !created || stored.MaxRunning != 4 {
		e.Fatalf("InitQueueLimits of a queue with only a pause returned %+v, created=%v, %v; want MaxRunning 4, created=true", stored, created, err)
	}
	stored, created, err = ql.InitQueueLimits(e.ctx, "fresh", contract.QueueLimits{MaxRunningPerPartition: 2}, e.now)
	if err != nil || !created || stored.MaxRunningPerPartition != 2 {
		e.Fatalf("InitQueueLimits of a new queue returned %+v, created=%v, %v; want MaxRunningPerPartition 2, created=true", stored, created, err)
	}
	if e.stats()["fresh"].Paused {
		e.Fatal("InitQueueLimits paused the queue it created a record for")
	}
	if err := ql.SetQueueLimits(e.ctx, "fresh", contract.QueueLimits{MaxRunning: -1}, e.now); !errors.Is(err, contract.ErrInvalidJob) {
		e.Fatalf("SetQueueLimits with a negative limit returned %v; want an error wrapping core.ErrInvalidJob", err)
	}
}

func testLimitsQueue(e *env) {
	e.setLimits("q", contract.QueueLimits{MaxRunning: 3})
	jobs := e.insert(e.job("q", "a"), e.job("q", "b"), e.job("q", "a"), e.job("q", "c"), e.job("q", "a"))
	e.expectClaimIDs("q", 2, jobs[:2], "MaxRunning 3 leaves room for 2")
	e.expectClaimIDs("q", 10, jobs[2:3], "2 running under MaxRunning 3 leave room for 1")
	e.expectClaimIDs("q", 10, nil, "3 running under MaxRunning 3 leave no room")
}

func testLimitsKind(e *env) {
	e.setLimits("q", contract.QueueLimits{MaxRunningPerKind: map[string]int{"slow": 2}})
	jobs := e.insert(e.job("q", "slow"), e.job("q", "slow"), e.job("q", "slow"), e.job("q", "fast"), e.job("q", "fast"))
	e.expectClaimIDs("q", 10, []*contract.Job{jobs[0], jobs[1], jobs[3], jobs[4]}, `kind "slow" at most 2 running; kind "fast" unlimited`)
	e.expectClaimIDs("q", 10, nil, `kind "slow" is full`)
}

func testLimitsPartition(e *env) {
	e.setLimits("q", contract.QueueLimits{MaxRunningPerPartition: 2})
	jobs := e.insert(
		e.jobIn("q", "k", "acme"), e.jobIn("q", "k", "acme"), e.jobIn("q", "k", "acme"),
		e.jobIn("q", "k", "globex"), e.jobIn("q", "k", ""), e.jobIn("q", "k", ""), e.jobIn("q", "k", ""),
	)
	e.expectClaimIDs("q", 2, jobs[:2], "two acme jobs fit MaxRunningPerPartition 2")
	e.expectClaimIDs("q", 10, jobs[3:], "acme is full; globex has room; jobs without a partition key are not bounded per partition")
	e.expectClaimIDs("q", 10, nil, "acme is full and nothing else is due")
}

func testLimitsNoBlock(e *env) {
	e.setLimits("q", contract.QueueLimits{MaxRunning: 5, MaxRunningPerKind: map[string]int{"hog": 1}, MaxRunningPerPartition: 1})
	var ps []contract.InsertParams
	for range 30 {
		ps = append(ps, e.jobIn("q", "hog", ""))
	}
	for range 30 {
		ps = append(ps, e.jobIn("q", "k", "big-tenant"))
	}
	ps = append(ps, e.jobIn("q", "k", "small-1"), e.jobIn("q", "k", "small-2"), e.jobIn("q", "k", ""))
	jobs := e.insert(ps...)
	want := []*contract.Job{jobs[0], jobs[30], jobs[60], jobs[61], jobs[62]}
	e.expectClaimIDs("q", 10, want, "the hog kind and the big tenant have room for one job each; the jobs behind them in claim order must be claimed, not blocked")
}

func testLimitsFreedSlot(e *env) {
	e.setLimits("q", contract.QueueLimits{MaxRunning: 1, MaxRunningPerPartition: 1})
	jobs := e.insert(e.jobIn("q", "k", "t"), e.jobIn("q", "k", "t"), e.jobIn("q", "k", "t"), e.jobIn("q", "k", "t"))
	first := e.expectClaimIDs("q", 5, jobs[:1], "MaxRunning 1")
	e.apply(e.outcome(first[0], contract.OutcomeComplete))
	second := e.expectClaimIDs("q", 5, jobs[1:2], "a completion frees its slot at once")
	o := e.outcome(second[0], contract.OutcomeRetry)
	o.RunAt = e.now.Add(time.Hour)
	o.Error = &contract.AttemptError{Attempt: 1, At: e.now, Error: "boom"}
	e.apply(o)
	third := e.expectClaimIDs("q", 5, jobs[2:3], "a retry frees its slot at once")
	o = e.outcome(third[0], contract.OutcomeSnooze)
	o.RunAt = e.now.Add(time.Hour)
	e.apply(o)
	e.expectClaimIDs("q", 5, jobs[3:4], "a snooze frees its slot at once")
}

func testLimitsRescueCancel(e *env) {
	e.setLimits("q", contract.QueueLimits{MaxRunning: 1})
	jobs := e.insert(e.job("q", "k"), e.job("q", "k"), e.job("q", "k"))
	first := e.expectClaimIDs("q", 5, jobs[:1], "MaxRunning 1")
	if _, err := e.s.Cancel(e.ctx, first[0].ID, e.now); err != nil {
		e.Fatalf("Cancel(%d): %v", first[0].ID, err)
	}
	second := e.expectClaimIDs("q", 5, jobs[1:2], "a cancel of the running job frees its slot at once")
	e.advance(lease + time.Second)
	got, err := e.s.Rescue(e.ctx, e.now, 10, e.decide(core.CauseLeaseExpired))
	if err != nil || len(got) != 1 || got[0].ID != second[0].ID {
		e.Fatalf("Rescue after the lease of job %d ran out returned %v, %v; want that job", second[0].ID, ids(got), err)
	}
	if got := e.claim("q", "w", 5); len(got) != 1 {
		e.Fatalf("Claim after Rescue returned jobs %v; want 1 job (the rescued one, due again, or the next): a rescue frees its slot at once", ids(got))
	}
}

func testLimitsOthers(e *env) {
	e.setLimits("limited", contract.QueueLimits{MaxRunning: 1})
	free := e.insert(e.job("free", "k"), e.job("free", "k"), e.job("free", "k"))
	e.expectClaimIDs("free", 10, free, "limits of another queue do not bound this one")
	lim := e.insert(e.job("limited", "k"), e.job("limited", "k"))
	e.pause("limited")
	e.claimPaused("limited")
	e.resume("limited")
	e.expectClaimIDs("limited", 10, lim[:1], "MaxRunning 1 after the pause was lifted")
	e.setLimits("limited", contract.QueueLimits{})
	e.expectClaimIDs("limited", 10, lim[1:], "zero limits lift every limit")
}

// testLimitsConcurrent runs claimers on two handles that claim, hold
// briefly and complete in a loop, and checks the limits two ways: a
// ledger of jobs known to be running (counted after their claim returned,
// until their finish is sent: an undercount of the truth, so any excess is
// real), and a List of the running rows right after every claim (one
// instant of the database).
func testLimitsConcurrent(e *env) {
	limitsConcurrent(e, contract.QueueLimits{MaxRunning: 6, MaxRunningPerKind: map[string]int{"a": 2}, MaxRunningPerPartition: 2})
}

// testLimitsConcurrentAmple is testLimitsConcurrent with room for a
// whole claim of 3 at times (storekit.ClaimRoom.Ample: kind "a" at most 3,
// none of it running), the case a store may claim in one statement, and
// too little at others (one "a" running): never exceeded either way.
func testLimitsConcurrentAmple(e *env) {
	limitsConcurrent(e, contract.QueueLimits{MaxRunning: 12, MaxRunningPerKind: map[string]int{"a": 3}})
}

// limitsConcurrent runs 8 claimers on two handles over a queue with
// limits (kind "a" limited, partitions t1…t4), checking a ledger of
// claimed jobs and a listing after every claim.
func limitsConcurrent(e *env, limits contract.QueueLimits) {
	const (
		claimers = 8
		batch    = 3
		total    = 400
	)
	e.setLimits("lim", limits)
	kinds := []string{"a", "b", "c"}
	parts := []string{"t1", "t2", "t3", "t4", ""}
	var ps []contract.InsertParams
	for i := range total {
		ps = append(ps, e.jobIn("lim", kinds[i%len(kinds)], parts[(i/3)%len(parts)]))
	}
	for len(ps) > 0 {
		n := min(len(ps), 200)
		e.insert(ps[:n]...)
		ps = ps[n:]
	}
	stores := []contract.Store{e.s}
	if e.f.Reopen != nil {
		s2 := e.f.Reopen(e.T, e.s)
		if s2 == nil {
			e.Fatal("Factory.Reopen returned a nil store")
		}
		stores = append(stores, s2)
	}

	var (
		mu     sync.Mutex
		run    = map[int64]*contract.Job{}
		done   atomic.Int64
		failed atomic.Bool
	)
	check := func(what string, jobs []*contract.Job) {
		all, perKind, perPart := 0, map[string]int{}, map[string]int{}
		for _, j := range jobs {
			all++
			perKind[j.Kind]++
			if j.PartitionKey != "" {
				perPart[j.PartitionKey]++
			}
		}
		bad := all > limits.MaxRunning || perKind["a"] > limits.MaxRunningPerKind["a"]
		for _, n := range perPart {
			bad = bad || (limits.MaxRunningPerPartition > 0 && n > limits.MaxRunningPerPartition)
		}
		if bad && failed.CompareAndSwap(false, true) {
			e.Errorf("%s: %d running (per kind %v, per partition %v) exceeds the limits %+v: claims must never let running jobs exceed a limit, whatever the number of claimers and handles", what, all, perKind, perPart, limits)
		}
	}
	ctx, cancel := context.WithTimeout(e.ctx, 2*time.Minute)
	defer cancel()
	now := e.now
	var wg sync.WaitGroup
	for c := range claimers {
		s := stores[c%len(stores)]
		worker := fmt.Sprintf("claimer-%d", c)
		wg.Go(func() {
			for done.Load() < total && !failed.Load() {
				if ctx.Err() != nil {
					e.Errorf("%s: gave up after 2 minutes with %d of %d jobs completed: claims of a limited queue stop returning jobs that fit", worker, done.Load(), total)
					return
				}
				got, err := s.Claim(ctx, contract.ClaimParams{Queue: "lim", WorkerID: worker, Limit: batch, Now: now, LeaseUntil: now.Add(time.Hour)})
				if err != nil {
					e.Errorf("%s: Claim: unexpected error under concurrency: %v", worker, err)
					return
				}
				if len(got) == 0 {
					time.Sleep(time.Millisecond)
					continue
				}
				mu.Lock()
				for _, j := range got {
					run[j.ID] = j
				}
				check("the ledger of claimed, unfinished jobs", slices.Collect(maps.Values(run)))
				mu.Unlock()
				listed, err := s.List(ctx, contract.ListParams{Queue: "lim", States: []contract.State{contract.StateRunning}, Limit: 1000})
				if err != nil {
					e.Errorf("%s: List: %v", worker, err)
					return
				}
				check("List of running jobs right after a claim", listed)
				time.Sleep(time.Duration(rand.IntN(1500)) * time.Microsecond)
				outs := make([]contract.Outcome, len(got))
				mu.Lock()
				for i, j := range got {
					delete(run, j.ID)
					outs[i] = contract.Outcome{JobID: j.ID, WorkerID: worker, ClaimSeq: j.ClaimSeq, Attempt: j.Attempt, Kind: contract.OutcomeComplete, At: now}
				}
				mu.Unlock()
				res, err := s.Finish(ctx, outs)
				if err != nil {
					e.Errorf("%s: Finish: unexpected error: %v", worker, err)
					return
				}
				for _, r := range res {
					if !r.Applied {
						e.Errorf("%s: completion of job %d it had just claimed was not applied", worker, r.JobID)
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
	counts := e.stats()["lim"].Counts
	if counts[contract.StateCompleted] != total || nonZero(counts) != 1 {
		e.Fatalf("after the claimers drained the limited queue, Stats counts %v; want %d completed and nothing else", counts, total)
	}
}
