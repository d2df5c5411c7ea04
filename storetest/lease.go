package storetest

import (
	"strings"
	"time"

	"github.com/backlogq/backlog/core"
)

var leaseTests = []test{
	{"lease/extend-touches-only-that-workers-running-jobs", testExtendLeases},
	{"lease/extended-lease-is-not-rescued", testExtendedNotRescued},
	{"rescue/takes-only-expired-leases", testRescueOnlyExpired},
	{"rescue/makes-job-available-with-lost-worker-error", testRescueAvailable},
	{"rescue/rescued-job-is-claimable-with-next-attempt", testRescueClaimable},
	{"rescue/discards-when-attempts-are-used-up", testRescueDiscardAttempts},
	{"rescue/discards-when-deadline-has-passed", testRescueDiscardDeadline},
	{"rescue/respects-limit", testRescueLimit},
}

var deadlineTests = []test{
	{"deadline/discard-expired-takes-only-pending-jobs-past-deadline", testDiscardExpired},
	{"deadline/discard-expired-respects-limit", testDiscardExpiredLimit},
}

// rescue calls Rescue at e.now and fails on error.
func (e *env) rescue(limit int) []*core.Job {
	e.Helper()
	got, err := e.s.Rescue(e.ctx, e.now, limit)
	if err != nil {
		e.Fatalf("Rescue(now %s, limit %d): unexpected error: %v", ts(e.now), limit, err)
	}
	if len(got) > limit {
		e.Fatalf("Rescue with limit %d returned %d jobs", limit, len(got))
	}
	return got
}

func testExtendLeases(e *env) {
	insertMany(e, "q", 4)
	a := e.claim("q", "w-a", 2)
	b := e.claim("q", "w-b", 2)
	// A job w-a finished: it must not get a lease back.
	done := e.claimJob(e.job("done", "k"), "w-a")
	e.apply(e.outcome(done, core.OutcomeComplete))
	if len(a) != 2 || len(b) != 2 {
		e.Fatalf("setup: claimed %d and %d jobs; want 2 and 2", len(a), len(b))
	}
	bBefore := []*core.Job{e.get(b[0].ID), e.get(b[1].ID)}

	until := e.now.Add(10 * time.Minute)
	n, err := e.s.ExtendLeases(e.ctx, "w-a", until)
	if err != nil {
		e.Fatalf("ExtendLeases: unexpected error: %v", err)
	}
	if n != 2 {
		e.Errorf("ExtendLeases(\"w-a\") reported %d jobs touched; want 2 (w-a holds 2 running jobs and 1 completed one)", n)
	}
	for _, j := range a {
		if d := diffTime("LeaseUntil", e.get(j.ID).LeaseUntil, until); len(d) > 0 {
			e.Errorf("job %d held by w-a after ExtendLeases: %s", j.ID, d[0])
		}
	}
	for _, j := range bBefore {
		e.expectUnchanged(j, "ExtendLeases of another worker")
	}
	if got := e.get(done.ID); !got.LeaseUntil.IsZero() || got.State != core.StateCompleted {
		e.Errorf("ExtendLeases(\"w-a\") touched completed job %d (state %q, LeaseUntil %s); it must only extend running jobs", done.ID, got.State, ts(got.LeaseUntil))
	}
	if n, err := e.s.ExtendLeases(e.ctx, "nobody", until); err != nil || n != 0 {
		e.Errorf("ExtendLeases of a worker holding nothing returned (%d, %s); want (0, nil)", n, errMsg(err))
	}
}

func testExtendedNotRescued(e *env) {
	j := e.claimJob(e.job("q", "k"), "w")
	if _, err := e.s.ExtendLeases(e.ctx, "w", e.now.Add(2*lease)); err != nil {
		e.Fatalf("ExtendLeases: %v", err)
	}
	e.advance(lease + time.Second) // past the original lease, before the extended one
	if got := e.rescue(10); len(got) != 0 {
		e.Fatalf("Rescue took job(s) %v whose lease was extended to %s (now %s)", ids(got), ts(e.now.Add(-lease-time.Second).Add(2*lease)), ts(e.now))
	}
	e.expectState(j.ID, core.StateRunning, "its extended lease has not expired")
}

