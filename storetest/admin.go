package storetest

import (
	"errors"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

var adminTests = []test{
	{"get/missing-job-is-not-found", testGetMissing},
	{"cancel/moves-pending-and-running-jobs-to-cancelled", testCancel},
	{"cancel/final-job-is-invalid-state", testCancelFinal},
	{"cancel/missing-job-is-not-found", testCancelMissing},
	{"retry/makes-final-job-available-now", testRetryFinal},
	{"retry/makes-scheduled-job-available-now", testRetryScheduled},
	{"retry/exhausted-job-gets-exactly-one-more-attempt", testRetryExhausted},
	{"retry/running-job-is-invalid-state", testRetryRunning},
	{"retry/missing-job-is-not-found", testRetryMissing},
	{"delete/removes-job-that-is-not-running", testDelete},
	{"delete/running-job-is-invalid-state", testDeleteRunning},
	{"delete/missing-job-is-not-found", testDeleteMissing},
}

const missingID = 987654321

func testGetMissing(e *env) {
	if j, err := e.s.Get(e.ctx, missingID); !errors.Is(err, contract.ErrNotFound) {
		e.Fatalf("Get(%d) of a job that never existed returned (%+v, %s); want an error wrapping core.ErrNotFound", missingID, j, errMsg(err))
	}
}

func testCancel(e *env) {
	sched := e.job("q", "scheduled")
	sched.RunAt = e.now.Add(time.Hour)
	jobs := []*contract.Job{e.insertOne(sched), e.insertOne(e.job("q", "available"))}
	running := e.claimJob(e.job("r", "running"), "w")
	jobs = append(jobs, running)
	retry := e.claimJob(e.job("r", "retryable"), "w")
	o := e.outcome(retry, contract.OutcomeRetry)
	o.RunAt = e.now.Add(time.Hour)
	e.apply(o)
	jobs = append(jobs, e.get(retry.ID))

	e.advance(time.Second)
	for _, j := range jobs {
		before := e.get(j.ID)
		got, err := e.s.Cancel(e.ctx, j.ID, e.now)
		if err != nil {
			e.Errorf("Cancel of %s job %d: unexpected error: %v", before.State, j.ID, err)
			continue
		}
		want := *before
		want.State = contract.StateCancelled
		want.FinishedAt = e.now
		want.LeaseUntil = time.Time{}
		if d := diffJob(got, &want); len(d) > 0 {
			e.Errorf("Cancel of %s job %d must return it cancelled with FinishedAt=now and the lease cleared:\n%s", before.State, j.ID, lines(d))
		}
		if d := diffJob(e.get(j.ID), &want); len(d) > 0 {
			e.Errorf("Get after Cancel of %s job %d:\n%s", before.State, j.ID, lines(d))
		}
	}
}

// finalJobs makes one completed, one cancelled and one discarded job.
func finalJobs(e *env) []*contract.Job {
	e.Helper()
	c := e.claimJob(e.job("q", "completed"), "w")
	e.apply(e.outcome(c, contract.OutcomeComplete))
	x := e.insertOne(e.job("q", "cancelled"))
	if _, err := e.s.Cancel(e.ctx, x.ID, e.now); err != nil {
		e.Fatalf("Cancel(%d): %v", x.ID, err)
	}
	d := e.claimJob(e.job("q", "discarded"), "w")
	o := e.outcome(d, contract.OutcomeDiscard)
	o.Error = &contract.AttemptError{Attempt: 1, At: e.now, Error: "permanent"}
	e.apply(o)
	return []*contract.Job{e.get(c.ID), e.get(x.ID), e.get(d.ID)}
}

func testCancelFinal(e *env) {
	for _, j := range finalJobs(e) {
		if _, err := e.s.Cancel(e.ctx, j.ID, e.now); !errors.Is(err, contract.ErrInvalidState) {
			e.Errorf("Cancel of %s job %d returned %s; want an error wrapping core.ErrInvalidState", j.State, j.ID, errMsg(err))
		}
		e.expectUnchanged(j, "Cancel of a job already final")
	}
}

func testCancelMissing(e *env) {
	if _, err := e.s.Cancel(e.ctx, missingID, e.now); !errors.Is(err, contract.ErrNotFound) {
		e.Fatalf("Cancel of a job that never existed returned %s; want an error wrapping core.ErrNotFound", errMsg(err))
	}
}

func testRetryFinal(e *env) {
	jobs := finalJobs(e)
	e.advance(time.Minute)
	for _, j := range jobs {
		got, err := e.s.Retry(e.ctx, j.ID, e.now)
		if err != nil {
			e.Errorf("Retry of %s job %d: unexpected error: %v", j.State, j.ID, err)
			continue
		}
		want := *j
		want.State = contract.StateAvailable
		want.RunAt = e.now
		want.FinishedAt = time.Time{}
		if want.Attempt >= want.MaxAttempts {
			want.MaxAttempts = want.Attempt + 1
		}
		if d := diffJob(got, &want); len(d) > 0 {
			e.Errorf("Retry of %s job %d must return it available with RunAt=now and FinishedAt cleared, everything else kept:\n%s", j.State, j.ID, lines(d))
		}
		if d := diffJob(e.get(j.ID), &want); len(d) > 0 {
			e.Errorf("Get after Retry of %s job %d:\n%s", j.State, j.ID, lines(d))
		}
	}
	if got := e.claim("q", "w", 10); len(got) != len(jobs) {
		e.Fatalf("Claim after retrying %d final jobs returned %d", len(jobs), len(got))
	}
}

func testRetryScheduled(e *env) {
	p := e.job("q", "k")
	p.RunAt = e.now.Add(time.Hour)
	j := e.insertOne(p)
	got, err := e.s.Retry(e.ctx, j.ID, e.now)
	if err != nil {
		e.Fatalf("Retry of scheduled job %d: unexpected error: %v", j.ID, err)
	}
	if got.State != contract.StateAvailable || !got.RunAt.Equal(e.now) {
		e.Fatalf("Retry of scheduled job %d returned state %q, RunAt %s; want available at now %s", j.ID, got.State, ts(got.RunAt), ts(e.now))
	}
	if c := e.claimOne("q", "w"); c.ID != j.ID {
		e.Fatalf("claim returned %d; want the retried job %d", c.ID, j.ID)
	}
}

func testRetryExhausted(e *env) {
	p := e.job("q", "k")
	p.MaxAttempts = 1
	j := e.claimJob(p, "w")
	o := e.outcome(j, contract.OutcomeDiscard)
	o.Error = &contract.AttemptError{Attempt: 1, At: e.now, Error: "attempts exhausted"}
	e.apply(o)

	got, err := e.s.Retry(e.ctx, j.ID, e.now)
	if err != nil {
		e.Fatalf("Retry of exhausted discarded job %d: %v", j.ID, err)
	}
	if got.MaxAttempts != 2 || got.Attempt != 1 {
		e.Fatalf("Retry of a job with attempt 1 of max 1 returned attempt %d of max %d; want attempt 1 of max 2 (exactly one more attempt)", got.Attempt, got.MaxAttempts)
	}
	j = e.claimOne("q", "w")
	if j.Attempt != 2 {
		e.Fatalf("the retried job was claimed at attempt %d; want 2", j.Attempt)
	}
	// The extra attempt is the only one: losing it discards the job.
	e.advance(lease + time.Second)
	if r := e.rescue(10); len(r) != 1 || r[0].State != contract.StateDiscarded {
		var states []contract.State
		for _, x := range r {
			states = append(states, x.State)
		}
		e.Fatalf("Rescue of the retried job after its lease expired returned states %v; want [discarded] (attempt 2 of max 2 is used up)", states)
	}
}

func testRetryRunning(e *env) {
	j := e.claimJob(e.job("q", "k"), "w")
	before := e.get(j.ID)
	if _, err := e.s.Retry(e.ctx, j.ID, e.now); !errors.Is(err, contract.ErrInvalidState) {
		e.Fatalf("Retry of running job %d returned %s; want an error wrapping core.ErrInvalidState", j.ID, errMsg(err))
	}
	e.expectUnchanged(before, "Retry of a running job")
}

func testRetryMissing(e *env) {
	if _, err := e.s.Retry(e.ctx, missingID, e.now); !errors.Is(err, contract.ErrNotFound) {
		e.Fatalf("Retry of a job that never existed returned %s; want an error wrapping core.ErrNotFound", errMsg(err))
	}
}

func testDelete(e *env) {
	jobs := finalJobs(e)
	jobs = append(jobs, e.insertOne(e.job("q", "available")))
	for _, j := range jobs {
		if err := e.s.Delete(e.ctx, j.ID); err != nil {
			e.Errorf("Delete of %s job %d: unexpected error: %v", j.State, j.ID, err)
			continue
		}
		if _, err := e.s.Get(e.ctx, j.ID); !errors.Is(err, contract.ErrNotFound) {
			e.Errorf("Get of deleted job %d returned %s; want core.ErrNotFound", j.ID, errMsg(err))
		}
	}
	if st := e.stats()["q"].Counts; nonZero(st) != 0 {
		e.Errorf("Stats still counts %v in queue \"q\" after every job was deleted", st)
	}
}

func testDeleteRunning(e *env) {
	j := e.claimJob(e.job("q", "k"), "w")
	before := e.get(j.ID)
	if err := e.s.Delete(e.ctx, j.ID); !errors.Is(err, contract.ErrInvalidState) {
		e.Fatalf("Delete of running job %d returned %s; want an error wrapping core.ErrInvalidState (cancel it first)", j.ID, errMsg(err))
	}
	e.expectUnchanged(before, "Delete of a running job")
}

func testDeleteMissing(e *env) {
	if err := e.s.Delete(e.ctx, missingID); !errors.Is(err, contract.ErrNotFound) {
		e.Fatalf("Delete of a job that never existed returned %s; want an error wrapping core.ErrNotFound", errMsg(err))
	}
}
