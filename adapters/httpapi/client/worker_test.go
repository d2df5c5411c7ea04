package client_test

import (
	"context"
	"encoding/json"
	"errors"
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
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/internal/teststores"
)

type tracedError struct{ msg, trace string }

func (e *tracedError) Error() string      { return e.msg }
func (e *tracedError) ErrorTrace() string { return e.trace }

// TestWorkerOutcomes: the handler's return picks each job's outcome.
func TestWorkerOutcomes(t *testing.T) {
	t.Parallel()
	s := startServer(t, teststores.Memory(t), core.Config{}, false)
	ctx := context.Background()
	submit := func(kind string, maxAttempts int) int64 {
		t.Helper()
		r, err := s.producer.Submit(ctx, client.SubmitRequest{Kind: kind, MaxAttempts: maxAttempts, Args: json.RawMessage(`{"x":1}`)})
		if err != nil {
			t.Fatal(err)
		}
		return r.Job.ID
	}
	ids := map[string]int64{}
	for _, k := range []string{"ok", "empty", "snooze", "cancel", "permanent", "retryin", "panic", "badjson", "continue", "badcontinue"} {
		ids[k] = submit(k, 5)
	}
	ids["exhausted"] = submit("exhausted", 1)

	w := s.newWorker(client.WorkerConfig{Concurrency: 3, Handler: func(ctx context.Context, j *client.Job) (json.RawMessage, error) {
		switch j.Kind {
		case "ok":
			return json.RawMessage(`{"args": ` + string(j.Args) + `}`), nil
		case "empty":
			return nil, nil
		case "snooze":
			return nil, core.Snooze(time.Hour)
		case "cancel":
			return nil, core.Cancel(errors.New("no longer wanted"))
		case "permanent":
			return nil, core.Permanent(&tracedError{"bad input", "trace of bad input"})
		case "retryin":
			return nil, client.RetryIn(errors.New("later"), time.Hour)
		case "panic":
			panic("oops")
		case "badjson":
			return json.RawMessage(`{not json`), nil
		case "continue":
			return nil, core.Continue("continued", json.RawMessage(`{"step":2}`), time.Time{})
		case "continued":
			return json.RawMessage(`{"from":` + string(j.Args) + `}`), nil
		case "badcontinue":
			return nil, core.Continue("next", nil, time.Time{})
		}
		return nil, &tracedError{"exhausted " + j.Kind, "the trace"}
	}})
	stop := runWorker(t, w)
	final := func(kind string, state core.State) func() bool {
		return func() bool { return s.job(ids[kind]).State == state }
	}
	for kind, state := range map[string]core.State{
		"ok": core.StateCompleted, "empty": core.StateCompleted, "snooze": core.StateScheduled, "cancel": core.StateCancelled,
		"permanent": core.StateDiscarded, "retryin": core.StateRetryable, "panic": core.StateRetryable,
		"badjson": core.StateRetryable, "continue": core.StateCompleted, "badcontinue": core.StateRetryable,
		"exhausted": core.StateDiscarded,
	} {
		waitFor(t, 20*time.Second, kind+" to be "+string(state), final(kind, state))
	}
	stop()

	j := s.job(ids["ok"])
	if string(j.Result) != `{"args":{"x":1}}` || j.WorkerID != w.ID() || j.Attempt != 1 {
		t.Errorf("ok: %+v", j)
	}
	if j := s.job(ids["empty"]); len(j.Result) != 0 {
		t.Errorf("empty result: %q", j.Result)
	}
	if j := s.job(ids["snooze"]); j.Attempt != 0 || time.Until(j.RunAt) < 50*time.Minute || len(j.Errors) != 0 {
		t.Errorf("snooze: %+v", j)
	}
	if j := s.job(ids["cancel"]); len(j.Errors) != 1 || j.Errors[0].Error != "job cancelled: no longer wanted" {
		t.Errorf("cancel: %+v", j.Errors)
	}
	if j := s.job(ids["permanent"]); len(j.Errors) != 1 || j.Errors[0].Error != "permanent failure: bad input" || j.Errors[0].Trace != "trace of bad input" {
		t.Errorf("permanent: %+v", j.Errors)
	}
	if j := s.job(ids["retryin"]); time.Until(j.RunAt) < 50*time.Minute || j.Errors[0].Error != "later" {
		t.Errorf("retryin: %+v", j)
	}
	if j := s.job(ids["panic"]); j.Errors[0].Error != "handler panicked: oops" || !strings.Contains(j.Errors[0].Trace, "goroutine") {
		t.Errorf("panic: %+v", j.Errors)
	}
	if j := s.job(ids["badjson"]); !strings.Contains(j.Errors[0].Error, "not valid JSON") {
		t.Errorf("badjson: %+v", j.Errors)
	}
	// The continuation ran as its next step on the same job.
	if j := s.job(ids["continue"]); j.Kind != "continued" || string(j.Result) != `{"from":{"step":2}}` || j.Attempt != 1 || len(j.Errors) != 0 {
		t.Errorf("continue: %+v %s", j, j.Result)
	}
	// Invalid (no args): the attempt fails, as in process.
	if j := s.job(ids["badcontinue"]); j.Kind != "badcontinue" || !strings.Contains(j.Errors[0].Error, "invalid continuation") {
		t.Errorf("badcontinue: %+v", j.Errors)
	}
	if j := s.job(ids["exhausted"]); j.Attempt != 1 || j.Errors[0].Error != "exhausted exhausted" || j.Errors[0].Trace != "the trace" {
		t.Errorf("exhausted: %+v", j)
	}
	if ws, err := s.admin.Workers(ctx); err != nil || len(ws) != 0 {
		t.Errorf("the stopped worker should have deregistered: %v %+v", err, ws)
	}
}