func testRescueOnlyExpired(e *env) {
	mk := func(worker string, leaseUntil time.Time) *core.Job {
		j := e.insertOne(e.job("q-"+worker, "k"))
		got := e.claimWith(core.ClaimParams{Queue: "q-" + worker, WorkerID: worker, Limit: 1, Now: e.now, LeaseUntil: leaseUntil})
		if len(got) != 1 || got[0].ID != j.ID {
			e.Fatalf("setup: claim of job %d returned %v", j.ID, ids(got))
		}
		return got[0]
	}
	e.advance(time.Hour)
	expired := mk("expired", e.now.Add(-time.Microsecond))
	atNow := mk("at-now", e.now)
	future := mk("future", e.now.Add(time.Minute))
	pending := e.insertOne(e.job("pending", "k"))
	beforeAtNow, beforeFuture, beforePending := e.get(atNow.ID), e.get(future.ID), e.get(pending.ID)

	got := e.rescue(10)
	if len(got) != 1 || got[0].ID != expired.ID {
		e.Fatalf("Rescue at %s returned %v; want only job %d, whose lease ended 1µs before now (a lease ending exactly now, %d, or later, %d, has not expired)", ts(e.now), ids(got), expired.ID, atNow.ID, future.ID)
	}
	e.expectUnchanged(beforeAtNow, "Rescue of a lease ending exactly now")
	e.expectUnchanged(beforeFuture, "Rescue of an unexpired lease")
	e.expectUnchanged(beforePending, "Rescue of a job that is not running")
}

func testRescueAvailable(e *env) {
	j := e.claimJob(e.job("q", "k"), "lost-worker-42")
	e.advance(lease + time.Second)
	got := e.rescue(10)
	if len(got) != 1 {
		e.Fatalf("Rescue returned %d jobs; want the 1 job whose lease expired", len(got))
	}
	checkRescued(e, got[0], j, core.StateAvailable)
	checkRescued(e, e.get(j.ID), j, core.StateAvailable)
}

// checkRescued checks a job rescued at e.now from the running job before,
// after its lease expired.
func checkRescued(e *env, got, before *core.Job, state core.State) {
	e.Helper()
	checkHandedBack(e, got, before, state, "lease expired at ")
}

// checkHandedBack checks a job handed back at e.now from the running job
// before by Rescue or RescueWorkers; cause is the contract's wording after
// "worker <id> lost: ".
func checkHandedBack(e *env, got, before *core.Job, state core.State, cause string) {
	e.Helper()
	want := *before
	want.State = state
	want.LeaseUntil = time.Time{}
	if state == core.StateAvailable {
		want.RunAt = e.now
	} else {
		want.FinishedAt = e.now
	}
	if len(got.Errors) == len(before.Errors)+1 {
		last := got.Errors[len(got.Errors)-1]
		want.Errors = append(append([]core.AttemptError(nil), before.Errors...), core.AttemptError{Attempt: before.Attempt, At: e.now, Error: last.Error, Trace: last.Trace})
		if prefix := "worker " + before.WorkerID + " lost: " + cause; !strings.HasPrefix(last.Error, prefix) {
			e.Errorf("the rescue error entry of job %d reads %q; the contract's wording is %q followed by a time (RFC 3339)", before.ID, last.Error, prefix)
		}
	} else {
		want.Errors = append(append([]core.AttemptError(nil), before.Errors...), core.AttemptError{Attempt: before.Attempt, At: e.now, Error: "worker " + before.WorkerID + " lost: …"})
	}
	if d := diffJob(got, &want); len(d) > 0 {
		e.Errorf("rescued job %d must be %s (RunAt=now when available, FinishedAt=now when discarded, lease cleared) with one error entry for attempt %d at now:\n%s", before.ID, state, before.Attempt, lines(d))
	}
}

func testRescueClaimable(e *env) {
	j := e.claimJob(e.job("q", "k"), "w1")
	e.advance(lease + time.Second)
	e.rescue(10)
	again := e.claimOne("q", "w2")
	if again.ID != j.ID || again.Attempt != 2 || again.WorkerID != "w2" {
		e.Fatalf("claim after rescue returned job %d at attempt %d for %q; want job %d at attempt 2 for \"w2\"", again.ID, again.Attempt, again.WorkerID, j.ID)
	}
}

func testRescueDiscardAttempts(e *env) {
	p := e.job("q", "k")
	p.MaxAttempts = 1
	j := e.claimJob(p, "w")
	e.advance(lease + time.Second)
	got := e.rescue(10)
	if len(got) != 1 {
		e.Fatalf("Rescue returned %d jobs; want 1", len(got))
	}
	checkRescued(e, got[0], j, core.StateDiscarded)
	checkRescued(e, e.get(j.ID), j, core.StateDiscarded)
}

