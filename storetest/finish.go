package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
)

var finishTests = []test{
	{"finish/complete-stores-result-and-finishes", testFinishComplete},
	{"finish/complete-with-delete-removes-the-row", testFinishCompleteDelete},
	{"finish/retry-makes-job-retryable-with-error", testFinishRetry},
	{"finish/snooze-keeps-the-attempt-count", testFinishSnooze},
	{"finish/continue-keeps-id-and-errors-and-resets-attempt", testFinishContinue},
	{"finish/cancel-and-discard-are-final", testFinishCancelDiscard},
	{"finish/every-outcome-clears-lease-and-keeps-worker", testFinishClearsLease},
	{"finish/round-trips-result-bytes-and-error-history", testFinishRoundTrip},
	{"finish/error-entry-keeps-start-and-discard-reason", testFinishErrorStartAndReason},
	{"finish/errors-accumulate-in-order-across-attempts", testFinishErrorsAccumulate},
	{"finish/errors-history-is-bounded", testFinishErrorsBounded},
	{"finish/stale-worker-is-fenced", testFinishStaleWorker},
	{"finish/stale-claim-is-fenced", testFinishStaleClaim},
	{"finish/late-outcome-of-an-earlier-claim-at-the-same-attempt-is-fenced", testFinishEarlierClaim},
	{"finish/after-rescue-is-fenced", testFinishAfterRescue},
	{"finish/after-cancel-is-fenced", testFinishAfterCancel},
	{"finish/after-delete-is-fenced", testFinishAfterDelete},
	{"finish/second-finish-of-one-attempt-is-fenced", testFinishTwice},
	{"finish/batch-of-500-mixed-outcomes-in-one-call", testFinishBatch},
	{"finish/unknown-outcome-kind-is-an-invalid-argument", testFinishUnknownKind},
}

func testFinishComplete(e *env) {
	j := e.claimJob(e.job("q", "k"), "w")
	e.advance(time.Second)
	o := e.outcome(j, contract.OutcomeComplete)
	o.Result = []byte(`{"ok":true}`)
	e.apply(o)
	want := *j
	want.State = contract.StateCompleted
	want.FinishedAt = e.now
	want.Result = o.Result
	want.LeaseUntil = time.Time{}
	if d := diffJob(e.get(j.ID), &want); len(d) > 0 {
		e.Fatalf("after OutcomeComplete the job must be completed with FinishedAt=At, Result stored, lease cleared, WorkerID kept:\n%s", lines(d))
	}
}

func testFinishCompleteDelete(e *env) {
	j := e.claimJob(e.job("q", "k"), "w")
	o := e.outcome(j, contract.OutcomeComplete)
	o.Delete = true
	e.apply(o)
	if got, err := e.s.Get(e.ctx, j.ID); !errors.Is(err, contract.ErrNotFound) {
		e.Fatalf("Get of a job completed with Delete=true returned (%+v, %s); want an error wrapping core.ErrNotFound (the row is deleted)", got, errMsg(err))
	}
}

func testFinishRetry(e *env) {
	j := e.claimJob(e.job("q", "k"), "w")
	e.advance(time.Second)
	o := e.outcome(j, contract.OutcomeRetry)
	o.RunAt = e.now.Add(time.Minute)
	o.Error = &contract.AttemptError{Attempt: 1, At: e.now, Error: "connection refused", Trace: "main.go:12"}
	e.apply(o)
	want := *j
	want.State = contract.StateRetryable
	want.RunAt = o.RunAt
	want.Errors = []contract.AttemptError{*o.Error}
	want.LeaseUntil = time.Time{}
	if d := diffJob(e.get(j.ID), &want); len(d) > 0 {
		e.Fatalf("after OutcomeRetry the job must be retryable at RunAt with the error appended and attempt kept:\n%s", lines(d))
	}
}

