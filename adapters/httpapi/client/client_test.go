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
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backlogq/backlog/adapters/httpapi/client"
	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/internal/teststores"
)

// TestProblems: error responses decode into *client.Problem and map to the
// core and client sentinels.
func TestProblems(t *testing.T) {
	t.Parallel()
	s := startServer(t, teststores.Memory(t), core.Config{}, false)
	ctx := context.Background()

	_, err := s.producer.GetJob(ctx, 999999)
	var p *client.Problem
	if !errors.As(err, &p) || !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("missing job: %v", err)
	}
	if p.Status != 404 || p.Slug() != "job-not-found" || p.Type != client.ProblemTypeBase+"job-not-found" ||
		p.Title == "" || p.Instance != "/v1/jobs/999999" || p.CorrelationID == "" || p.Method != "GET" {
		t.Fatalf("problem %+v", p)
	}
	if errors.Is(err, core.ErrLeaseLost) || errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("%v matches the wrong sentinels", err)
	}
	if !contains(err.Error(), "GET /v1/jobs/999999: 404 job-not-found") || !contains(err.Error(), p.CorrelationID) {
		t.Fatalf("message %q", err)
	}

	// The per-call correlation id wins over the client's and comes back in
	// the problem; a submitted job keeps it in its metadata.
	cc := s.client(producerToken, client.WithCorrelationID("client-wide"))
	_, err = cc.GetJob(client.WithCallCorrelationID(ctx, "call-42"), 999999)
	if !errors.As(err, &p) || p.CorrelationID != "call-42" {
		t.Fatalf("correlation id: %v", err)
	}
	res, err := cc.Submit(ctx, client.SubmitRequest{Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Job.Metadata["correlation_id"] != "client-wide" {
		t.Fatalf("metadata %v", res.Job.Metadata)
	}

	_, err = s.producer.Submit(ctx, client.SubmitRequest{Kind: "k", Priority: 11})
	if !errors.Is(err, core.ErrInvalidJob) || !errors.As(err, &p) || p.Status != 422 {
		t.Fatalf("invalid job: %v", err)
	}
	_, err = s.producer.SubmitBatch(ctx, []client.SubmitRequest{{Kind: "a"}, {Kind: "b"}, {Kind: "c", Queue: "bad queue"}})
	if !errors.Is(err, core.ErrInvalidJob) || !contains(err.Error(), "jobs[2]") {
		t.Fatalf("invalid batch: %v", err)
	}
	_, err = s.producer.Submit(ctx, client.SubmitRequest{Kind: "k", RunAt: time.Now().Add(time.Hour), Delay: time.Minute})
	if !errors.Is(err, client.ErrInvalidRequest) {
		t.Fatalf("run_at and delay: %v", err)
	}

	if _, err := s.client("wrong").Queues(ctx); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("bad token: %v", err)
	}
	if _, err := s.client("").Queues(ctx); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("no token: %v", err)
	}
	if _, err := s.producer.CancelJob(ctx, res.Job.ID); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("producer cancelling: %v", err)
	}
	if _, err := s.worker.Heartbeat(ctx, "nobody", nil); !errors.Is(err, client.ErrWorkerNotRegistered) {
		t.Fatalf("unknown worker: %v", err)
	}

	// Lease tokens: garbage, another job's, a stale one.
	reg, err := s.worker.RegisterWorker(ctx, "w1", client.RegisterRequest{Name: "test", Queues: []string{"default"}})
	if err != nil {
		t.Fatal(err)
	}
	if reg.Worker.ID != "w1" || reg.Worker.Name != "test" || reg.HeartbeatInterval != 10*time.Second || reg.Lease != 30*time.Second || reg.Worker.Liveness != core.LivenessActive {
		t.Fatalf("registration %+v", reg)
	}
	jobs, err := s.worker.Claim(ctx, "w1", client.ClaimRequest{Limit: 5})
	if err != nil || len(jobs) != 1 || jobs[0].ID != res.Job.ID || jobs[0].LeaseToken == "" || jobs[0].State != core.StateRunning {
		t.Fatalf("claim: %v %+v", err, jobs)
	}
	j := jobs[0]
	if _, err := s.worker.Complete(ctx, j.ID, client.CompleteRequest{LeaseToken: "garbage"}); !errors.Is(err, client.ErrInvalidLeaseToken) {
		t.Fatalf("garbage token: %v", err)
	}
	if _, err := s.worker.Complete(ctx, j.ID+1, client.CompleteRequest{LeaseToken: j.LeaseToken}); !errors.Is(err, client.ErrInvalidLeaseToken) {
		t.Fatalf("another job's token: %v", err)
	}
	if _, err := s.admin.CancelJob(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.worker.Complete(ctx, j.ID, client.CompleteRequest{LeaseToken: j.LeaseToken}); !errors.Is(err, core.ErrLeaseLost) {
		t.Fatalf("stale token: %v", err)
	}
	if _, err := s.admin.CancelJob(ctx, j.ID); !errors.Is(err, core.ErrInvalidState) {
		t.Fatalf("cancelling a cancelled job: %v", err)
	}
}

