package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
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

// countingProxy proxies to target and counts requests per path suffix.
// POST …/outcomes is answered by the proxy itself in mode "old" (the 404
// problem of a server that does not have the route) and "broken" (a 500
// internal problem).
type countingProxy struct {
	*httptest.Server
	mu     sync.Mutex
	counts map[string]int
}

func newCountingProxy(t *testing.T, target string, mode string) *countingProxy {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorLog = log.New(io.Discard, "", 0) // a claim cut short at shutdown is no news
	p := &countingProxy{counts: map[string]int{}}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		last := r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
		p.mu.Lock()
		p.counts[last]++
		p.mu.Unlock()
		if last == "outcomes" {
			switch mode {
			case "old":
				w.Header().Set("Content-Type", "application/problem+json")
				w.WriteHeader(http.StatusNotFound)
				fmt.Fprintf(w, `{"type":"%snot-found","title":"Not found","status":404,"detail":"no route for POST %s"}`, client.ProblemTypeBase, r.URL.Path)
				return
			case "broken":
				w.Header().Set("Content-Type", "application/problem+json")
				w.WriteHeader(http.StatusInternalServerError)
				fmt.Fprintf(w, `{"type":"%sinternal","title":"Internal server error","status":500,"detail":"internal error"}`, client.ProblemTypeBase)
				return
			}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *countingProxy) count(suffix string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts[suffix]
}

// drainThrough runs a worker through proxy on n short jobs (some of them
// failing, snoozing or with a result over the server's limit) until all
// are final, and returns the worker's jobs by kind.
func drainThrough(t *testing.T, s *testServer, proxy *countingProxy, n int) {
	t.Helper()
	ctx := context.Background()
	var reqs []client.SubmitRequest
	for i := range n {
		kind := "ok"
		switch i % 50 {
		case 1:
			kind = "fail"
		case 2:
			kind = "huge"
		}
		reqs = append(reqs, client.SubmitRequest{Kind: kind, MaxAttempts: 1, Args: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))})
	}
	for from := 0; from < n; from += 1000 {
		if _, err := s.producer.SubmitBatch(ctx, reqs[from:min(from+1000, n)]); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.New(proxy.URL, client.WithToken(workerToken), client.WithLogger(quiet()))
	if err != nil {
		t.Fatal(err)
	}
	w, err := client.NewWorker(c, client.WorkerConfig{Queues: []string{"default"}, Concurrency: 20, WaitSeconds: 1, Logger: quiet(),
		Handler: func(ctx context.Context, j *client.Job) (json.RawMessage, error) {
			switch j.Kind {
			case "fail":
				return nil, errors.New("failed on purpose")
			case "huge":
				return json.RawMessage(`"` + strings.Repeat("x", 300) + `"`), nil
			}
			return j.Args, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	stop := runWorker(t, w)
	waitFor(t, 60*time.Second, "every job to be final", func() bool {
		c := s.counts()
		return c[core.StateCompleted]+c[core.StateDiscarded] == n
	})
	stop()
	for _, j := range s.allJobs() {
		switch j.Kind {
		case "ok":
			if j.State != core.StateCompleted || string(j.Result) != string(j.Args) {
				t.Fatalf("job %d: %s result %s args %s", j.ID, j.State, j.Result, j.Args)
			}
		case "fail":
			if j.State != core.StateDiscarded || j.Errors[0].Error != "failed on purpose" {
				t.Fatalf("job %d: %s %+v", j.ID, j.State, j.Errors)
			}
		case "huge":
			if j.State != core.StateDiscarded || !strings.Contains(j.Errors[0].Error, "completion refused by the server") {
				t.Fatalf("job %d: %s %+v", j.ID, j.State, j.Errors)
			}
		}
	}
}

// TestWorkerBatchesOutcomes: a worker running many short jobs reports
// their outcomes in far fewer requests than jobs.
func TestWorkerBatchesOutcomes(t *testing.T) {
	t.Parallel()
	s := startServer(t, teststores.Memory(t), core.Config{MaxResultBytes: 100}, false)
	proxy := newCountingProxy(t, s.URL, "")
	const n = 2000
	drainThrough(t, s, proxy, n)
	batches, singles := proxy.count("outcomes"), proxy.count("complete")+proxy.count("fail")+proxy.count("snooze")
	t.Logf("%d jobs: %d outcome requests, %d claims", n, batches, proxy.count("claim"))
	if singles != 0 || batches == 0 || batches > n/4 {
		t.Fatalf("%d jobs took %d batch and %d single outcome requests", n, batches, singles)
	}
}

// TestWorkerFallsBackToSingleOutcomes: against a server without the batch
// endpoint the worker reports each outcome on its own endpoint.
func TestWorkerFallsBackToSingleOutcomes(t *testing.T) {
	t.Parallel()
	s := startServer(t, teststores.Memory(t), core.Config{MaxResultBytes: 100}, false)
	proxy := newCountingProxy(t, s.URL, "old")
	const n = 200
	drainThrough(t, s, proxy, n)
	if got := proxy.count("outcomes"); got != 1 {
		t.Fatalf("%d batch requests, want the one that found no endpoint", got)
	}
	// Every ok job completes once; a huge result is refused once, then
	// failed; failures fail.
	if c, f := proxy.count("complete"), proxy.count("fail"); c != n-n/50 || f != 2*n/50 {
		t.Fatalf("%d complete and %d fail requests for %d jobs", c, f, n)
	}
}

// TestWorkerSplitsFailingBatches: a batch the server keeps failing on
// (500) is reported one outcome at a time.
func TestWorkerSplitsFailingBatches(t *testing.T) {
	t.Parallel()
	s := startServer(t, teststores.Memory(t), core.Config{MaxResultBytes: 100}, false)
	proxy := newCountingProxy(t, s.URL, "broken")
	const n = 50
	drainThrough(t, s, proxy, n)
	if b, c := proxy.count("outcomes"), proxy.count("complete"); b < 3 || c != n-n/50 {
		t.Fatalf("%d batch and %d complete requests for %d jobs", b, c, n)
	}
}

// TestWorkerShutdownFlushesOutcomes: outcomes gathered for a long batch
// wait are sent before the worker deregisters.
func TestWorkerShutdownFlushesOutcomes(t *testing.T) {
	t.Parallel()
	s := startServer(t, teststores.Memory(t), core.Config{}, false)
	ctx := context.Background()
	var ids []int64
	for range 5 {
		r, err := s.producer.Submit(ctx, client.SubmitRequest{Kind: "k"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.Job.ID)
	}
	var ran atomic.Int32
	w := s.newWorker(client.WorkerConfig{Concurrency: 5, OutcomeBatchWait: time.Second,
		Handler: func(ctx context.Context, j *client.Job) (json.RawMessage, error) {
			ran.Add(1)
			return json.RawMessage(`"done"`), nil
		}})
	stop := runWorker(t, w)
	waitFor(t, 20*time.Second, "every handler to run", func() bool { return ran.Load() == 5 })
	stop()
	for _, id := range ids {
		if j := s.job(id); j.State != core.StateCompleted || string(j.Result) != `"done"` {
			t.Fatalf("job %+v", j)
		}
	}
	if ws, err := s.admin.Workers(ctx); err != nil || len(ws) != 0 {
		t.Fatalf("workers left registered: %v %+v", err, ws)
	}
}