func testFinishSnooze(e *env) {
	j := e.claimJob(e.job("q", "k"), "w")
	// Snooze into the future: scheduled, attempt back to 0.
	o := e.outcome(j, contract.OutcomeSnooze)
	o.RunAt = e.now.Add(time.Minute)
	e.apply(o)
	want := *j
	want.State = contract.StateScheduled
	want.Attempt = 0
	want.RunAt = o.RunAt
	want.LeaseUntil = time.Time{}
	if d := diffJob(e.get(j.ID), &want); len(d) > 0 {
		e.Fatalf("after OutcomeSnooze to a later RunAt the job must be scheduled with its attempt decremented (a snooze uses no attempt):\n%s", lines(d))
	}

	// Claimed again: attempt 1 again. Snooze to RunAt=At (a hand-back) with
	// an error: available at once, error appended.
	e.advance(time.Minute)
	j = e.claimOne("q", "w2")
	if j.Attempt != 1 {
		e.Fatalf("a snoozed job claimed again has Attempt %d; want 1 (the snooze must not have used an attempt)", j.Attempt)
	}
	o = e.outcome(j, contract.OutcomeSnooze)
	o.RunAt = o.At
	o.Error = &contract.AttemptError{Attempt: 1, At: e.now, Error: "shutting down"}
	e.apply(o)
	got := e.get(j.ID)
	if got.State != contract.StateAvailable || got.Attempt != 0 || len(got.Errors) != 1 {
		e.Fatalf("after OutcomeSnooze with RunAt=At and an error, the job has state %q, attempt %d, %d error(s); want available (RunAt ≤ At), attempt 0, 1 error", got.State, got.Attempt, len(got.Errors))
	}
}

func testFinishContinue(e *env) {
	p := e.job("q", "step-1")
	p.Args = json.RawMessage(`{"step":1}`)
	p.UniqueKey = "flow-1"
	p.Tags = []string{"flow"}
	p.Metadata = map[string]string{"trace": "t1"}
	p.MaxAttempts = 5
	j := e.claimJob(p, "w")

	// A failed first attempt gives the job an error history to keep.
	o := e.outcome(j, contract.OutcomeRetry)
	o.Error = &contract.AttemptError{Attempt: 1, At: e.now, Error: "flaky"}
	e.apply(o)
	j = e.claimOne("q", "w", "flow")

	e.advance(time.Second)
	o = e.outcome(j, contract.OutcomeContinue)
	o.NextKind = "step-2"
	o.NextArgs = json.RawMessage(`{"step":2,"from":"step-1"}`)
	o.RunAt = e.now.Add(time.Minute)
	e.apply(o)
	want := *j
	want.Kind = "step-2"
	want.Args = o.NextArgs
	want.State = contract.StateScheduled
	want.Attempt = 0
	want.RunAt = o.RunAt
	want.LeaseUntil = time.Time{}
	if d := diffJob(e.get(j.ID), &want); len(d) > 0 {
		e.Fatalf("after OutcomeContinue the same job (same id, errors, tags, metadata, unique key) must move on to NextKind/NextArgs at RunAt with its attempt reset to 0:\n%s", lines(d))
	}

	// Continue with RunAt ≤ At: available at once.
	e.advance(time.Minute)
	j = e.claimOne("q", "w", "flow")
	o = e.outcome(j, contract.OutcomeContinue)
	o.NextKind = "step-3"
	o.NextArgs = json.RawMessage(`{"step":3}`)
	e.apply(o)
	if got := e.get(j.ID); got.State != contract.StateAvailable || got.Kind != "step-3" || got.Attempt != 0 {
		e.Fatalf("after OutcomeContinue with RunAt=At the job has state %q, kind %q, attempt %d; want available, \"step-3\", 0", got.State, got.Kind, got.Attempt)
	}
}

func testFinishCancelDiscard(e *env) {
	for _, c := range []struct {
		kind  contract.OutcomeKind
		state contract.State
	}{{contract.OutcomeCancel, contract.StateCancelled}, {contract.OutcomeDiscard, contract.StateDiscarded}} {
		j := e.claimJob(e.job("q", string(c.kind)), "w")
		e.advance(time.Second)
		o := e.outcome(j, c.kind)
		o.Error = &contract.AttemptError{Attempt: j.Attempt, At: e.now, Error: "permanent: " + string(c.kind)}
		e.apply(o)
		want := *j
		want.State = c.state
		want.FinishedAt = e.now
		want.Errors = []contract.AttemptError{*o.Error}
		want.LeaseUntil = time.Time{}
		if d := diffJob(e.get(j.ID), &want); len(d) > 0 {
			e.Errorf("after Outcome%s the job must be %s with FinishedAt=At and the error appended:\n%s", c.kind, c.state, lines(d))
		}
	}
}

