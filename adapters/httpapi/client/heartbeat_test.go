package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backlogq/backlog/adapters/httpapi/client"
	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/internal/syncbuf"
	"github.com/backlogq/backlog/internal/teststores"
)

// beat is one heartbeat request seen by a beatProxy.
type beat struct {
	at     time.Time
	leases []string // nil when the body had no "leases"
	raw    string
}

// beatProxy proxies to a server, recording heartbeat bodies; while
// holdOutcomes is set it answers outcome requests 502, and while down
// every request.
type beatProxy struct {
	*httptest.Server
	holdOutcomes atomic.Bool
	down         atomic.Bool
	refusedBeats atomic.Int32 // heartbeats answered 502

	mu    sync.Mutex
	beats []beat
}

func newBeatProxy(t *testing.T, target string) *beatProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	p := &beatProxy{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		isBeat := strings.HasSuffix(r.URL.Path, "/heartbeat")
		isOutcome := strings.HasSuffix(r.URL.Path, "/outcomes") || strings.HasSuffix(r.URL.Path, "/complete") ||
			strings.HasSuffix(r.URL.Path, "/fail") || strings.HasSuffix(r.URL.Path, "/snooze")
		if p.down.Load() || (isOutcome && p.holdOutcomes.Load()) {
			if isBeat {
				p.refusedBeats.Add(1)
			}
			http.Error(w, "down", http.StatusBadGateway)
			return
		}
		if isBeat {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var req struct {
				Leases []string `json:"leases"`
			}
			_ = json.Unmarshal(body, &req)
			p.mu.Lock()
			p.beats = append(p.beats, beat{at: time.Now(), leases: req.Leases, raw: string(body)})
			p.mu.Unlock()
		}
		// An answer that comes back after the proxy went down is lost
		// too, so no call succeeds during an outage.
		rec := httptest.NewRecorder()
		rp.ServeHTTP(rec, r)
		if p.down.Load() {
			http.Error(w, "down", http.StatusBadGateway)
			return
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}))
	t.Cleanup(p.Close)
	return p
}

// beatAfter waits for a heartbeat sent after at and returns it.
func (p *beatProxy) beatAfter(t *testing.T, at time.Time) beat {
	t.Helper()
	var b beat
	waitFor(t, 20*time.Second, "a heartbeat", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, x := range p.beats {
			if x.at.After(at) {
				b = x
				return true
			}
		}
		return false
	})
	return b
}