// TestRoundTrip exercises every endpoint once, on every backend.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	teststores.Run(t, func(t *testing.T, st contract.Store) {
		s := startServer(t, st, core.Config{Retry: core.DelayList{time.Hour}}, false)
		ctx := context.Background()

		// Submit: defaults, options, unique keys.
		deadline := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
		res, err := s.producer.Submit(ctx, client.SubmitRequest{
			Kind: "email", Args: json.RawMessage(`{"to":"a@b"}`), Queue: "mail", Priority: 2, MaxAttempts: 3,
			UniqueKey: "u1", Tags: []string{"smtp"}, Deadline: deadline, Metadata: map[string]string{"k": "v"},
		})
		if err != nil || res.Duplicate {
			t.Fatal(err, res)
		}
		j := res.Job
		if j.Kind != "email" || j.Queue != "mail" || j.Priority != 2 || j.MaxAttempts != 3 || j.State != core.StateAvailable ||
			j.UniqueKey != "u1" || !slices.Equal(j.Tags, []string{"smtp"}) || !j.Deadline.Equal(deadline) || j.Metadata["k"] != "v" ||
			string(j.Args) != `{"to":"a@b"}` || j.CreatedAt.IsZero() || j.RunAt.Location() != time.UTC {
			t.Fatalf("submitted %+v", j)
		}
		dup, err := s.producer.Submit(ctx, client.SubmitRequest{Kind: "email", Queue: "mail", UniqueKey: "u1"})
		if err != nil || !dup.Duplicate || dup.Job.ID != j.ID {
			t.Fatalf("duplicate: %v %+v", err, dup)
		}
		later, err := s.producer.Submit(ctx, client.SubmitRequest{Kind: "later", Delay: time.Hour})
		if err != nil || later.Job.State != core.StateScheduled || time.Until(later.Job.RunAt) < 50*time.Minute {
			t.Fatalf("delayed: %v %+v", err, later)
		}
		var batch []client.SubmitRequest
		for i := range 25 {
			batch = append(batch, client.SubmitRequest{Kind: "n", Args: json.RawMessage(fmt.Sprint(i))})
		}
		results, err := s.producer.SubmitBatch(ctx, batch)
		if err != nil || len(results) != 25 {
			t.Fatal(err, len(results))
		}
		for i, r := range results {
			if string(r.Job.Args) != fmt.Sprint(i) || r.Duplicate {
				t.Fatalf("batch result %d: %+v", i, r)
			}
		}

		// List: pages and the iterator.
		page, err := s.producer.ListJobs(ctx, client.ListParams{Kind: "n", Limit: 10})
		if err != nil || len(page.Jobs) != 10 || page.NextAfter != page.Jobs[9].ID {
			t.Fatalf("page: %v %+v", err, page)
		}
		var ids []int64
		for j, err := range s.producer.AllJobs(ctx, client.ListParams{Kind: "n", Limit: 10}) {
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, j.ID)
		}
		if len(ids) != 25 || !slices.IsSorted(ids) || ids[0] != results[0].Job.ID {
			t.Fatalf("iterated %v", ids)
		}
		desc, err := s.producer.ListJobs(ctx, client.ListParams{Desc: true, Limit: 1, States: []core.State{core.StateScheduled, core.StateAvailable}})
		if err != nil || len(desc.Jobs) != 1 || desc.Jobs[0].ID != results[24].Job.ID {
			t.Fatalf("desc: %v %+v", err, desc)
		}
		sched, err := s.producer.ListJobs(ctx, client.ListParams{States: []core.State{core.StateScheduled}})
		if err != nil || len(sched.Jobs) != 1 || sched.Jobs[0].ID != later.Job.ID || sched.NextAfter != 0 {
			t.Fatalf("scheduled: %v %+v", err, sched)
		}

		// Queues: pause and resume.
		q, err := s.admin.PauseQueue(ctx, "mail")
		if err != nil || q.Queue != "mail" || !q.Paused || q.Counts[core.StateAvailable] != 1 {
			t.Fatalf("pause: %v %+v", err, q)
		}
		// A paused queue gives nothing.
		if _, err := s.worker.RegisterWorker(ctx, "w/1 ü", client.RegisterRequest{Queues: []string{"mail", "default"}, Tags: []string{"smtp"}}); err != nil {
			t.Fatal(err)
		}
		got, err := s.worker.Claim(ctx, "w/1 ü", client.ClaimRequest{Queues: []string{"mail"}, Limit: 10})
		if err != nil || len(got) != 0 {
			t.Fatalf("claim from a paused queue: %v %+v", err, got)
		}
		if q, err = s.admin.ResumeQueue(ctx, "mail"); err != nil || q.Paused {
			t.Fatalf("resume: %v %+v", err, q)
		}
		qs, err := s.producer.Queues(ctx)
		if err != nil || len(qs) != 2 || qs[0].Queue != "default" || qs[0].Counts[core.StateAvailable] != 25 || qs[1].Queue != "mail" {
			t.Fatalf("queues: %v %+v", err, qs)
		}

		// Workers: claim (tags route the tagged job), heartbeat, lease.
		got, err = s.worker.Claim(ctx, "w/1 ü", client.ClaimRequest{Limit: 3})
		if err != nil || len(got) != 3 || got[0].ID != j.ID || got[0].WorkerID != "w/1 ü" || got[0].Attempt != 1 {
			t.Fatalf("claim: %v %+v", err, got)
		}
		ws, err := s.admin.Workers(ctx)
		if err != nil || len(ws) != 1 || ws[0].ID != "w/1 ü" || !slices.Equal(ws[0].Queues, []string{"mail", "default"}) {
			t.Fatalf("workers: %v %+v", err, ws)
		}
		hb, err := s.worker.Heartbeat(ctx, "w/1 ü", []string{got[0].LeaseToken, got[1].LeaseToken, got[2].LeaseToken})
		if err != nil || hb.LeasesExtended != 3 || hb.HandedBack != 0 || hb.Worker.ID != "w/1 ü" {
			t.Fatalf("heartbeat: %v %+v", err, hb)
		}
		until, err := s.worker.ExtendLease(ctx, got[0].ID, client.ExtendLeaseRequest{LeaseToken: got[0].LeaseToken, Extend: 10 * time.Minute})
		if err != nil || time.Until(until) < 9*time.Minute {
			t.Fatalf("extend: %v %s", err, until)
		}
		if err := s.admin.DeleteJob(ctx, got[0].ID); !errors.Is(err, core.ErrInvalidState) {
			t.Fatalf("deleting a running job: %v", err)
		}

		// Outcomes.
		done, err := s.worker.Complete(ctx, got[0].ID, client.CompleteRequest{LeaseToken: got[0].LeaseToken, Result: json.RawMessage(`{"sent": true}`)})
		if err != nil || done.State != core.StateCompleted || string(done.Result) != `{"sent":true}` || done.FinishedAt.IsZero() {
			t.Fatalf("complete: %v %+v", err, done)
		}
		retry := 30 * time.Second
		failed, err := s.worker.Fail(ctx, got[1].ID, client.FailRequest{LeaseToken: got[1].LeaseToken, Error: "boom", Trace: "stack", RetryIn: &retry})
		if err != nil || failed.State != core.StateRetryable || len(failed.Errors) != 1 || failed.Errors[0].Error != "boom" ||
			failed.Errors[0].Trace != "stack" || failed.Errors[0].Attempt != 1 || time.Until(failed.RunAt) < 20*time.Second {
			t.Fatalf("fail: %v %+v", err, failed)
		}
		snoozed, err := s.worker.Snooze(ctx, got[2].ID, client.SnoozeRequest{LeaseToken: got[2].LeaseToken, Delay: time.Minute})
		if err != nil || snoozed.State != core.StateScheduled || snoozed.Attempt != 0 {
			t.Fatalf("snooze: %v %+v", err, snoozed)
		}
		got, err = s.worker.Claim(ctx, "w/1 ü", client.ClaimRequest{Limit: 2})
		if err != nil || len(got) != 2 {
			t.Fatalf("claim: %v %+v", err, got)
		}
		if d, err := s.worker.Fail(ctx, got[0].ID, client.FailRequest{LeaseToken: got[0].LeaseToken, Error: "no", Action: client.FailDiscard}); err != nil || d.State != core.StateDiscarded {
			t.Fatalf("discard: %v %+v", err, d)
		}
		if c, err := s.worker.Fail(ctx, got[1].ID, client.FailRequest{LeaseToken: got[1].LeaseToken, Error: "stop", Action: client.FailCancel}); err != nil || c.State != core.StateCancelled {
			t.Fatalf("cancel: %v %+v", err, c)
		}

		// Admin on final jobs.
		r, err := s.admin.RetryJob(ctx, got[0].ID)
		if err != nil || r.State != core.StateAvailable {
			t.Fatalf("retry: %v %+v", err, r)
		}
		if err := s.admin.DeleteJob(ctx, got[1].ID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.producer.GetJob(ctx, got[1].ID); !errors.Is(err, core.ErrNotFound) {
			t.Fatalf("deleted job: %v", err)
		}
		if err := s.worker.Deregister(ctx, "w/1 ü"); err != nil {
			t.Fatal(err)
		}
		if ws, err := s.admin.Workers(ctx); err != nil || len(ws) != 0 {
			t.Fatalf("after deregister: %v %+v", err, ws)
		}
	})
}

