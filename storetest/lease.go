package storetest

import (
	"strings"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
)

var leaseTests = []test{
	{"lease/extend-touches-only-that-workers-running-jobs", testExtendLeases},
	{"lease/extend-touches-only-named-executions", testExtendOnlyNamed},
	{"lease/extended-lease-is-not-rescued", testExtendedNotRescued},
	{"rescue/takes-only-expired-leases", testRescueOnlyExpired},
	{"rescue/retries-job-with-the-engines-error-entry", testRescueAvailable},
	{"rescue/applies-the-rescue-funcs-decision", testRescueAppliesDecision},
	{"rescue/keeps-the-jobs-place-in-the-queue", testRescueKeepsPlace},
	{"rescue/rescued-job-is-claimable-with-next-attempt", testRescueClaimable},
	{"rescue/discards-when-attempts-are-used-up", testRescueDiscardAttempts},
	{"rescue/discards-when-deadline-has-passed", testRescueDiscardDeadline},
	{"rescue/respects-limit", testRescueLimit},
	{"lease/extend-with-non-utc-time-returns-utc", testExtendNonUTC},
	{"rescue/takes-the-oldest-lease-first", testRescueOldestLeaseFirst},
}

var deadlineTests = []test{
	{"deadline/discard-expired-takes-only-pending-jobs-past-deadline", testDiscardExpired},
	{"deadline/discard-expired-respects-limit", testDiscardExpiredLimit},
}

// rescue calls Rescue at e.now with the engine's decision and fails on
// error.
func (e *env) rescue(limit int) []*contract.Job {
	e.Helper()
	got, err := e.s.Rescue(e.ctx, e.now, limit, e.decide(core.CauseLeaseExpired))
	if err != nil {
		e.Fatalf("Rescue(now %s, limit %d): unexpected error: %v", ts(e.now), limit, err)
	}
	if len(got) > limit {
		e.Fatalf("Rescue with limit %d returned %d jobs", limit, len(got))
	}
	return got
}

// decide is the engine's rescue decision (core.DecideRescue) at e.now.
func (e *env) decide(cause string) contract.RescueFunc {
	now := e.now
	return func(j *contract.Job, lastSeen time.Time) contract.Outcome {
		return core.DecideRescue(j, cause, lastSeen, now)
	}
}

// leases names the executions of jobs as ExtendLeases takes them.
func leases(jobs ...*contract.Job) []contract.Lease {
	out := make([]contract.Lease, len(jobs))
	for i, j := range jobs {
		out[i] = contract.Lease{JobID: j.ID, ClaimSeq: j.ClaimSeq}
	}
	return out
}

func testExtendLeases(e *env) {
	insertMany(e, "q", 4)
	a := e.claim("q", "w-a", 2)
	b := e.claim("q", "w-b", 2)
	// A job w-a finished: it must not get a lease back.
	done := e.claimJob(e.job("done", "k"), "w-a")
	e.apply(e.outcome(done, contract.OutcomeComplete))
	if len(a) != 2 || len(b) != 2 {
		e.Fatalf("setup: claimed %d and %d jobs; want 2 and 2", len(a), len(b))
	}
	bBefore := []*contract.Job{e.get(b[0].ID), e.get(b[1].ID)}

	until := e.now.Add(10 * time.Minute)
	// w-a names its two jobs, the finished one, and w-b's jobs (which it
	// does not hold).
	n, err := e.s.ExtendLeases(e.ctx, "w-a", leases(a[0], a[1], done, b[0], b[1]), until)
	if err != nil {
		e.Fatalf("ExtendLeases: unexpected error: %v", err)
	}
	if n != 2 {
		e.Errorf("ExtendLeases(\"w-a\", …) reported %d jobs touched; want 2 (w-a holds 2 running jobs; it also named a completed one and two held by w-b)", n)
	}
	for _, j := range a {
		if d := diffTime("LeaseUntil", e.get(j.ID).LeaseUntil, until); len(d) > 0 {
			e.Errorf("job %d held by w-a after ExtendLeases: %s", j.ID, d[0])
		}
	}
	for _, j := range bBefore {
		e.expectUnchanged(j, "ExtendLeases by another worker")
	}
	if got := e.get(done.ID); !got.LeaseUntil.IsZero() || got.State != contract.StateCompleted {
		e.Errorf("ExtendLeases(\"w-a\") touched completed job %d (state %q, LeaseUntil %s); it must only extend running jobs", done.ID, got.State, ts(got.LeaseUntil))
	}
	if n, err := e.s.ExtendLeases(e.ctx, "nobody", nil, until); err != nil || n != 0 {
		e.Errorf("ExtendLeases of a worker naming nothing returned (%d, %s); want (0, nil)", n, errMsg(err))
	}
}

