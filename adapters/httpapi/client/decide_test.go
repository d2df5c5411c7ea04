package client_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backlogq/backlog/adapters/httpapi"
	"github.com/backlogq/backlog/adapters/httpapi/client"
	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/internal/teststores"
)

// eventsByJob records the last applied outcome event of each job.
type eventsByJob struct {
	mu sync.Mutex
	m  map[int64]core.Event
}

func (e *eventsByJob) Observe(ev core.Event) {
	switch ev.Kind {
	case core.EventJobCompleted, core.EventJobRetried, core.EventJobSnoozed, core.EventJobCancelled,
		core.EventJobDiscarded, core.EventJobContinued:
	default:
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.m[ev.Job.ID] = ev
}

func (e *eventsByJob) get(id int64) (core.Event, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ev, ok := e.m[id]
	return ev, ok
}

// TestSameDecisionInProcessAndRemote runs the same handler results through
// the in-process executor and through a remote worker and the HTTP API,
// on one store, and requires the same outcome: state, kind, attempts,
// error entries (with their causes), backoff and event (with its discard
// reason and cause). The retry
// policies are the same on both sides: a default DelayList{1h} and, for
// kind "exp", an exact ExponentialBackoff (the engine's per-kind policy
// in process, declared on the server's engine).
func TestSameDecisionInProcessAndRemote(t *testing.T) {
	teststores.Run(t, func(t *testing.T, st contract.Store) {
		continueAt := contract.UTC(time.Now().Add(24 * time.Hour)).Truncate(time.Second)
		exp := core.ExponentialBackoff{Base: 30 * time.Second, Max: time.Hour, Jitter: -1}
		// handle is the one handler both sides run, by kind.
		handle := func(kind string) ([]byte, error) {
			boom := &tracedError{"boom " + kind, "trace of " + kind}
			switch kind {
			case "ok":
				return []byte(`{"done":true}`), nil
			case "retryin":
				return nil, core.RetryIn(boom, 90*time.Second)
			case "cancel":
				return nil, core.Cancel(boom)
			case "permanent":
				return nil, core.Permanent(boom)
			case "snooze":
				return nil, core.Snooze(2 * time.Hour)
			case "continue":
				return nil, core.Continue("next", json.RawMessage(`{"n":1}`), continueAt)
			case "badcontinue":
				return nil, core.Continue("", json.RawMessage(`{}`), time.Time{})
			case "panic":
				panic("kaboom")
			}
			return nil, boom // plain, exp, exhausted, deadline
		}
		type scenario struct {
			kind        string
			maxAttempts int
			deadline    time.Duration
		}
		scenarios := []scenario{
			{kind: "ok"}, {kind: "plain"}, {kind: "exp"}, {kind: "retryin"}, {kind: "cancel"}, {kind: "permanent"},
			{kind: "snooze"}, {kind: "continue"}, {kind: "badcontinue"}, {kind: "panic"},
			{kind: "exhausted", maxAttempts: 1}, {kind: "deadline", deadline: 10 * time.Minute},
		}

		// In process.
		inEvents := &eventsByJob{m: map[int64]core.Event{}}
		hs := core.NewHandlers()
		for _, sc := range scenarios {
			var opts []core.KindOption
			if sc.kind == "exp" {
				opts = append(opts, core.WithRetry(exp))
			}
			hs.HandleRaw(sc.kind, func(ctx context.Context, j *core.Job) error {
				res, err := handle(j.Kind)
				if err == nil {
					return core.RecordRawResult(ctx, res)
				}
				return err
			}, opts...)
		}
		local, err := core.NewClient(st, core.Config{
			Queues: map[string]core.QueueConfig{"inproc": {MaxWorkers: 20}}, Handlers: hs, Logger: quiet(),
			Retry: core.DelayList{time.Hour}, PollInterval: 20 * time.Millisecond, MaintenanceInterval: -1,
			Retention: &core.Retention{Completed: time.Hour}, Observers: []core.Observer{inEvents},
		})
		if err != nil {
			t.Fatal(err)
		}

		// Remote: the API over its own client on the same store.
		remoteEvents := &eventsByJob{m: map[int64]core.Event{}}
		serverKinds := core.NewHandlers()
		serverKinds.Declare("exp", core.WithRetry(exp))
		serverCore, err := core.NewClient(st, core.Config{
			Handlers: serverKinds, AllowUnknownKinds: true,
			Logger: quiet(), Retry: core.DelayList{time.Hour}, MaintenanceInterval: -1,
			Retention: &core.Retention{Completed: time.Hour}, Observers: []core.Observer{remoteEvents},
		})
		if err != nil {
			t.Fatal(err)
		}
		api, err := httpapi.New(serverCore, httpapi.Config{})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(api)
		t.Cleanup(func() { _ = api.Close(); srv.Close() })
		wc, err := client.New(srv.URL, client.WithLogger(quiet()))
		if err != nil {
			t.Fatal(err)
		}
		w, err := client.NewWorker(wc, client.WorkerConfig{Queues: []string{"remote"}, Concurrency: 20, Logger: quiet(),
			Handler: func(ctx context.Context, j *client.Job) (json.RawMessage, error) {
				res, err := handle(j.Kind)
				return res, err
			}})
		if err != nil {
			t.Fatal(err)
		}

		ctx := context.Background()
		pairs := map[string][2]int64{}
		for _, sc := range scenarios {
			var ids [2]int64
			for i, q := range []string{"inproc", "remote"} {
				o := &core.Options{Queue: q, MaxAttempts: sc.maxAttempts}
				if sc.deadline > 0 {
					o.Deadline = time.Now().Add(sc.deadline)
				}
				r, err := local.EnqueueRaw(ctx, sc.kind, []byte(`{}`), o)
				if err != nil {
					t.Fatal(err)
				}
				ids[i] = r.Job.ID
			}
			pairs[sc.kind] = ids
		}
		if err := local.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = local.Stop(sctx)
		})
		stop := runWorker(t, w)

		get := func(id int64) *core.Job {
			j, err := st.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			return j
		}
		for kind, ids := range pairs {
			for _, id := range ids {
				waitFor(t, 20*time.Second, kind+" to be decided", func() bool {
					_, ok := inEvents.get(id)
					if !ok {
						_, ok = remoteEvents.get(id)
					}
					return ok
				})
			}
		}
		stop()

		// wait is how long after its attempt ended a job is due again.
		wait := func(j *core.Job) time.Duration {
			at := j.AttemptedAt
			if n := len(j.Errors); n > 0 {
				at = j.Errors[n-1].At
			}
			return j.RunAt.Sub(at).Round(10 * time.Second)
		}
		for _, sc := range scenarios {
			ids := pairs[sc.kind]
			in, re := get(ids[0]), get(ids[1])
			inEv, _ := inEvents.get(ids[0])
			reEv, _ := remoteEvents.get(ids[1])
			if in.State != re.State || in.Kind != re.Kind || string(in.Args) != string(re.Args) || in.Attempt != re.Attempt ||
				len(in.Errors) != len(re.Errors) || string(in.Result) != string(re.Result) {
				t.Errorf("%s: in process %s kind %s args %s attempt %d errors %d result %s; remote %s kind %s args %s attempt %d errors %d result %s",
					sc.kind, in.State, in.Kind, in.Args, in.Attempt, len(in.Errors), in.Result,
					re.State, re.Kind, re.Args, re.Attempt, len(re.Errors), re.Result)
				continue
			}
			if inEv.Kind != reEv.Kind || inEv.Reason != reEv.Reason || inEv.Cause != reEv.Cause {
				t.Errorf("%s: events in process %s %q cause %q, remote %s %q cause %q", sc.kind, inEv.Kind, inEv.Reason, inEv.Cause, reEv.Kind, reEv.Reason, reEv.Cause)
			}
			if in.State == core.StateRetryable || in.State == core.StateScheduled {
				if wi, wr := wait(in), wait(re); wi != wr {
					t.Errorf("%s: backoff in process %s, remote %s", sc.kind, wi, wr)
				}
			}
			for i := range in.Errors {
				ie, rr := in.Errors[i], re.Errors[i]
				if ie.Error != rr.Error || ie.Attempt != rr.Attempt || ie.Cause != rr.Cause {
					t.Errorf("%s: error entry in process %+v, remote %+v", sc.kind, ie, rr)
				}
				if sc.kind == "panic" {
					if !strings.Contains(ie.Trace, "goroutine") || !strings.Contains(rr.Trace, "goroutine") {
						t.Errorf("panic traces: in process %q, remote %q", ie.Trace, rr.Trace)
					}
				} else if ie.Trace != rr.Trace {
					t.Errorf("%s: traces in process %q, remote %q", sc.kind, ie.Trace, rr.Trace)
				}
			}
		}
		// And the expectations both sides met.
		want := map[string]struct {
			state core.State
			ev    core.EventKind
			wait  time.Duration
		}{
			"ok": {core.StateCompleted, core.EventJobCompleted, 0}, "plain": {core.StateRetryable, core.EventJobRetried, time.Hour},
			"exp": {core.StateRetryable, core.EventJobRetried, 30 * time.Second}, "retryin": {core.StateRetryable, core.EventJobRetried, 90 * time.Second},
			"cancel": {core.StateCancelled, core.EventJobCancelled, 0}, "permanent": {core.StateDiscarded, core.EventJobDiscarded, 0},
			"snooze": {core.StateScheduled, core.EventJobSnoozed, 2 * time.Hour}, "continue": {core.StateScheduled, core.EventJobContinued, 0},
			"badcontinue": {core.StateRetryable, core.EventJobRetried, time.Hour}, "panic": {core.StateRetryable, core.EventJobRetried, time.Hour},
			"exhausted": {core.StateDiscarded, core.EventJobDiscarded, 0}, "deadline": {core.StateDiscarded, core.EventJobDiscarded, 0},
		}
		for kind, w := range want {
			re := get(pairs[kind][1])
			ev, _ := remoteEvents.get(re.ID)
			if re.State != w.state || ev.Kind != w.ev {
				t.Errorf("%s: %s after %s, want %s after %s", kind, re.State, ev.Kind, w.state, w.ev)
			}
			if w.wait > 0 && wait(re) != w.wait {
				t.Errorf("%s: waits %s, want %s", kind, wait(re), w.wait)
			}
		}
		if re := get(pairs["continue"][1]); re.Kind != "next" || !re.RunAt.Equal(continueAt) {
			t.Errorf("continue: kind %s at %s, want next at %s", re.Kind, re.RunAt, continueAt)
		}
		if ev, _ := remoteEvents.get(pairs["deadline"][1]); ev.Reason != core.ReasonDeadline {
			t.Errorf("deadline: reason %q", ev.Reason)
		}
		if errs := get(pairs["badcontinue"][1]).Errors; !strings.HasPrefix(errs[0].Error, "invalid continuation") {
			t.Errorf("badcontinue: %+v", errs)
		}
	})
}