// failingProxy answers the first `fails` requests with status (and a
// problem body when problem is set), then proxies to target.
func failingProxy(t *testing.T, target string, fails int, status int, problem bool) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	var n atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if int(n.Add(1)) <= fails {
			if problem {
				w.Header().Set("Content-Type", "application/problem+json")
				w.WriteHeader(status)
				fmt.Fprintf(w, `{"type":"%sunavailable","title":"Service Unavailable","status":%d,"detail":"store down","correlation_id":"c1"}`, client.ProblemTypeBase, status)
				return
			}
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(status)
			fmt.Fprint(w, "<html>bad gateway</html>")
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs, &n
}

// TestRetries: reads are retried after 502/503/504 and refused
// connections; a submission without a unique key only when the server
// promised nothing was done.
func TestRetries(t *testing.T) {
	t.Parallel()
	s := startServer(t, teststores.Memory(t), core.Config{}, false)
	ctx := context.Background()
	res, err := s.producer.Submit(ctx, client.SubmitRequest{Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	fast := client.WithRetry(client.RetryPolicy{BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond})
	through := func(hs *httptest.Server) *client.Client {
		c, err := client.New(hs.URL, client.WithToken(producerToken), client.WithLogger(quiet()), fast)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	// GET after two plain 503s from a proxy.
	hs, n := failingProxy(t, s.URL, 2, http.StatusServiceUnavailable, false)
	j, err := through(hs).GetJob(ctx, res.Job.ID)
	if err != nil || j.ID != res.Job.ID || n.Load() != 3 {
		t.Fatalf("get through a flaky proxy: %v, %d requests", err, n.Load())
	}

	// Too many failures: the last one is returned.
	hs, n = failingProxy(t, s.URL, 10, http.StatusBadGateway, false)
	_, err = through(hs).GetJob(ctx, res.Job.ID)
	var p *client.Problem
	if !errors.Is(err, client.ErrUnavailable) || !errors.As(err, &p) || p.Status != 502 || p.Slug() != "" || !contains(p.Detail, "bad gateway") || n.Load() != 4 {
		t.Fatalf("persistent 502: %v, %d requests", err, n.Load())
	}

	// A submission is not repeated after a 502 (it may have applied)…
	hs, n = failingProxy(t, s.URL, 1, http.StatusBadGateway, false)
	if _, err := through(hs).Submit(ctx, client.SubmitRequest{Kind: "k"}); !errors.Is(err, client.ErrUnavailable) || n.Load() != 1 {
		t.Fatalf("submit after 502: %v, %d requests", err, n.Load())
	}
	// … unless it has a unique key,
	hs, n = failingProxy(t, s.URL, 1, http.StatusBadGateway, false)
	if r, err := through(hs).Submit(ctx, client.SubmitRequest{Kind: "k", UniqueKey: "once"}); err != nil || r.Duplicate || n.Load() != 2 {
		t.Fatalf("unique submit after 502: %v %+v, %d requests", err, r, n.Load())
	}
	// … or the server said nothing was done (503 unavailable).
	hs, n = failingProxy(t, s.URL, 2, http.StatusServiceUnavailable, true)
	if _, err := through(hs).Submit(ctx, client.SubmitRequest{Kind: "k"}); err != nil || n.Load() != 3 {
		t.Fatalf("submit after 503 unavailable: %v, %d requests", err, n.Load())
	}

	// Connection refused: nothing reached a server, so anything is retried.
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	c, err := client.New(deadURL, client.WithLogger(quiet()), fast)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Submit(ctx, client.SubmitRequest{Kind: "k"})
	var te *client.TransportError
	if !errors.As(err, &te) || te.Sent || !errors.Is(err, client.ErrUnavailable) || !client.IsRetryable(err) {
		t.Fatalf("refused connection: %#v", err)
	}

	// A cancelled context stops the retries and is reported as such.
	hs, _ = failingProxy(t, s.URL, 1000, http.StatusServiceUnavailable, true)
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	slow, _ := client.New(hs.URL, client.WithLogger(quiet()), client.WithRetry(client.RetryPolicy{MaxAttempts: 1000, BaseDelay: 10 * time.Millisecond}))
	if _, err := slow.Queues(cctx); !errors.Is(err, client.ErrUnavailable) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cancelled retries: %v", err)
	}
}

// TestOutcomeRetryLeaseLost: an outcome whose answer was lost is repeated;
// the repeat finds the lease gone (the first try applied) and reports
// success of unknown result.
func TestOutcomeRetryLeaseLost(t *testing.T) {
	t.Parallel()
	s := startServer(t, teststores.Memory(t), core.Config{}, false)
	ctx := context.Background()
	_, err := s.producer.Submit(ctx, client.SubmitRequest{Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.worker.RegisterWorker(ctx, "w", client.RegisterRequest{Queues: []string{"default"}}); err != nil {
		t.Fatal(err)
	}
	jobs, err := s.worker.Claim(ctx, "w", client.ClaimRequest{})
	if err != nil || len(jobs) != 1 {
		t.Fatal(err, jobs)
	}
	// A proxy that applies the first request but answers 502.
	u, _ := url.Parse(s.URL)
	rp := httputil.NewSingleHostReverseProxy(u)
	var n atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			rec := httptest.NewRecorder()
			rp.ServeHTTP(rec, r)
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	defer hs.Close()
	c, _ := client.New(hs.URL, client.WithToken(workerToken), client.WithLogger(quiet()),
		client.WithRetry(client.RetryPolicy{BaseDelay: time.Millisecond}))
	j, err := c.Complete(ctx, jobs[0].ID, client.CompleteRequest{LeaseToken: jobs[0].LeaseToken, Result: json.RawMessage(`1`)})
	if err != nil || j != nil || n.Load() != 2 {
		t.Fatalf("complete through a lossy proxy: %v %+v, %d requests", err, j, n.Load())
	}
	if got := s.job(jobs[0].ID); got.State != core.StateCompleted || string(got.Result) != "1" {
		t.Fatalf("job %+v", got)
	}
}

// TestLongPollClaim: a claim waiting on an empty queue returns the job
// submitted while it waits.
func TestLongPollClaim(t *testing.T) {
	t.Parallel()
	teststores.Run(t, func(t *testing.T, st contract.Store) {
		s := startServer(t, st, core.Config{}, false)
		ctx := context.Background()
		if _, err := s.worker.RegisterWorker(ctx, "poller", client.RegisterRequest{Queues: []string{"q"}}); err != nil {
			t.Fatal(err)
		}
		// A short client timeout: the claim's wait must be added to it.
		c := s.client(workerToken, client.WithTimeout(time.Second), client.WithHTTPClient(&http.Client{Timeout: time.Second}))
		type answer struct {
			jobs []*client.Job
			err  error
		}
		ch := make(chan answer, 1)
		go func() {
			jobs, err := c.Claim(ctx, "poller", client.ClaimRequest{Wait: 30 * time.Second, Limit: 5})
			ch <- answer{jobs, err}
		}()
		time.Sleep(300 * time.Millisecond) // let the claim start waiting (not required for correctness)
		res, err := s.producer.Submit(ctx, client.SubmitRequest{Kind: "k", Queue: "q"})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case a := <-ch:
			if a.err != nil || len(a.jobs) != 1 || a.jobs[0].ID != res.Job.ID || a.jobs[0].LeaseToken == "" {
				t.Fatalf("claim: %v %+v", a.err, a.jobs)
			}
		case <-time.After(25 * time.Second):
			t.Fatal("the long poll did not return the submitted job")
		}
	})
}