// testExtendOnlyNamed: a job the worker holds but does not name (a claim
// whose reply it never received) keeps its lease, so it can expire; a
// lease named with a stale ClaimSeq is not extended either.
func testExtendOnlyNamed(e *env) {
	insertMany(e, "q", 3)
	held := e.claim("q", "w", 3)
	if len(held) != 3 {
		e.Fatalf("setup: claimed %d of 3", len(held))
	}
	unknown, stale := e.get(held[1].ID), e.get(held[2].ID)
	until := e.now.Add(10 * time.Minute)
	ls := leases(held[0], held[2])
	ls[1].ClaimSeq-- // an earlier execution of held[2]
	n, err := e.s.ExtendLeases(e.ctx, "w", ls, until)
	if err != nil {
		e.Fatalf("ExtendLeases: unexpected error: %v", err)
	}
	if n != 1 {
		e.Errorf("ExtendLeases reported %d jobs touched; want 1 (one named at its current claim, one named at an earlier claim, one held but not named)", n)
	}
	if d := diffTime("LeaseUntil", e.get(held[0].ID).LeaseUntil, until); len(d) > 0 {
		e.Errorf("job %d, named at its claim: %s", held[0].ID, d[0])
	}
	e.expectUnchanged(unknown, "ExtendLeases of a worker that did not name the job (its lease must be left to run out)")
	e.expectUnchanged(stale, "ExtendLeases naming the job at an earlier ClaimSeq")
}

func testExtendedNotRescued(e *env) {
	j := e.claimJob(e.job("q", "k"), "w")
	if _, err := e.s.ExtendLeases(e.ctx, "w", leases(j), e.now.Add(2*lease)); err != nil {
		e.Fatalf("ExtendLeases: %v", err)
	}
	e.advance(lease + time.Second) // past the original lease, before the extended one
	if got := e.rescue(10); len(got) != 0 {
		e.Fatalf("Rescue took job(s) %v whose lease was extended to %s (now %s)", ids(got), ts(e.now.Add(-lease-time.Second).Add(2*lease)), ts(e.now))
	}
	e.expectState(j.ID, contract.StateRunning, "its extended lease has not expired")
}