func testFinishClearsLease(e *env) {
	kinds := []contract.OutcomeKind{contract.OutcomeComplete, contract.OutcomeRetry, contract.OutcomeSnooze, contract.OutcomeContinue, contract.OutcomeCancel, contract.OutcomeDiscard}
	for _, k := range kinds {
		j := e.claimJob(e.job("q", "k"), "holder-"+string(k))
		o := e.outcome(j, k)
		o.RunAt = e.now.Add(time.Hour)
		o.NextKind = "next"
		o.NextArgs = json.RawMessage(`{}`)
		e.apply(o)
		got := e.get(j.ID)
		if !got.LeaseUntil.IsZero() || got.WorkerID != j.WorkerID {
			e.Errorf("after Outcome%s the job has LeaseUntil %s and WorkerID %q; want LeaseUntil cleared and WorkerID %q kept for inspection", k, ts(got.LeaseUntil), got.WorkerID, j.WorkerID)
		}
	}
}

func testFinishRoundTrip(e *env) {
	j := e.claimJob(e.job("q", "k"), "w")
	e.advance(time.Second)
	first := contract.AttemptError{
		Attempt: 1,
		At:      e.now.In(zone),
		Error:   "ошибка: résumé failed ✗ \"quoted\" 'single' \\ backslash",
		Trace:   "goroutine 1 [running]:\nmain.main()\n\t/src/main.go:12 +0x1d\n😀",
	}
	o := e.outcome(j, contract.OutcomeRetry)
	o.Error = &first
	e.apply(o)
	j = e.claimOne("q", "w")
	e.advance(time.Second)
	result := []byte{0xff, 0xfe, 0x00, 'a', 0x80, '\n', 0xc3, 0x28, '{'}
	o = e.outcome(j, contract.OutcomeComplete)
	o.At = e.now.In(zone)
	o.Result = result
	o.Error = nil
	e.apply(o)

	got := e.get(j.ID)
	wantErr := first
	wantErr.At = first.At.UTC()
	if d := diffErrors(got.Errors, []contract.AttemptError{wantErr}); len(d) > 0 {
		e.Errorf("the error history did not round-trip (message and trace exactly, At in UTC):\n%s", lines(d))
	}
	if string(got.Result) != string(result) {
		e.Errorf("Result came back as %q; want the exact bytes %q (results are bytes, not text: non-UTF-8 and NUL must survive)", got.Result, result)
	}
	if d := diffTime("FinishedAt", got.FinishedAt, e.now); len(d) > 0 {
		e.Errorf("%s (At handed in at UTC+05:30)", d[0])
	}
}

// testFinishErrorStartAndReason: an entry's StartedAt (handed in off UTC)
// comes back as the same instant in UTC, and its DiscardReason as given;
// an entry without them comes back without them.
func testFinishErrorStartAndReason(e *env) {
	p := e.job("q", "k")
	p.MaxAttempts = 2
	j := e.claimJob(p, "w")
	e.advance(1500 * time.Millisecond)
	plain := contract.AttemptError{Attempt: 1, At: e.now, Error: "no start recorded"}
	o := e.outcome(j, contract.OutcomeRetry)
	o.RunAt = e.now
	o.Error = &plain
	e.apply(o)
	j = e.claimOne("q", "w")
	started := j.AttemptedAt
	e.advance(2500 * time.Millisecond)
	last := contract.AttemptError{Attempt: 2, At: e.now, Error: "gave up", Cause: "handler_error",
		StartedAt: started.In(zone), DiscardReason: core.ReasonExhausted}
	o = e.outcome(j, contract.OutcomeDiscard)
	o.Error = &last
	e.apply(o)
	want := last
	want.StartedAt = started.UTC()
	if d := diffErrors(e.get(j.ID).Errors, []contract.AttemptError{plain, want}); len(d) > 0 {
		e.Errorf("the error entries' StartedAt (in UTC) and DiscardReason did not round-trip:\n%s", lines(d))
	}
}