// leaseJobs returns the job ids of lease tokens (signed v3 tokens of the
// server, or v2 ones of the fakes), sorted.
func leaseJobs(t *testing.T, tokens []string) []int64 {
	t.Helper()
	var ids []int64
	for _, tok := range tokens {
		parts := strings.Split(tok, ".")
		if !(len(parts) == 7 && parts[0] == "v3" || len(parts) == 5 && parts[0] == "v2") {
			t.Fatalf("lease token %q is not a lease token", tok)
		}
		id, err := strconv.ParseInt(parts[1], 10, 64)
		if err != nil {
			t.Fatalf("lease token %q: %v", tok, err)
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// TestWorkerHeartbeatNamesHeldJobs: every heartbeat of a Worker names the
// leases of exactly the jobs it holds: a running handler's, and a finished
// job's whose outcome the server could not take yet (whose lease goes on
// being renewed); once an outcome is delivered its job is no longer named.
func TestWorkerHeartbeatNamesHeldJobs(t *testing.T) {
	t.Parallel()
	s := startServer(t, teststores.Memory(t), core.Config{HeartbeatInterval: 100 * time.Millisecond}, false)
	ctx := context.Background()
	proxy := newBeatProxy(t, s.URL)
	c, err := client.New(proxy.URL, client.WithToken(workerToken), client.WithLogger(quiet()),
		client.WithRetry(client.RetryPolicy{MaxAttempts: 2, BaseDelay: 5 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	long, _ := s.producer.Submit(ctx, client.SubmitRequest{Kind: "long"})
	quick, _ := s.producer.Submit(ctx, client.SubmitRequest{Kind: "quick"})
	release := make(chan struct{})
	quickDone := make(chan struct{})
	w, err := client.NewWorker(c, client.WorkerConfig{Queues: []string{"default"}, Concurrency: 2, WaitSeconds: 1, Logger: quiet(),
		Handler: func(ctx context.Context, j *client.Job) (json.RawMessage, error) {
			if j.Kind == "long" {
				<-release
			} else {
				close(quickDone)
			}
			return json.RawMessage(`"ok"`), nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	proxy.holdOutcomes.Store(true)
	runWorker(t, w)
	select {
	case <-quickDone:
	case <-time.After(20 * time.Second):
		t.Fatal("the quick job did not run")
	}
	waitFor(t, 20*time.Second, "the long job to run", func() bool { return s.job(long.Job.ID).State == core.StateRunning })

	// The quick job's outcome waits: both jobs are held and named.
	b := proxy.beatAfter(t, time.Now())
	if got := leaseJobs(t, b.leases); !slices.Equal(got, []int64{long.Job.ID, quick.Job.ID}) {
		t.Fatalf("heartbeat names jobs %v, want %v and %v: %s", got, long.Job.ID, quick.Job.ID, b.raw)
	}
	before := s.job(quick.Job.ID)
	time.Sleep(300 * time.Millisecond)
	after := s.job(quick.Job.ID)
	if after.State != core.StateRunning || !after.LeaseUntil.After(before.LeaseUntil) {
		t.Fatalf("the undelivered outcome's lease was not renewed: %s then %s (%s)", before.LeaseUntil, after.LeaseUntil, after.State)
	}

	// Delivered: no longer named.
	proxy.holdOutcomes.Store(false)
	waitFor(t, 30*time.Second, "the quick job's outcome", func() bool { return s.job(quick.Job.ID).State == core.StateCompleted })
	b = proxy.beatAfter(t, time.Now())
	if got := leaseJobs(t, b.leases); !slices.Equal(got, []int64{long.Job.ID}) {
		t.Fatalf("heartbeat after delivery names jobs %v, want only %d: %s", got, long.Job.ID, b.raw)
	}
	close(release)
	waitFor(t, 20*time.Second, "the long job's outcome", func() bool { return s.job(long.Job.ID).State == core.StateCompleted })
	b = proxy.beatAfter(t, time.Now())
	if b.leases == nil || len(b.leases) != 0 || !strings.Contains(b.raw, `"leases":[]`) {
		t.Fatalf("heartbeat of a worker holding nothing: %s", b.raw)
	}
	for _, id := range []int64{long.Job.ID, quick.Job.ID} {
		if j := s.job(id); j.Attempt != 1 || len(j.Errors) != 0 || j.WorkerID != w.ID() {
			t.Fatalf("job %d: %+v", id, j)
		}
	}
}

// TestWorkerLostClaimHandedBack: a job claimed for a running Worker that
// never received the claim's answer (here: claimed for it straight through
// the store) is handed back by its heartbeats once the claim is older than
// the server's grace, without using an attempt, while the job the worker
// runs stays its own.
func TestWorkerLostClaimHandedBack(t *testing.T) {
	t.Parallel()
	clock := &jumpClock{}
	st := teststores.Memory(t)
	s := startServer(t, st, core.Config{HeartbeatInterval: 100 * time.Millisecond, Clock: clock}, false)
	ctx := context.Background()
	mine, _ := s.producer.Submit(ctx, client.SubmitRequest{Kind: "mine"})
	lost, _ := s.producer.Submit(ctx, client.SubmitRequest{Kind: "lost", Queue: "elsewhere", MaxAttempts: 1})
	release := make(chan struct{})
	w := s.newWorker(client.WorkerConfig{ID: "w-lost", WaitSeconds: 1, Handler: func(ctx context.Context, j *client.Job) (json.RawMessage, error) {
		<-release
		return nil, nil
	}})
	runWorker(t, w)
	defer close(release)
	waitFor(t, 20*time.Second, "the worker's job to run", func() bool { return len(w.Running()) == 1 })
	now := clock.Now()
	got, err := st.Claim(ctx, contract.ClaimParams{Queue: "elsewhere", WorkerID: "w-lost", Limit: 1, Now: now, LeaseUntil: now.Add(30 * time.Second)})
	if err != nil || len(got) != 1 || got[0].ID != lost.Job.ID {
		t.Fatalf("claim for the worker: %v %+v", err, got)
	}
	// Within the grace (the answer could be on its way) it stays.
	time.Sleep(500 * time.Millisecond)
	if j := s.job(lost.Job.ID); j.State != core.StateRunning {
		t.Fatalf("lost claim within the grace: %+v", j)
	}
	clock.offset.Store(int64(6 * time.Second))
	waitFor(t, 20*time.Second, "the lost claim to be handed back", func() bool { return s.job(lost.Job.ID).State == core.StateAvailable })
	j := s.job(lost.Job.ID)
	if j.Attempt != 0 || len(j.Errors) != 1 || j.Errors[0].Cause != core.CauseClaimLost {
		t.Fatalf("handed back: %+v", j)
	}
	time.Sleep(300 * time.Millisecond) // a few more heartbeats
	if j := s.job(mine.Job.ID); j.State != core.StateRunning || j.WorkerID != "w-lost" || j.Attempt != 1 || len(j.Errors) != 0 {
		t.Fatalf("the worker's own job: %+v", j)
	}
	if len(w.Running()) != 1 {
		t.Fatalf("running %+v", w.Running())
	}
}

// TestWorkerStopsUnrenewedHandlers: while the server is unreachable a
// Worker heartbeats every second (not at the server's interval), stops a
// handler whose lease it could not renew before the lease runs out (cause
// ErrLeaseUnrenewed, wrapping core.ErrLeaseLost), logs the outage once
// when it starts and once when it ends, and hands the job back without
// using an attempt once the server answers again.
func TestWorkerStopsUnrenewedHandlers(t *testing.T) {
	t.Parallel()
	s := startServer(t, teststores.Memory(t), core.Config{HeartbeatInterval: 2 * time.Second, LeaseDuration: 6 * time.Second}, false)
	ctx := context.Background()
	proxy := newBeatProxy(t, s.URL)
	c, err := client.New(proxy.URL, client.WithToken(workerToken), client.WithLogger(quiet()), client.WithRetry(client.RetryPolicy{MaxAttempts: 1}))
	if err != nil {
		t.Fatal(err)
	}
	r, _ := s.producer.Submit(ctx, client.SubmitRequest{Kind: "k"})
	type stop struct {
		at    time.Time
		cause error
	}
	stops := make(chan stop, 1)
	var runs atomic.Int32
	var logs syncbuf.Buffer
	w, err := client.NewWorker(c, client.WorkerConfig{Queues: []string{"default"}, WaitSeconds: 1,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Handler: func(ctx context.Context, j *client.Job) (json.RawMessage, error) {
			if runs.Add(1) > 1 {
				return json.RawMessage(`"second run"`), nil
			}
			<-ctx.Done()
			stops <- stop{time.Now(), context.Cause(ctx)}
			return nil, ctx.Err()
		}})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	waitFor(t, 20*time.Second, "the job to run", func() bool { return len(w.Running()) == 1 })
	proxy.beatAfter(t, time.Now()) // a renewal just happened

	downAt := time.Now()
	proxy.down.Store(true)
	time.Sleep(100 * time.Millisecond) // let a renewal in flight land
	leaseUntil := s.job(r.Job.ID).LeaseUntil
	var st stop
	select {
	case st = <-stops:
	case <-time.After(20 * time.Second):
		t.Fatal("the handler was not stopped")
	}
	if !errors.Is(st.cause, client.ErrLeaseUnrenewed) || !errors.Is(st.cause, core.ErrLeaseLost) {
		t.Fatalf("cause %v", st.cause)
	}
	if !st.at.Before(leaseUntil) {
		t.Fatalf("handler stopped at %s, after its lease ran out at %s", st.at, leaseUntil)
	}
	if j := s.job(r.Job.ID); j.State != core.StateRunning {
		t.Fatalf("job during the outage: %+v", j)
	}
	// Keep the server unreachable for 3 s more, and at least 5.5 s in all:
	// under load the handler may be stopped early (the worker's view of
	// its lease lags the renewal that just landed), and the heartbeat
	// count below needs the whole window.
	time.Sleep(max(3*time.Second, time.Until(downAt.Add(5500*time.Millisecond))))
	window := time.Since(downAt)
	refused := proxy.refusedBeats.Load()
	proxy.down.Store(false)
	// At the server's 2 s interval a window of over 5 s would see at most
	// 3 heartbeats; retrying every second, 4 or more.
	if window < 5*time.Second || refused < 4 {
		t.Fatalf("%d heartbeats in an outage of %s", refused, window)
	}

	waitFor(t, 30*time.Second, "the job to run again and complete", func() bool { return s.job(r.Job.ID).State == core.StateCompleted })
	j := s.job(r.Job.ID)
	if j.Attempt != 1 || string(j.Result) != `"second run"` || runs.Load() != 2 {
		t.Fatalf("job after the outage: %+v (runs %d)", j, runs.Load())
	}
	// Handed back as in process: one error entry with cause
	// lease_unrenewed, the attempt given back.
	if len(j.Errors) != 1 || j.Errors[0].Cause != core.CauseLeaseUnrenewed {
		t.Fatalf("errors after the hand-back: %+v; want one entry with cause %s", j.Errors, core.CauseLeaseUnrenewed)
	}
	waitFor(t, 10*time.Second, "the end of the outage to be logged", func() bool {
		return strings.Contains(logs.String(), "server reachable again")
	})
	out := logs.String()
	if n := strings.Count(out, "level=ERROR msg=\"backlog worker: server unreachable;"); n != 1 {
		t.Fatalf("outage start logged %d times:\n%s", n, out)
	}
	if n := strings.Count(out, "server reachable again"); n != 1 {
		t.Fatalf("outage end logged %d times:\n%s", n, out)
	}
	if n := strings.Count(out, "level=WARN") - strings.Count(out, "lease could not be renewed"); n != 0 {
		t.Fatalf("%d warnings besides the stopped handler:\n%s", n, out)
	}
}

// TestWorkerHandsBackUnaskedJobs: jobs of a claim's answer beyond what the
// worker asked for are not run; they are held (named by heartbeats) until
// their hand-back (a snooze) is delivered.
func TestWorkerHandsBackUnaskedJobs(t *testing.T) {
	t.Parallel()
	var (
		mu       sync.Mutex
		beats    [][]string
		outcomes []map[string]any
		claims   int
	)
	holdOutcomes := atomic.Bool{}
	holdOutcomes.Store(true)
	tok := func(id int) string { return "v2." + strconv.Itoa(id) + ".1.1.dw" }
	worker := map[string]any{"id": "w", "queues": []string{"default"}}
	writeJSON := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /v1/workers/w", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"worker": worker, "heartbeat_interval_seconds": 0.05, "lease_seconds": 30})
	})
	mux.HandleFunc("DELETE /v1/workers/w", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("POST /v1/workers/w/claim", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		claims++
		first := claims == 1
		mu.Unlock()
		if !first {
			select {
			case <-time.After(50 * time.Millisecond):
			case <-r.Context().Done():
			}
			writeJSON(w, map[string]any{"jobs": []any{}})
			return
		}
		var jobs []map[string]any
		for id := 1; id <= 3; id++ {
			jobs = append(jobs, map[string]any{"id": id, "queue": "default", "kind": "k", "args": map[string]any{}, "state": "running",
				"attempt": 1, "max_attempts": 5, "worker_id": "w", "lease_token": tok(id)})
		}
		writeJSON(w, map[string]any{"jobs": jobs})
	})
	mux.HandleFunc("POST /v1/workers/w/heartbeat", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Leases []string `json:"leases"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		slices.Sort(req.Leases)
		mu.Lock()
		beats = append(beats, req.Leases)
		mu.Unlock()
		writeJSON(w, map[string]any{"worker": worker, "leases_extended": len(req.Leases), "handed_back": 0})
	})
	mux.HandleFunc("POST /v1/workers/w/outcomes", func(w http.ResponseWriter, r *http.Request) {
		if holdOutcomes.Load() {
			http.Error(w, "down", http.StatusBadGateway)
			return
		}
		var req struct {
			Outcomes []map[string]any `json:"outcomes"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		var res []map[string]any
		mu.Lock()
		for _, o := range req.Outcomes {
			outcomes = append(outcomes, o)
			res = append(res, map[string]any{"job_id": o["job_id"], "applied": true, "state": "available"})
		}
		mu.Unlock()
		writeJSON(w, map[string]any{"results": res})
	})
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)

	c, err := client.New(hs.URL, client.WithLogger(quiet()), client.WithRetry(client.RetryPolicy{MaxAttempts: 1}))
	if err != nil {
		t.Fatal(err)
	}
	var ran sync.Map
	release := make(chan struct{})
	w, err := client.NewWorker(c, client.WorkerConfig{ID: "w", Queues: []string{"default"}, Concurrency: 1, WaitSeconds: 1, Logger: quiet(),
		Handler: func(ctx context.Context, j *client.Job) (json.RawMessage, error) {
			ran.Store(j.ID, true)
			<-release
			return nil, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	lastBeat := func() []string {
		mu.Lock()
		defer mu.Unlock()
		if len(beats) == 0 {
			return nil
		}
		return beats[len(beats)-1]
	}
	all := []string{tok(1), tok(2), tok(3)}
	waitFor(t, 20*time.Second, "a heartbeat naming every job of the answer", func() bool { return slices.Equal(lastBeat(), all) })
	holdOutcomes.Store(false)
	waitFor(t, 20*time.Second, "the unasked jobs to be handed back", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(outcomes) == 2
	})
	mu.Lock()
	for _, o := range outcomes {
		if o["type"] != "snooze" || (o["lease_token"] != tok(2) && o["lease_token"] != tok(3)) {
			t.Errorf("outcome %v", o)
		}
	}
	mu.Unlock()
	waitFor(t, 20*time.Second, "heartbeats naming only the running job", func() bool { return slices.Equal(lastBeat(), []string{tok(1)}) })
	if _, ok := ran.Load(int64(2)); ok {
		t.Fatal("an unasked job ran")
	}
	if _, ok := ran.Load(int64(3)); ok {
		t.Fatal("an unasked job ran")
	}
	close(release)
}

// TestWorkerDoesNotHandBackAFinishedHandler: a handler that returns a
// result after the Worker stopped it for a lease it could not renew (it
// finished as the stop came) did the job's work; the Worker reports the
// completion once the server answers, and the job is not handed back to
// run again.
func TestWorkerDoesNotHandBackAFinishedHandler(t *testing.T) {
	t.Parallel()
	s := startServer(t, teststores.Memory(t), core.Config{HeartbeatInterval: 2 * time.Second, LeaseDuration: 6 * time.Second}, false)
	ctx := context.Background()
	proxy := newBeatProxy(t, s.URL)
	c, err := client.New(proxy.URL, client.WithToken(workerToken), client.WithLogger(quiet()), client.WithRetry(client.RetryPolicy{MaxAttempts: 1}))
	if err != nil {
		t.Fatal(err)
	}
	r, _ := s.producer.Submit(ctx, client.SubmitRequest{Kind: "k"})
	var runs atomic.Int32
	stopped := make(chan struct{})
	w, err := client.NewWorker(c, client.WorkerConfig{Queues: []string{"default"}, WaitSeconds: 1, Logger: quiet(),
		Handler: func(ctx context.Context, j *client.Job) (json.RawMessage, error) {
			if runs.Add(1) > 1 {
				return json.RawMessage(`"second run"`), nil
			}
			<-ctx.Done() // the work ends just as the stop comes
			close(stopped)
			return json.RawMessage(`"first run"`), nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	waitFor(t, 20*time.Second, "the job to run", func() bool { return len(w.Running()) == 1 })
	proxy.down.Store(true)
	select {
	case <-stopped:
	case <-time.After(20 * time.Second):
		t.Fatal("the handler was not stopped")
	}
	proxy.down.Store(false)
	waitFor(t, 30*time.Second, "the job to complete", func() bool { return s.job(r.Job.ID).State == core.StateCompleted })
	time.Sleep(2 * time.Second) // a hand-back would have run it again by now
	j := s.job(r.Job.ID)
	if runs.Load() != 1 || string(j.Result) != `"first run"` || len(j.Errors) != 0 {
		t.Fatalf("job after the outage: %+v (runs %d); want the first run's completion, never handed back", j, runs.Load())
	}
}
