package memory

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 123456000, time.UTC)

func TestBasicLifecycle(t *testing.T) {
	ctx := context.Background()
	s := New()
	defer s.Close()

	res, err := s.Insert(ctx, t0, []contract.InsertParams{
		{Queue: "q", Kind: "k", Args: []byte(`{}`), Priority: 5, MaxAttempts: 3, RunAt: t0},
		{Queue: "q", Kind: "k", Args: []byte(`{}`), Priority: 1, MaxAttempts: 3, RunAt: t0.Add(time.Second)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Job.ID != 1 || res[0].Job.State != contract.StateAvailable || res[1].Job.State != contract.StateScheduled {
		t.Fatalf("insert: got %+v, %+v", res[0].Job, res[1].Job)
	}
	jobs, err := s.Claim(ctx, contract.ClaimParams{Queue: "q", WorkerID: "w", Limit: 10, Now: t0.Add(time.Second), LeaseUntil: t0.Add(time.Minute)})
	if err != nil || len(jobs) != 2 || jobs[0].ID != 2 || jobs[1].ID != 1 {
		t.Fatalf("claim: %v %v", jobs, err)
	}
	jobs[0].Args[0] = 'X' // must not reach the store
	fr, err := s.Finish(ctx, []contract.Outcome{
		{JobID: 2, WorkerID: "w", ClaimSeq: 1, Attempt: 1, Kind: contract.OutcomeComplete, At: t0},
		{JobID: 1, WorkerID: "other", ClaimSeq: 1, Attempt: 1, Kind: contract.OutcomeComplete, At: t0},
	})
	if err != nil || !fr[0].Applied || fr[1].Applied {
		t.Fatalf("finish: %v %v", fr, err)
	}
	j, err := s.Get(ctx, 2)
	if err != nil || j.State != contract.StateCompleted || string(j.Args) != "{}" {
		t.Fatalf("get: %+v %v", j, err)
	}
}

func TestResultsAreCopies(t *testing.T) {
	ctx := context.Background()
	s := New()
	res, err := s.Insert(ctx, t0, []contract.InsertParams{{Queue: "q", Kind: "k", Args: []byte(`{"a":1}`), Priority: 5, MaxAttempts: 1, RunAt: t0, Tags: []string{"t"}, Metadata: map[string]string{"k": "v"}}})
	if err != nil {
		t.Fatal(err)
	}
	j := res[0].Job
	j.Args[2], j.Tags[0], j.Metadata["k"] = 'X', "changed", "changed"
	got, err := s.Get(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Args) != `{"a":1}` || got.Tags[0] != "t" || got.Metadata["k"] != "v" {
		t.Fatalf("mutating a returned job changed the stored one: %+v", got)
	}
}

func TestListenNeverBlocksWriters(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	s := New()
	ch, err := s.Listen(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Nobody reads ch: inserts must still go through once its buffer is full.
	for range 3 * listenBuffer {
		if _, err := s.Insert(ctx, t0, []contract.InsertParams{{Queue: "q", Kind: "k", Args: []byte(`{}`), Priority: 5, MaxAttempts: 1, RunAt: t0}}); err != nil {
			t.Fatal(err)
		}
	}
	if len(ch) != listenBuffer {
		t.Fatalf("listener holds %d notifications; want a full buffer of %d", len(ch), listenBuffer)
	}
	j, err := s.Cancel(ctx, 1, t0)
	if err != nil || j.State != contract.StateCancelled {
		t.Fatalf("cancel: %v %v", j, err)
	}
	cancel()
	for range ch { // drains, then ends when Listen closes the channel
	}
}

func TestCancelNotifies(t *testing.T) {
	ctx := context.Background()
	s := New()
	if _, err := s.Insert(ctx, t0, []contract.InsertParams{{Queue: "q", Kind: "k", Args: []byte(`{}`), Priority: 5, MaxAttempts: 1, RunAt: t0}}); err != nil {
		t.Fatal(err)
	}
	ch, err := s.Listen(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Cancel(ctx, 1, t0); err != nil {
		t.Fatal(err)
	}
	if n := <-ch; n != (contract.Notification{Kind: contract.NotifyCancel, Queue: "q", JobID: 1}) {
		t.Fatalf("got %+v; want a cancel notification for job 1", n)
	}
}

func TestClosed(t *testing.T) {
	ctx := context.Background()
	s := New()
	ch, err := s.Listen(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-ch; ok {
		t.Fatal("Listen channel still open after Close")
	}
	if _, err := s.Get(ctx, 1); !errors.Is(err, contract.ErrClosed) {
		t.Fatalf("Get after Close: %v; want ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// BenchmarkClaimFromLargeBacklog claims 50 jobs from a queue holding 100k
// pending jobs.
func BenchmarkClaimFromLargeBacklog(b *testing.B) {
	ctx := context.Background()
	s := New()
	params := make([]contract.InsertParams, 100_000)
	for i := range params {
		params[i] = contract.InsertParams{Queue: "q", Kind: "k", Args: []byte(`{}`), Priority: 1 + i%10, MaxAttempts: 3, RunAt: t0.Add(time.Duration(i%1000) * time.Millisecond)}
	}
	if _, err := s.Insert(ctx, t0, params); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		jobs, err := s.Claim(ctx, contract.ClaimParams{Queue: "q", WorkerID: fmt.Sprint(i), Limit: 50, Now: t0.Add(time.Hour), LeaseUntil: t0.Add(2 * time.Hour)})
		if err != nil || len(jobs) == 0 {
			b.Fatal(err, len(jobs))
		}
		b.StopTimer()
		// Put them back so the backlog stays at 100k.
		for _, j := range jobs {
			s.Retry(ctx, j.ID, t0)
		}
		b.StartTimer()
	}
}