func testFinishErrorsAccumulate(e *env) {
	p := e.job("q", "k")
	p.MaxAttempts = 5
	j := e.claimJob(p, "w")
	var want []contract.AttemptError
	for attempt := 1; attempt <= 3; attempt++ {
		if j.Attempt != attempt {
			e.Fatalf("claim %d returned Attempt %d; want %d", attempt, j.Attempt, attempt)
		}
		ae := contract.AttemptError{Attempt: attempt, At: e.now, Error: fmt.Sprintf("failure %d", attempt), Trace: fmt.Sprintf("trace %d", attempt)}
		want = append(want, ae)
		o := e.outcome(j, contract.OutcomeRetry)
		o.Error = &ae
		o.RunAt = e.now.Add(time.Second)
		e.apply(o)
		e.advance(time.Second)
		j = e.claimOne("q", "w")
	}
	o := e.outcome(j, contract.OutcomeDiscard)
	ae := contract.AttemptError{Attempt: 4, At: e.now, Error: "giving up"}
	want = append(want, ae)
	o.Error = &ae
	e.apply(o)
	if d := diffErrors(e.get(j.ID).Errors, want); len(d) > 0 {
		e.Fatalf("the errors history must hold one entry per failed attempt, oldest first:\n%s", lines(d))
	}
}

// testFinishErrorsBounded: a history of contract.MaxErrorEntries entries
// drops its oldest entry after the first before another is appended, by
// Finish and by the store's own entries (a deadline discard): the first
// failure and the latest ones stay.
func testFinishErrorsBounded(e *env) {
	n := contract.MaxErrorEntries + 5
	p := e.job("q", "k")
	p.MaxAttempts = n + 10
	p.Deadline = e.now.Add(time.Hour)
	j := e.claimJob(p, "w")
	for attempt := 1; attempt <= n; attempt++ {
		o := e.outcome(j, contract.OutcomeRetry)
		o.Error = &contract.AttemptError{Attempt: attempt, At: e.now, Error: fmt.Sprintf("failure %d", attempt)}
		o.RunAt = e.now.Add(time.Second)
		e.apply(o)
		e.advance(time.Second)
		if attempt < n {
			j = e.claimOne("q", "w")
		}
	}
	attempts := func(errs []contract.AttemptError) []int {
		out := make([]int, len(errs))
		for i, x := range errs {
			out[i] = x.Attempt
		}
		return out
	}
	want := []int{1}
	for a := n - contract.MaxErrorEntries + 2; a <= n; a++ {
		want = append(want, a)
	}
	if got := attempts(e.get(j.ID).Errors); fmt.Sprint(got) != fmt.Sprint(want) {
		e.Fatalf("after %d failed attempts the errors history holds the entries of attempts %v; want at most contract.MaxErrorEntries (%d): the first and the latest, %v", n, got, contract.MaxErrorEntries, want)
	}
	e.advance(2 * time.Hour)
	if _, err := e.s.DiscardExpired(e.ctx, e.now, 10); err != nil {
		e.Fatalf("DiscardExpired: %v", err)
	}
	got := e.get(j.ID).Errors
	if len(got) != contract.MaxErrorEntries || got[0].Attempt != 1 || got[1].Attempt != want[2] || got[len(got)-1].Cause != core.CauseDeadline {
		e.Fatalf("after a deadline discard of a full history the entries are of attempts %v (last %+v); want %d: the first, the latest failures from attempt %d, then the deadline's entry", attempts(got), got[len(got)-1], contract.MaxErrorEntries, want[2])
	}
}

