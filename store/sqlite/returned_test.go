package sqlite

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

// TestInsertAndClaimReturnWhatGetReads: Insert builds its jobs from what it
// sent and Claim reads back only the columns the claim did not set
// (sqlq.InsertedJob, sqlq.ScanClaimed); both must return exactly what a
// read of the row returns, field for field (nil and empty collections,
// times truncated to the microsecond and in UTC), on the unlimited and the
// limited claim path, for jobs with and without every optional column.
func TestInsertAndClaimReturnWhatGetReads(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	// Not on a microsecond: the store keeps microseconds.
	now := t0.Add(789).In(time.FixedZone("x", 3600))
	full := contract.InsertParams{Queue: "q", Kind: "k", Args: json.RawMessage(`{"a": [1, 2]}`), Priority: 3, MaxAttempts: 5,
		RunAt: t0, Deadline: t0.Add(time.Hour), UniqueKey: "u1", PartitionKey: "p1",
		Tags: []string{"gpu", "<&>"}, Metadata: map[string]string{"trace": "x\u2028y"}}
	bare := contract.InsertParams{Queue: "q", Kind: "k2", Args: json.RawMessage(`null`), Priority: 1, MaxAttempts: 1, RunAt: t0,
		Tags: []string{}, Metadata: map[string]string{}}
	later := contract.InsertParams{Queue: "q", Kind: "k3", Args: json.RawMessage(`{}`), Priority: 1, MaxAttempts: 1, RunAt: now.Add(time.Hour)}
	same := func(what string, got *contract.Job) {
		t.Helper()
		want, err := s.Get(ctx, got.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s of job %d:\n got %#v\nread %#v", what, got.ID, got, want)
		}
	}
	res, err := s.Insert(ctx, now, []contract.InsertParams{full, bare, later})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		same("insert", r.Job)
	}

	claimNow := now.Add(time.Minute)
	p := contract.ClaimParams{Queue: "q", WorkerID: "w1", Limit: 10, Now: claimNow, LeaseUntil: claimNow.Add(time.Minute + 999), Tags: []string{"gpu", "<&>"}}
	jobs, err := s.Claim(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 2 {
		t.Fatalf("claimed %d jobs, want 2", len(jobs))
	}
	for _, j := range jobs {
		same("claim", j)
	}
	// A failed attempt with a result kept: the next claim returns its
	// errors history, result and attempt.
	outs := []contract.Outcome{{JobID: jobs[0].ID, WorkerID: "w1", ClaimSeq: jobs[0].ClaimSeq, Attempt: jobs[0].Attempt, Kind: contract.OutcomeRetry,
		At: claimNow, RunAt: claimNow, Error: &contract.AttemptError{Attempt: 1, At: claimNow, Error: "boom", Cause: "handler"}}}
	if _, err := s.Finish(ctx, outs); err != nil {
		t.Fatal(err)
	}
	if err := s.SetQueueLimits(ctx, "q", contract.QueueLimits{MaxRunning: 5}, claimNow); err != nil {
		t.Fatal(err)
	}
	p.WorkerID, p.Now, p.LeaseUntil = "w2", claimNow.Add(time.Second+1), claimNow.Add(2*time.Minute+1)
	jobs, err = s.Claim(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 || len(jobs[0].Errors) != 1 || jobs[0].Attempt != 2 {
		t.Fatalf("limited claim returned %+v, want the retried job at attempt 2 with one error", jobs)
	}
	same("limited claim", jobs[0])
}