func testRescueOnlyExpired(e *env) {
	mk := func(worker string, leaseUntil time.Time) *contract.Job {
		j := e.insertOne(e.job("q-"+worker, "k"))
		got := e.claimWith(contract.ClaimParams{Queue: "q-" + worker, WorkerID: worker, Limit: 1, Now: e.now, LeaseUntil: leaseUntil})
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
	checkRescued(e, got[0], j, contract.StateRetryable)
	checkRescued(e, e.get(j.ID), j, contract.StateRetryable)
}

// testRescueAppliesDecision: the store applies what the RescueFunc
// decides, given the job as read and its expired lease, and writes no
// error prose of its own.
func testRescueAppliesDecision(e *env) {
	j := e.claimJob(e.job("q", "k"), "w")
	e.advance(lease + time.Second)
	var seen *contract.Job
	var seenAt time.Time
	entry := contract.AttemptError{Attempt: j.Attempt, At: e.now, Error: "decided by the engine ü", Cause: "test_cause"}
	got, err := e.s.Rescue(e.ctx, e.now, 10, func(r *contract.Job, lastSeen time.Time) contract.Outcome {
		seen, seenAt = r, lastSeen
		return contract.Outcome{JobID: r.ID, WorkerID: r.WorkerID, ClaimSeq: r.ClaimSeq, Attempt: r.Attempt, Kind: contract.OutcomeDiscard, At: e.now, Error: &entry}
	})
	if err != nil || len(got) != 1 {
		e.Fatalf("Rescue returned (%v, %s); want the one expired job", ids(got), errMsg(err))
	}
	if seen == nil {
		e.Fatalf("Rescue never called its RescueFunc")
	}
	if d := diffJob(seen, e.get(j.ID)); seen.ID != j.ID || seen.ClaimSeq != j.ClaimSeq || seen.WorkerID != j.WorkerID || !seen.LeaseUntil.Equal(j.LeaseUntil) {
		e.Errorf("the RescueFunc was given job %d (worker %q, claim_seq %d, lease %s); want job %d as read, held by %q at claim_seq %d with lease %s (%v)", seen.ID, seen.WorkerID, seen.ClaimSeq, ts(seen.LeaseUntil), j.ID, j.WorkerID, j.ClaimSeq, ts(j.LeaseUntil), d)
	}
	if !seenAt.Equal(j.LeaseUntil) {
		e.Errorf("the RescueFunc was given lastSeen %s; want the expired lease %s", ts(seenAt), ts(j.LeaseUntil))
	}
	want := *j
	want.State, want.FinishedAt, want.LeaseUntil = contract.StateDiscarded, e.now, time.Time{}
	want.Errors = []contract.AttemptError{entry}
	if d := diffJob(e.get(j.ID), &want); len(d) > 0 {
		e.Errorf("after Rescue the job must be exactly as the RescueFunc's outcome says (discarded, its error entry with its cause, nothing else):\n%s", lines(d))
	}
	if c := e.get(j.ID).Errors; len(c) == 1 && c[0].Cause != "test_cause" {
		e.Errorf("the error entry's Cause reads %q; want %q (stores keep AttemptError.Cause)", c[0].Cause, "test_cause")
	}
}

// testRescueKeepsPlace: a rescued job keeps its run_at, so it is claimed
// before jobs of its priority that came due after it.
func testRescueKeepsPlace(e *env) {
	j := e.claimJob(e.job("q", "k"), "w")
	e.advance(time.Second)
	later := e.insertOne(e.job("q", "k"))
	e.advance(lease + time.Second)
	if got := e.rescue(10); len(got) != 1 {
		e.Fatalf("Rescue returned %v; want job %d", ids(got), j.ID)
	}
	if got := e.get(j.ID); !got.RunAt.Equal(j.RunAt) {
		e.Errorf("rescued job %d has RunAt %s; want its own RunAt %s kept (its place in the queue)", j.ID, ts(got.RunAt), ts(j.RunAt))
	}
	if next := e.claimOne("q", "w2"); next.ID != j.ID {
		e.Errorf("the claim after a rescue returned job %d; want the rescued job %d, due before job %d", next.ID, j.ID, later.ID)
	}
}

// checkRescued checks a job rescued at e.now from the running job before,
// after its lease expired.
func checkRescued(e *env, got, before *contract.Job, state contract.State) {
	e.Helper()
	checkHandedBack(e, got, before, state, core.CauseLeaseExpired, before.LeaseUntil)
}

// checkHandedBack checks a job handed back at e.now from the running job
// before by Rescue or RescueWorkers with the engine's decision for cause
// and lastSeen.
func checkHandedBack(e *env, got, before *contract.Job, state contract.State, cause string, lastSeen time.Time) {
	e.Helper()
	o := core.DecideRescue(before, cause, lastSeen, e.now)
	want := *before
	want.State = state
	want.LeaseUntil = time.Time{}
	if state == contract.StateDiscarded {
		want.FinishedAt = e.now
	}
	want.Errors = append(append([]contract.AttemptError(nil), before.Errors...), *o.Error)
	if d := diffJob(got, &want); len(d) > 0 {
		e.Errorf("rescued job %d must be %s (RunAt kept when retried, FinishedAt=now when discarded, lease cleared) with the engine's error entry for attempt %d:\n%s", before.ID, state, before.Attempt, lines(d))
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
	checkRescued(e, got[0], j, contract.StateDiscarded)
	checkRescued(e, e.get(j.ID), j, contract.StateDiscarded)
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
	checkRescued(e, got[0], j, contract.StateDiscarded)
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
	mk := func(queue string) contract.InsertParams {
		p := e.job(queue, "k")
		p.Deadline = deadline
		return p
	}
	avail := e.insertOne(mk("avail"))
	schedP := mk("sched")
	schedP.RunAt = deadline.Add(-time.Minute)
	sched := e.insertOne(schedP)
	retry := e.claimJob(mk("retry"), "w")
	o := e.outcome(retry, contract.OutcomeRetry)
	o.RunAt = deadline.Add(time.Hour)
	e.apply(o)
	running := e.claimJob(mk("running"), "w")
	done := e.claimJob(mk("done"), "w")
	e.apply(e.outcome(done, contract.OutcomeComplete))
	lateP := mk("late")
	lateP.Deadline = deadline.Add(time.Hour)
	late := e.insertOne(lateP)
	none := e.insertOne(e.job("none", "k"))

	e.now = deadline // a deadline exactly now has not passed
	if n, err := e.s.DiscardExpired(e.ctx, e.now, 100); err != nil || n != 0 {
		e.Fatalf("DiscardExpired at exactly the deadline returned (%d, %s); want (0, nil): only deadlines before now have passed", n, errMsg(err))
	}
	keep := []*contract.Job{e.get(running.ID), e.get(done.ID), e.get(late.ID), e.get(none.ID)}
	e.advance(time.Second)
	n, err := e.s.DiscardExpired(e.ctx, e.now, 100)
	if err != nil {
		e.Fatalf("DiscardExpired: unexpected error: %v", err)
	}
	if n != 3 {
		e.Errorf("DiscardExpired returned %d; want 3 (the available, scheduled and retryable jobs past their deadline)", n)
	}
	for _, j := range []*contract.Job{avail, sched, retry} {
		got := e.get(j.ID)
		if got.State != contract.StateDiscarded {
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
		} else if last.Cause != core.CauseDeadline || !strings.HasPrefix(last.Error, "deadline passed") {
			e.Errorf("job %d: the deadline error entry is %+v; want Cause %q and an Error starting \"deadline passed\"", j.ID, last, core.CauseDeadline)
		} else if last.DiscardReason != core.ReasonDeadline || !last.StartedAt.IsZero() {
			e.Errorf("job %d: the deadline error entry is %+v; want DiscardReason %q and no StartedAt (no attempt was running)", j.ID, last, core.ReasonDeadline)
		}
	}
	for _, j := range keep {
		e.expectUnchanged(j, "DiscardExpired (running, final, not yet expired and deadline-less jobs are not its business)")
	}
}

func testDiscardExpiredLimit(e *env) {
	ps := make([]contract.InsertParams, 5)
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