// expectFenced finishes o, which must fail its fence and leave the job as
// it was before.
func expectFenced(e *env, o contract.Outcome, why string) {
	e.Helper()
	before, err := e.s.Get(e.ctx, o.JobID)
	if err != nil && !errors.Is(err, contract.ErrNotFound) {
		e.Fatalf("Get(%d): %v", o.JobID, err)
	}
	if r := e.finish(o); r[0].Applied {
		e.Fatalf("Finish(%s) of job %d by worker %q at claim_seq %d was applied, but %s: the fence (running, same worker, same ClaimSeq) must fail and report Applied=false", o.Kind, o.JobID, o.WorkerID, o.ClaimSeq, why)
	}
	if before != nil {
		e.expectUnchanged(before, "a fenced-out Finish")
	} else if _, err := e.s.Get(e.ctx, o.JobID); !errors.Is(err, contract.ErrNotFound) {
		e.Fatalf("a fenced-out Finish of deleted job %d brought it back (Get error %s)", o.JobID, errMsg(err))
	}
}

func testFinishStaleWorker(e *env) {
	j := e.claimJob(e.job("q", "k"), "w1")
	for _, k := range []contract.OutcomeKind{contract.OutcomeComplete, contract.OutcomeRetry, contract.OutcomeCancel} {
		o := e.outcome(j, k)
		o.WorkerID = "w2"
		expectFenced(e, o, "the job is held by worker \"w1\", not \"w2\"")
	}
	o := e.outcome(j, contract.OutcomeComplete)
	o.WorkerID = ""
	expectFenced(e, o, "the job is held by worker \"w1\", not the empty worker id")
}

func testFinishStaleClaim(e *env) {
	j := e.claimJob(e.job("q", "k"), "w")
	for _, seq := range []int64{j.ClaimSeq - 1, j.ClaimSeq + 1} {
		o := e.outcome(j, contract.OutcomeComplete)
		o.ClaimSeq = seq
		expectFenced(e, o, fmt.Sprintf("the job is held at claim_seq %d, not %d", j.ClaimSeq, seq))
	}
}

// testFinishEarlierClaim: a snooze gives the attempt back, so the same
// worker can hold the same job twice at the same attempt; the late outcome
// of the first execution must not land on the second.
func testFinishEarlierClaim(e *env) {
	first := e.claimJob(e.job("q", "k"), "w")
	e.apply(e.outcome(first, contract.OutcomeSnooze)) // due again at once, attempt given back
	second := e.claimOne("q", "w")
	if second.ID != first.ID || second.Attempt != first.Attempt {
		e.Fatalf("setup: re-claim after a snooze returned job %d at attempt %d; want job %d at attempt %d", second.ID, second.Attempt, first.ID, first.Attempt)
	}
	if second.ClaimSeq <= first.ClaimSeq {
		e.Fatalf("the second claim of job %d has ClaimSeq %d, the first had %d: every claim must increase it", first.ID, second.ClaimSeq, first.ClaimSeq)
	}
	expectFenced(e, e.outcome(first, contract.OutcomeComplete), "it is the late outcome of the first execution; the job is running again under a newer claim by the same worker at the same attempt")
	e.apply(e.outcome(second, contract.OutcomeComplete))
}

func testFinishAfterRescue(e *env) {
	j := e.claimJob(e.job("q", "k"), "w1")
	e.advance(lease + time.Second)
	if got := e.rescue(10); len(got) != 1 {
		e.Fatalf("Rescue after the lease ran out returned %v; want the one expired job", ids(got))
	}
	expectFenced(e, e.outcome(j, contract.OutcomeComplete), "the job was rescued after its lease expired (it is available again)")
	j2 := e.claimOne("q", "w2")
	expectFenced(e, e.outcome(j, contract.OutcomeComplete), "the rescued job is now held by worker \"w2\" at attempt 2")
	o := e.outcome(j, contract.OutcomeComplete)
	o.ClaimSeq = j2.ClaimSeq
	expectFenced(e, o, "the rescued job is now held by worker \"w2\" (right claim, wrong worker)")
	e.apply(e.outcome(j2, contract.OutcomeComplete))
}