func testRescueDiscardDeadline(e *env) {
	p := e.job("q", "k")
	p.Deadline = e.now.Add(lease / 2)
	p.MaxAttempts = 10
	j := e.claimJob(p, "w")
	e.advance(lease + time.Second)
	got := e.rescue(10)
	if len(got) != 1 {
		e.Fatalf("Rescue returned %d jobs; want 1", len(got))
	}
	checkRescued(e, got[0], j, core.StateDiscarded)
}

func testRescueLimit(e *env) {
	insertMany(e, "q", 7)
	if n := len(e.claim("q", "w", 10)); n != 7 {
		e.Fatalf("setup: claimed %d of 7", n)
	}
	e.advance(lease + time.Second)
	var sizes []int
	for range 4 {
		sizes = append(sizes, len(e.rescue(3)))
	}
	if sizes[0] != 3 || sizes[1] != 3 || sizes[2] != 1 || sizes[3] != 0 {
		e.Fatalf("four Rescue calls with limit 3 over 7 expired leases returned %v jobs; want [3 3 1 0]", sizes)
	}
}

func testDiscardExpired(e *env) {
	deadline := e.now.Add(time.Hour)
	mk := func(queue string) core.InsertParams {
		p := e.job(queue, "k")
		p.Deadline = deadline
		return p
	}
	avail := e.insertOne(mk("avail"))
	schedP := mk("sched")
	schedP.RunAt = deadline.Add(-time.Minute)
	sched := e.insertOne(schedP)
	retry := e.claimJob(mk("retry"), "w")
	o := e.outcome(retry, core.OutcomeRetry)
	o.RunAt = deadline.Add(time.Hour)
	e.apply(o)
	running := e.claimJob(mk("running"), "w")
	done := e.claimJob(mk("done"), "w")
	e.apply(e.outcome(done, core.OutcomeComplete))
	lateP := mk("late")
	lateP.Deadline = deadline.Add(time.Hour)
	late := e.insertOne(lateP)
	none := e.insertOne(e.job("none", "k"))

	e.now = deadline // a deadline exactly now has not passed
	if n, err := e.s.DiscardExpired(e.ctx, e.now, 100); err != nil || n != 0 {
		e.Fatalf("DiscardExpired at exactly the deadline returned (%d, %s); want (0, nil): only deadlines before now have passed", n, errMsg(err))
	}
	keep := []*core.Job{e.get(running.ID), e.get(done.ID), e.get(late.ID), e.get(none.ID)}
	e.advance(time.Second)
	n, err := e.s.DiscardExpired(e.ctx, e.now, 100)
	if err != nil {
		e.Fatalf("DiscardExpired: unexpected error: %v", err)
	}
	if n != 3 {
		e.Errorf("DiscardExpired returned %d; want 3 (the available, scheduled and retryable jobs past their deadline)", n)
	}
	for _, j := range []*core.Job{avail, sched, retry} {
		got := e.get(j.ID)
		if got.State != core.StateDiscarded {
			e.Errorf("job %d (queue %q) past its deadline has state %q after DiscardExpired; want discarded", j.ID, j.Queue, got.State)
			continue
		}
		if d := diffTime("FinishedAt", got.FinishedAt, e.now); len(d) > 0 {
			e.Errorf("job %d discarded by DiscardExpired: %s", j.ID, d[0])
		}
		if len(got.Errors) == 0 || got.Errors[len(got.Errors)-1].Error == "" {
			e.Errorf("job %d discarded by DiscardExpired has errors %+v; want an entry saying the deadline passed", j.ID, got.Errors)
		} else if last := got.Errors[len(got.Errors)-1]; !last.At.Equal(e.now) {
			e.Errorf("job %d: the deadline error entry has At %s; want now %s", j.ID, ts(last.At), ts(e.now))
		}
	}
	for _, j := range keep {
		e.expectUnchanged(j, "DiscardExpired (running, final, not yet expired and deadline-less jobs are not its business)")
	}
}

func testDiscardExpiredLimit(e *env) {
	ps := make([]core.InsertParams, 5)
	for i := range ps {
		ps[i] = e.job("q", "k")
		ps[i].Deadline = e.now.Add(time.Minute)
	}
	e.insert(ps...)
	e.advance(time.Hour)
	var sizes []int
	for range 3 {
		n, err := e.s.DiscardExpired(e.ctx, e.now, 2)
		if err != nil {
			e.Fatalf("DiscardExpired: %v", err)
		}
		sizes = append(sizes, n)
	}
	if sizes[0] != 2 || sizes[1] != 2 || sizes[2] != 1 {
		e.Fatalf("three DiscardExpired calls with limit 2 over 5 expired jobs returned %v; want [2 2 1]", sizes)
	}
}