// TestWorkerLeaseLost: a job cancelled while it runs stops its handler
// (cause core.ErrLeaseLost) at the next heartbeat.
func TestWorkerLeaseLost(t *testing.T) {
	t.Parallel()
	s := startServer(t, teststores.Memory(t), core.Config{HeartbeatInterval: 100 * time.Millisecond}, false)
	ctx := context.Background()
	r, err := s.producer.Submit(ctx, client.SubmitRequest{Kind: "block"})
	if err != nil {
		t.Fatal(err)
	}
	causes := make(chan error, 1)
	w := s.newWorker(client.WorkerConfig{Handler: func(ctx context.Context, j *client.Job) (json.RawMessage, error) {
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return nil, ctx.Err()
	}})
	runWorker(t, w)
	waitFor(t, 20*time.Second, "the job to run", func() bool { return len(w.Running()) == 1 })
	if _, err := s.admin.CancelJob(ctx, r.Job.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case cause := <-causes:
		if !errors.Is(cause, core.ErrLeaseLost) {
			t.Fatalf("cause %v", cause)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the handler was not stopped")
	}
	if j := s.job(r.Job.ID); j.State != core.StateCancelled {
		t.Fatalf("job %+v", j)
	}
}

// TestWorkerShutdown: a soft stop lets a short job finish; a handler still
// running after ShutdownTimeout is cancelled and its job snoozed back
// without using an attempt.
func TestWorkerShutdown(t *testing.T) {
	t.Parallel()
	s := startServer(t, teststores.Memory(t), core.Config{}, false)
	ctx := context.Background()
	short, _ := s.producer.Submit(ctx, client.SubmitRequest{Kind: "short"})
	long, _ := s.producer.Submit(ctx, client.SubmitRequest{Kind: "long"})
	release := make(chan struct{})
	var hardStop atomic.Bool
	w := s.newWorker(client.WorkerConfig{ShutdownTimeout: 300 * time.Millisecond, Handler: func(ctx context.Context, j *client.Job) (json.RawMessage, error) {
		if j.Kind == "short" {
			<-release
			return json.RawMessage(`"done"`), nil
		}
		<-ctx.Done()
		hardStop.Store(errors.Is(context.Cause(ctx), client.ErrShutdown))
		return nil, ctx.Err()
	}})
	stop := runWorker(t, w)
	waitFor(t, 20*time.Second, "both jobs to run", func() bool { return len(w.Running()) == 2 })
	go func() { time.Sleep(100 * time.Millisecond); close(release) }()
	stop()
	if j := s.job(short.Job.ID); j.State != core.StateCompleted || string(j.Result) != `"done"` {
		t.Fatalf("short job: %+v", j)
	}
	if j := s.job(long.Job.ID); j.State != core.StateAvailable || j.Attempt != 0 || len(j.Errors) != 0 || !hardStop.Load() {
		t.Fatalf("long job: %+v (hard stop seen: %v)", j, hardStop.Load())
	}
}

// TestWorkerStopNow: StopNow skips the shutdown timeout.
func TestWorkerStopNow(t *testing.T) {
	t.Parallel()
	s := startServer(t, teststores.Memory(t), core.Config{}, false)
	ctx := context.Background()
	long, _ := s.producer.Submit(ctx, client.SubmitRequest{Kind: "long"})
	w := s.newWorker(client.WorkerConfig{ShutdownTimeout: time.Hour, Handler: func(ctx context.Context, j *client.Job) (json.RawMessage, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}})
	stop := runWorker(t, w)
	waitFor(t, 20*time.Second, "the job to run", func() bool { return len(w.Running()) == 1 })
	w.StopNow()
	stop()
	if j := s.job(long.Job.ID); j.State != core.StateAvailable || j.Attempt != 0 {
		t.Fatalf("long job: %+v", j)
	}
}

// switchProxy proxies to target while up, and answers 502 while down.
type switchProxy struct {
	*httptest.Server
	down     atomic.Bool
	refused  atomic.Int32 // requests answered 502
	outcomes atomic.Int32 // outcome requests (single or batched) answered 502
}

func newSwitchProxy(t *testing.T, target string) *switchProxy {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	p := &switchProxy{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.down.Load() {
			p.refused.Add(1)
			if strings.HasSuffix(r.URL.Path, "/complete") || strings.HasSuffix(r.URL.Path, "/outcomes") {
				p.outcomes.Add(1)
			}
			http.Error(w, "down", http.StatusBadGateway)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.Close)
	return p
}

// TestWorkerServerDown: while the server is unreachable the worker keeps
// retrying: the outcome of a job that finished meanwhile is delivered once
// the server is back, and claiming resumes.
func TestWorkerServerDown(t *testing.T) {
	t.Parallel()
	s := startServer(t, teststores.Memory(t), core.Config{HeartbeatInterval: 100 * time.Millisecond}, false)
	ctx := context.Background()
	proxy := newSwitchProxy(t, s.URL)
	c, err := client.New(proxy.URL, client.WithToken(workerToken), client.WithLogger(quiet()),
		client.WithRetry(client.RetryPolicy{MaxAttempts: 2, BaseDelay: 5 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	first, _ := s.producer.Submit(ctx, client.SubmitRequest{Kind: "k"})
	release := make(chan struct{})
	w, err := client.NewWorker(c, client.WorkerConfig{Queues: []string{"default"}, WaitSeconds: 1, Logger: quiet(),
		Handler: func(ctx context.Context, j *client.Job) (json.RawMessage, error) {
			if j.ID == first.Job.ID {
				<-release
			}
			return json.RawMessage(`"ok"`), nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	waitFor(t, 20*time.Second, "the job to run", func() bool { return len(w.Running()) == 1 })
	proxy.down.Store(true)
	close(release)
	waitFor(t, 20*time.Second, "outcome deliveries to fail", func() bool { return proxy.outcomes.Load() >= 3 })
	if j := s.job(first.Job.ID); j.State != core.StateRunning {
		t.Fatalf("job during the outage: %+v", j)
	}
	proxy.down.Store(false)
	waitFor(t, 30*time.Second, "the outcome to be delivered", func() bool { return s.job(first.Job.ID).State == core.StateCompleted })
	second, _ := s.producer.Submit(ctx, client.SubmitRequest{Kind: "k"})
	waitFor(t, 30*time.Second, "a new job to be done", func() bool { return s.job(second.Job.ID).State == core.StateCompleted })
}

// jumpClock is the system clock shifted by an offset tests can move.
type jumpClock struct{ offset atomic.Int64 }

func (c *jumpClock) Now() time.Time {
	return contract.UTC(time.Now().Add(time.Duration(c.offset.Load())))
}

// TestWorkerReregisters: a worker the server declared dead (its clock
// jumps past WorkerDeadAfter) registers again and goes on.
func TestWorkerReregisters(t *testing.T) {
	t.Parallel()
	clock := &jumpClock{}
	s := startServer(t, teststores.Memory(t), core.Config{HeartbeatInterval: 50 * time.Millisecond, Clock: clock}, false)
	ctx := context.Background()
	var mu sync.Mutex
	registrations := 0
	w := s.newWorker(client.WorkerConfig{ID: "phoenix", WaitSeconds: 1,
		OnRegister: func(*client.Registration) { mu.Lock(); registrations++; mu.Unlock() },
		Handler:    func(ctx context.Context, j *client.Job) (json.RawMessage, error) { return nil, nil }})
	runWorker(t, w)
	count := func() int { mu.Lock(); defer mu.Unlock(); return registrations }
	waitFor(t, 20*time.Second, "the first registration", func() bool { return count() == 1 })
	clock.offset.Store(int64(time.Hour))
	waitFor(t, 20*time.Second, "the second registration", func() bool { return count() >= 2 })
	r, _ := s.producer.Submit(ctx, client.SubmitRequest{Kind: "k"})
	waitFor(t, 20*time.Second, "the job to be done", func() bool { return s.job(r.Job.ID).State == core.StateCompleted })
	if j := s.job(r.Job.ID); j.WorkerID != "phoenix" {
		t.Fatalf("job %+v", j)
	}
}

// TestNewWorkerValidates: bad configurations are refused.
func TestNewWorkerValidates(t *testing.T) {
	t.Parallel()
	c, err := client.New("http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	h := func(context.Context, *client.Job) (json.RawMessage, error) { return nil, nil }
	for name, cfg := range map[string]client.WorkerConfig{
		"no handler": {Queues: []string{"q"}},
		"no queues":  {Handler: h},
		"bad queue":  {Handler: h, Queues: []string{"a b"}},
		"long id":    {Handler: h, Queues: []string{"q"}, ID: strings.Repeat("x", 256)},
		"long wait":  {Handler: h, Queues: []string{"q"}, WaitSeconds: 61},
	} {
		if _, err := client.NewWorker(c, cfg); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	for _, u := range []string{"", "127.0.0.1:8080", "ftp://x", "http://x?q=1"} {
		if _, err := client.New(u); err == nil {
			t.Errorf("New(%q): no error", u)
		}
	}
}