func testFinishAfterCancel(e *env) {
	j := e.claimJob(e.job("q", "k"), "w")
	if _, err := e.s.Cancel(e.ctx, j.ID, e.now); err != nil {
		e.Fatalf("Cancel of running job %d: %v", j.ID, err)
	}
	expectFenced(e, e.outcome(j, contract.OutcomeComplete), "the job was cancelled while running")
	expectFenced(e, e.outcome(j, contract.OutcomeRetry), "the job was cancelled while running")
}

func testFinishAfterDelete(e *env) {
	j := e.claimJob(e.job("q", "k"), "w")
	if _, err := e.s.Cancel(e.ctx, j.ID, e.now); err != nil {
		e.Fatalf("Cancel of running job %d: %v", j.ID, err)
	}
	if err := e.s.Delete(e.ctx, j.ID); err != nil {
		e.Fatalf("Delete of cancelled job %d: %v", j.ID, err)
	}
	expectFenced(e, e.outcome(j, contract.OutcomeComplete), "the job was deleted")
	o := e.outcome(j, contract.OutcomeComplete)
	o.JobID = j.ID + 1_000_000
	expectFenced(e, o, "no job has that id")
}

func testFinishTwice(e *env) {
	j := e.claimJob(e.job("q", "k"), "w")
	e.apply(e.outcome(j, contract.OutcomeRetry))
	expectFenced(e, e.outcome(j, contract.OutcomeComplete), "the same attempt was already finished (retry)")
	res := e.finish(e.outcome(e.claimOne("q", "w"), contract.OutcomeComplete), e.outcome(e.get(j.ID), contract.OutcomeDiscard))
	if !res[0].Applied || res[1].Applied {
		e.Fatalf("a batch finishing the same attempt twice (complete, then discard) returned Applied %v, %v; want true, false (the second fails the fence)", res[0].Applied, res[1].Applied)
	}
	e.expectState(j.ID, contract.StateCompleted, "the first outcome of a batch wins")
}

func testFinishBatch(e *env) {
	const n = 500
	insertMany(e, "q", n)
	var running []*contract.Job
	for len(running) < n {
		got := e.claim("q", "w", 100)
		if len(got) == 0 {
			e.Fatalf("claimed only %d of %d due jobs", len(running), n)
		}
		running = append(running, got...)
	}
	outs := make([]contract.Outcome, n)
	kinds := []contract.OutcomeKind{contract.OutcomeComplete, contract.OutcomeRetry, contract.OutcomeSnooze, contract.OutcomeDiscard}
	for i, j := range running {
		outs[i] = e.outcome(j, kinds[i%len(kinds)])
		outs[i].RunAt = e.now.Add(time.Hour)
		if i%3 == 2 {
			outs[i].ClaimSeq = 7000 // stale
		}
	}
	// Reverse the order so results cannot simply follow id order.
	for i, k := 0, n-1; i < k; i, k = i+1, k-1 {
		outs[i], outs[k] = outs[k], outs[i]
	}
	res := e.finish(outs...)
	for i, r := range res {
		want := outs[i].ClaimSeq != 7000
		if r.Applied != want {
			e.Fatalf("Finish of %d outcomes: result %d (job %d, claim_seq %d) has Applied=%v; want %v", n, i, r.JobID, outs[i].ClaimSeq, r.Applied, want)
		}
	}
	states := map[contract.OutcomeKind]contract.State{contract.OutcomeComplete: contract.StateCompleted, contract.OutcomeRetry: contract.StateRetryable, contract.OutcomeSnooze: contract.StateScheduled, contract.OutcomeDiscard: contract.StateDiscarded}
	now := make(map[int64]contract.State, n)
	for _, j := range e.list(contract.ListParams{Queue: "q", Limit: n}) {
		now[j.ID] = j.State
	}
	for _, o := range outs {
		want := states[o.Kind]
		if o.ClaimSeq == 7000 {
			want = contract.StateRunning
		}
		if got := now[o.JobID]; got != want {
			e.Fatalf("after a batch Finish, job %d (outcome %s, stale=%v) has state %q in List; want %q", o.JobID, o.Kind, o.Attempt == 7, got, want)
		}
	}
}
