package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backlogq/backlog/adapters/httpapi/client"
	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/internal/teststores"
)

// claimN submits n jobs of kind and claims them all as worker id.
func (s *testServer) claimN(id, kind string, n int) []*client.Job {
	s.t.Helper()
	ctx := context.Background()
	for range n {
		if _, err := s.producer.Submit(ctx, client.SubmitRequest{Kind: kind, MaxAttempts: 3}); err != nil {
			s.t.Fatal(err)
		}
	}
	if _, err := s.worker.RegisterWorker(ctx, id, client.RegisterRequest{Queues: []string{"default"}}); err != nil {
		s.t.Fatal(err)
	}
	jobs, err := s.worker.Claim(ctx, id, client.ClaimRequest{Limit: n})
	if err != nil || len(jobs) != n {
		s.t.Fatalf("claim: %v, %d jobs", err, len(jobs))
	}
	return jobs
}

// TestOutcomes: a batch of mixed outcomes applies item by item; refused
// items carry problems that errors.Is maps as for the single calls.
func TestOutcomes(t *testing.T) {
	t.Parallel()
	s := startServer(t, teststores.Memory(t), core.Config{MaxResultBytes: 100}, false)
	ctx := context.Background()
	jobs := s.claimN("w", "k", 6)
	hour := time.Hour
	items := []client.OutcomeRequest{
		client.CompleteOutcome(jobs[0].ID, client.CompleteRequest{LeaseToken: jobs[0].LeaseToken, Result: json.RawMessage(`{"ok":true}`)}),
		client.FailOutcome(jobs[1].ID, client.FailRequest{LeaseToken: jobs[1].LeaseToken, Error: "boom", Trace: "t", RetryIn: &hour}),
		client.SnoozeOutcome(jobs[2].ID, client.SnoozeRequest{LeaseToken: jobs[2].LeaseToken, Delay: time.Minute}),
		client.CompleteOutcome(jobs[3].ID, client.CompleteRequest{LeaseToken: jobs[3].LeaseToken, Result: json.RawMessage(`"` + strings.Repeat("x", 200) + `"`)}),
		client.CompleteOutcome(jobs[4].ID, client.CompleteRequest{LeaseToken: "garbage"}),
		client.FailOutcome(jobs[5].ID, client.FailRequest{LeaseToken: jobs[5].LeaseToken, Error: "bad", Action: client.FailDiscard}),
	}
	res, err := s.worker.Outcomes(ctx, "w", items)
	if err != nil || len(res) != len(items) {
		t.Fatalf("outcomes: %v %+v", err, res)
	}
	for i, want := range []core.State{core.StateCompleted, core.StateRetryable, core.StateScheduled, "", "", core.StateDiscarded} {
		r := res[i]
		if r.JobID != jobs[i].ID {
			t.Fatalf("result %d for job %d, want %d", i, r.JobID, jobs[i].ID)
		}
		if want != "" && (!r.Applied || r.State != want || r.Err() != nil) {
			t.Fatalf("result %d: %+v, want applied in %s", i, r, want)
		}
	}
	if err := res[3].Err(); !errors.Is(err, client.ErrInvalidRequest) || res[3].Applied || !strings.Contains(err.Error(), "POST /v1/workers/w/outcomes: 400 invalid-request") {
		t.Fatalf("oversized result: %v", err)
	}
	if err := res[4].Err(); !errors.Is(err, client.ErrInvalidLeaseToken) {
		t.Fatalf("garbage token: %v", err)
	}
	if j := s.job(jobs[1].ID); j.State != core.StateRetryable || time.Until(j.RunAt) < 50*time.Minute || j.Errors[0].Error != "boom" || j.Errors[0].Trace != "t" {
		t.Fatalf("failed job %+v", j)
	}
	if j := s.job(jobs[2].ID); j.Attempt != 0 || time.Until(j.RunAt) < 50*time.Second {
		t.Fatalf("snoozed job %+v", j)
	}
	if j := s.job(jobs[3].ID); j.State != core.StateRunning {
		t.Fatalf("refused completion changed the job: %+v", j)
	}

	// A replay: lease-lost (core.ErrLeaseLost), not unknown.
	res, err = s.worker.Outcomes(ctx, "w", items[:1])
	if err != nil || res[0].Applied || res[0].Unknown || !errors.Is(res[0].Err(), core.ErrLeaseLost) {
		t.Fatalf("replay: %v %+v", err, res)
	}
	// Nothing to send, too much to send.
	if res, err := s.worker.Outcomes(ctx, "w", nil); err != nil || res != nil {
		t.Fatalf("empty batch: %v %+v", err, res)
	}
	if _, err := s.worker.Outcomes(ctx, "w", make([]client.OutcomeRequest, client.MaxOutcomes+1)); err == nil {
		t.Fatal("an oversized batch was sent")
	}
	// A token of another worker.
	res, err = s.worker.Outcomes(ctx, "someone-else", []client.OutcomeRequest{client.SnoozeOutcome(jobs[3].ID, client.SnoozeRequest{LeaseToken: jobs[3].LeaseToken})})
	if err != nil || !errors.Is(res[0].Err(), client.ErrInvalidLeaseToken) {
		t.Fatalf("another worker's token: %v %+v", err, res)
	}
}

// TestOutcomesRetryLeaseLost: a batch whose answer was lost is sent again;
// the items the first try applied come back lease-lost and are reported
// as of unknown result (most likely applied).
func TestOutcomesRetryLeaseLost(t *testing.T) {
	t.Parallel()
	s := startServer(t, teststores.Memory(t), core.Config{}, false)
	ctx := context.Background()
	jobs := s.claimN("w", "k", 2)
	u, _ := url.Parse(s.URL)
	rp := httputil.NewSingleHostReverseProxy(u)
	var n atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			rp.ServeHTTP(httptest.NewRecorder(), r)
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	defer hs.Close()
	c, _ := client.New(hs.URL, client.WithToken(workerToken), client.WithLogger(quiet()),
		client.WithRetry(client.RetryPolicy{BaseDelay: time.Millisecond}))
	res, err := c.Outcomes(ctx, "w", []client.OutcomeRequest{
		client.CompleteOutcome(jobs[0].ID, client.CompleteRequest{LeaseToken: jobs[0].LeaseToken}),
		client.CompleteOutcome(jobs[1].ID, client.CompleteRequest{LeaseToken: jobs[1].LeaseToken}),
	})
	if err != nil || n.Load() != 2 {
		t.Fatalf("outcomes through a lossy proxy: %v, %d requests", err, n.Load())
	}
	for _, r := range res {
		if r.Applied || !r.Unknown || r.Err() != nil || !errors.Is(r.Problem, core.ErrLeaseLost) {
			t.Fatalf("result %+v", r)
		}
		if j := s.job(r.JobID); j.State != core.StateCompleted {
			t.Fatalf("job %+v", j)
		}
	}
}
