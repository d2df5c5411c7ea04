package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backlogq/backlog/adapters/httpapi/client"
	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/internal/teststores"
)

// failureEvents records the cause and reason of every failed attempt's
// event, by job.
type failureEvents struct {
	mu sync.Mutex
	m  map[int64]core.Event
}

func (f *failureEvents) Observe(e core.Event) {
	switch e.Kind {
	case core.EventJobRetried, core.EventJobDiscarded, core.EventJobCancelled:
	default:
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.m[e.Job.ID] = e
}

func (f *failureEvents) get(id int64) (core.Event, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.m[id]
	return e, ok
}

// TestWorkerReportsCause: a Worker sends the cause of its handler's
// failure (core.CauseOf, and the job's deadline it runs handlers under);
// the server stores it in the error entry and its event carries it.
func TestWorkerReportsCause(t *testing.T) {
	t.Parallel()
	events := &failureEvents{m: map[int64]core.Event{}}
	s := startServer(t, teststores.Memory(t), core.Config{Retry: core.DelayList{time.Hour}, Observers: []core.Observer{events}}, false)
	w := s.newWorker(client.WorkerConfig{WaitSeconds: 1, Handler: func(ctx context.Context, j *client.Job) (json.RawMessage, error) {
		switch j.Kind {
		case "panic":
			panic("kaboom")
		case "timeout":
			return nil, &core.TimeoutError{After: time.Second, Err: errors.New("slow")}
		case "unknown":
			return nil, fmt.Errorf("%w %q here", core.ErrUnknownKind, j.Kind)
		case "deadline":
			<-ctx.Done()
			return nil, ctx.Err()
		case "cancelled-timeout":
			return nil, core.Cancel(&core.TimeoutError{After: time.Second, Err: errors.New("slow")})
		}
		return nil, errors.New("boom")
	}})
	ctx := context.Background()
	want := map[string]struct {
		cause  string
		state  core.State
		reason string
	}{
		"plain":             {core.CauseHandlerError, core.StateRetryable, ""},
		"panic":             {core.CausePanic, core.StateRetryable, ""},
		"timeout":           {core.CauseTimeout, core.StateRetryable, ""},
		"unknown":           {core.CauseUnknownKind, core.StateRetryable, ""},
		"deadline":          {core.CauseDeadline, core.StateDiscarded, core.ReasonDeadline},
		"cancelled-timeout": {core.CauseTimeout, core.StateCancelled, ""},
	}
	ids := map[string]int64{}
	for kind := range want {
		req := client.SubmitRequest{Kind: kind, MaxAttempts: 5}
		if kind == "deadline" {
			req.Deadline = time.Now().Add(time.Second)
		}
		r, err := s.producer.Submit(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		ids[kind] = r.Job.ID
	}
	runWorker(t, w)
	for kind, wt := range want {
		id := ids[kind]
		waitFor(t, 20*time.Second, kind+" to fail", func() bool {
			_, ok := events.get(id)
			return ok
		})
		j := s.job(id)
		if j.State != wt.state || len(j.Errors) != 1 || j.Errors[0].Cause != wt.cause {
			t.Errorf("%s: %s with errors %+v, want %s with cause %s", kind, j.State, j.Errors, wt.state, wt.cause)
		}
		if ev, _ := events.get(id); ev.Cause != wt.cause || ev.Reason != wt.reason {
			t.Errorf("%s: event %s cause %q reason %q, want cause %q reason %q", kind, ev.Kind, ev.Cause, ev.Reason, wt.cause, wt.reason)
		}
	}
	if j := s.job(ids["panic"]); !strings.Contains(j.Errors[0].Trace, "goroutine") {
		t.Errorf("panic: trace %q", j.Errors[0].Trace)
	}
}

// TestFailCause: Fail and a batch's FailOutcome send FailRequest.Cause;
// a cause only the server assigns is refused with ErrInvalidRequest and
// the job stays running.
func TestFailCause(t *testing.T) {
	t.Parallel()
	s := startServer(t, teststores.Memory(t), core.Config{Retry: core.DelayList{time.Hour}}, false)
	ctx := context.Background()
	jobs := s.claimN("w", "k", 3)

	_, err := s.worker.Fail(ctx, jobs[0].ID, client.FailRequest{LeaseToken: jobs[0].LeaseToken, Error: "boom", Cause: core.CauseLeaseExpired})
	if !errors.Is(err, client.ErrInvalidRequest) || !strings.Contains(err.Error(), "assigned by the server") {
		t.Fatalf("fail with a server's cause: %v", err)
	}
	if j := s.job(jobs[0].ID); j.State != core.StateRunning {
		t.Fatalf("after a refused cause: %+v", j)
	}
	j, err := s.worker.Fail(ctx, jobs[0].ID, client.FailRequest{LeaseToken: jobs[0].LeaseToken, Error: "handler panicked: x", Cause: core.CausePanic})
	if err != nil || j.State != core.StateRetryable || len(j.Errors) != 1 || j.Errors[0].Cause != core.CausePanic {
		t.Fatalf("fail with cause panic: %v %+v", err, j)
	}

	res, err := s.worker.Outcomes(ctx, "w", []client.OutcomeRequest{
		client.FailOutcome(jobs[1].ID, client.FailRequest{LeaseToken: jobs[1].LeaseToken, Error: "slow", Cause: core.CauseTimeout}),
		client.FailOutcome(jobs[2].ID, client.FailRequest{LeaseToken: jobs[2].LeaseToken, Error: "boom", Cause: "exploded"}),
	})
	if err != nil || len(res) != 2 {
		t.Fatalf("outcomes: %v %+v", err, res)
	}
	if !res[0].Applied || s.job(jobs[1].ID).Errors[0].Cause != core.CauseTimeout {
		t.Fatalf("batch fail with cause timeout: %+v, job %+v", res[0], s.job(jobs[1].ID))
	}
	if err := res[1].Err(); !errors.Is(err, client.ErrInvalidRequest) || !strings.Contains(err.Error(), "not a known cause") {
		t.Fatalf("batch fail with an unknown cause: %+v", res[1])
	}
}

// TestWorkerCauseOlderServer: against a server that predates failure
// causes (it refuses the field as unknown, as its strict decoding does),
// a Worker reports the failure without its cause, and the attempt is
// recorded (as handler_error) instead of lost.
func TestWorkerCauseOlderServer(t *testing.T) {
	t.Parallel()
	s := startServer(t, teststores.Memory(t), core.Config{Retry: core.DelayList{time.Hour}}, false)
	var refused sync.Map
	older := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method == http.MethodPost && (strings.HasSuffix(r.URL.Path, "/fail") || strings.HasSuffix(r.URL.Path, "/outcomes")) &&
			bytes.Contains(body, []byte(`"cause"`)) {
			refused.Store(r.URL.Path, true)
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = fmt.Fprintf(w, `{"type":%q,"title":"Invalid request","status":400,"detail":"json: unknown field \"cause\""}`, client.ProblemTypeBase+"invalid-request")
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		s.api.ServeHTTP(w, r)
	}))
	t.Cleanup(older.Close)
	wc, err := client.New(older.URL, client.WithToken(workerToken), client.WithLogger(quiet()))
	if err != nil {
		t.Fatal(err)
	}
	w, err := client.NewWorker(wc, client.WorkerConfig{Queues: []string{"default"}, WaitSeconds: 1, Logger: quiet(),
		Handler: func(context.Context, *client.Job) (json.RawMessage, error) { panic("kaboom") }})
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.producer.Submit(context.Background(), client.SubmitRequest{Kind: "k", MaxAttempts: 5})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	waitFor(t, 20*time.Second, "the failure to be recorded", func() bool { return s.job(r.Job.ID).State == core.StateRetryable })
	j := s.job(r.Job.ID)
	if len(j.Errors) != 1 || j.Errors[0].Cause != core.CauseHandlerError || j.Errors[0].Error != "handler panicked: kaboom" {
		t.Fatalf("errors %+v", j.Errors)
	}
	if _, ok := refused.Load("/v1/jobs/" + fmt.Sprint(r.Job.ID) + "/fail"); !ok {
		t.Fatal("the worker never sent the cause")
	}
}
