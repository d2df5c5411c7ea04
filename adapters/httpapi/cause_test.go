package httpapi

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/core/contract"

	prom "github.com/prometheus/client_golang/prometheus"

	bprom "github.com/backlogq/backlog/adapters/prometheus"
	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/internal/teststores"
)

// failedTotal reads backlog_jobs_failed_total for kind and cause.
func failedTotal(t *testing.T, reg *prom.Registry, kind, cause string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "backlog_jobs_failed_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["kind"] == kind && labels["cause"] == cause {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestWorkerCauses: every cause a worker may report is one core knows,
// and the causes core knows that a worker may not report are exactly the
// server's own (rescues, hand-backs, refused continuations).
func TestWorkerCauses(t *testing.T) {
	for _, c := range WorkerCauses {
		if !core.KnownCause(c) {
			t.Errorf("worker cause %q is not a core.KnownCause", c)
		}
	}
	serverOnly := []string{core.CauseLeaseExpired, core.CauseWorkerDead, core.CauseClaimLost, core.CauseLeaseUnrenewed,
		core.CauseUndeliverable, core.CauseInvalidContinue}
	for _, c := range serverOnly {
		if !core.KnownCause(c) || slices.Contains(WorkerCauses, c) {
			t.Errorf("server cause %q: known %v, reportable by a worker %v", c, core.KnownCause(c), slices.Contains(WorkerCauses, c))
		}
	}
	for _, c := range []string{"", "Panic", "exploded", "handler_error "} {
		if core.KnownCause(c) {
			t.Errorf("core.KnownCause(%q) = true", c)
		}
	}
}

// TestFailCause: a failure's cause, on the single endpoint and in a
// batch, becomes its error entry's cause and its event's, so the
// failed-attempt metric counts a remote panic as a panic; absent means
// handler_error; a cause core does not know, or one only the server
// assigns, is refused and changes nothing.
func TestFailCause(t *testing.T) {
	teststores.Run(t, func(t *testing.T, st contract.Store) {
		clock := newFakeClock()
		metrics := bprom.New(nil, bprom.Options{})
		reg := prom.NewRegistry()
		reg.MustRegister(metrics)
		h := newHarness(t, st, core.Config{Clock: clock, Retry: core.DelayList{time.Hour}, Observers: []core.Observer{metrics}}, Config{})
		h0 := h
		h0.register("w", map[string]any{"queues": []string{"default"}})

		t.Run("single", func(t *testing.T) {
			h := h0.sub(t)
			for _, cause := range append([]string{""}, WorkerCauses...) {
				kind := "single-" + cause
				j := h.claimOne("w", map[string]any{"kind": kind})
				h.events.drain()
				body := map[string]any{"lease_token": j.LeaseToken, "error": "boom", "trace": "stack"}
				if cause != "" {
					body["cause"] = cause
				}
				var out JobResponse
				h.must(http.StatusOK, "POST", outcomePath(j, "fail"), body, &out)
				want := cause
				if want == "" {
					want = core.CauseHandlerError
				}
				wantState, wantEvent, wantReason := core.StateRetryable, core.EventJobRetried, ""
				if cause == core.CauseDeadline {
					wantState, wantEvent, wantReason = core.StateDiscarded, core.EventJobDiscarded, core.ReasonDeadline
				}
				if out.Job.State != wantState || len(out.Job.Errors) != 1 || j.AttemptedAt.IsZero() ||
					out.Job.Errors[0] != (core.AttemptError{Attempt: 1, At: clock.Now(), Error: "boom", Trace: "stack", Cause: want, StartedAt: j.AttemptedAt, DiscardReason: wantReason}) {
					t.Fatalf("cause %q: %+v", cause, out.Job)
				}
				if stored := h.get(j.ID); len(stored.Errors) != 1 || stored.Errors[0].Cause != want {
					t.Fatalf("cause %q: stored %+v", cause, stored.Errors)
				}
				// The job's JSON names it.
				var raw struct {
					Job struct {
						Errors []map[string]any `json:"errors"`
					} `json:"job"`
				}
				h.must(http.StatusOK, "GET", "/v1/jobs/"+itoa(j.ID), nil, &raw)
				if len(raw.Job.Errors) != 1 || raw.Job.Errors[0]["cause"] != want {
					t.Fatalf("cause %q: the job's JSON has errors %v", cause, raw.Job.Errors)
				}
				evs := eventsOf(h, wantEvent)
				if len(evs) != 1 || evs[0].Cause != want || evs[0].Err == nil || evs[0].Err.Error() != "boom" {
					t.Fatalf("cause %q: events %+v", cause, evs)
				}
				if cause == core.CauseDeadline && evs[0].Reason != core.ReasonDeadline {
					t.Fatalf("cause deadline: reason %q", evs[0].Reason)
				}
				if n := failedTotal(t, reg, kind, want); n != 1 {
					t.Fatalf("cause %q: backlog_jobs_failed_total{cause=%q} = %v, want 1", cause, want, n)
				}
			}
		})

		t.Run("cause with action", func(t *testing.T) {
			h := h0.sub(t)
			for action, state := range map[string]core.State{"discard": core.StateDiscarded, "cancel": core.StateCancelled} {
				j := h.claimOne("w", map[string]any{"kind": "action-" + action})
				var out JobResponse
				h.must(http.StatusOK, "POST", outcomePath(j, "fail"), map[string]any{"lease_token": j.LeaseToken, "error": "boom", "action": action, "cause": core.CauseTimeout}, &out)
				if out.Job.State != state || len(out.Job.Errors) != 1 || out.Job.Errors[0].Cause != core.CauseTimeout {
					t.Fatalf("%s: %+v", action, out.Job)
				}
			}
		})

		t.Run("refused", func(t *testing.T) {
			h := h0.sub(t)
			j := h.claimOne("w", map[string]any{"kind": "refused"})
			before := h.get(j.ID)
			for cause, says := range map[string]string{
				"exploded":                "not a known cause",
				"PANIC":                   "not a known cause",
				core.CauseLeaseExpired:    "assigned by the server",
				core.CauseWorkerDead:      "assigned by the server",
				core.CauseClaimLost:       "assigned by the server",
				core.CauseLeaseUnrenewed:  "assigned by the server",
				core.CauseUndeliverable:   "assigned by the server",
				core.CauseInvalidContinue: "assigned by the server",
			} {
				p := wantProblem(t, h.do("POST", outcomePath(j, "fail"), map[string]any{"lease_token": j.LeaseToken, "error": "boom", "cause": cause}), SlugInvalidRequest)
				if !strings.Contains(p.Detail, says) || !strings.Contains(p.Detail, `"`+cause+`"`) || !strings.Contains(p.Detail, core.CausePanic) {
					t.Fatalf("cause %q: detail %q, want it to say %q and list the causes a worker reports", cause, p.Detail, says)
				}
			}
			if after := h.get(j.ID); !jobEqual(after, before) {
				t.Fatalf("a refused cause changed the job:\nbefore %+v\nafter  %+v", before, after)
			}
		})

		t.Run("batch", func(t *testing.T) {
			h := h0.sub(t)
			for _, k := range []string{"b-panic", "b-none", "b-rescue", "b-unknown", "b-complete"} {
				h.submit(map[string]any{"kind": k})
			}
			jobs := map[string]*Job{}
			for _, j := range h.claim("w", map[string]any{"limit": 10}) {
				jobs[j.Kind] = j
			}
			if len(jobs) != 5 {
				t.Fatalf("claimed %d jobs, want 5", len(jobs))
			}
			h.events.drain()
			res := h.outcomes("w",
				item(jobs["b-panic"], "fail", "error", "handler panicked: kaboom", "trace", "goroutine 1", "cause", core.CausePanic),
				item(jobs["b-none"], "fail", "error", "boom"),
				item(jobs["b-rescue"], "fail", "error", "boom", "cause", core.CauseLeaseExpired),
				item(jobs["b-unknown"], "fail", "error", "boom", "cause", "exploded"),
				item(jobs["b-complete"], "complete", "cause", core.CausePanic),
			)
			wantItem(t, "panic", res[0], jobs["b-panic"].ID, core.StateRetryable, "")
			wantItem(t, "no cause", res[1], jobs["b-none"].ID, core.StateRetryable, "")
			wantItem(t, "rescue cause", res[2], jobs["b-rescue"].ID, "", SlugInvalidRequest)
			wantItem(t, "unknown cause", res[3], jobs["b-unknown"].ID, "", SlugInvalidRequest)
			wantItem(t, "cause on a completion", res[4], jobs["b-complete"].ID, "", SlugInvalidRequest)
			if d := res[2].Problem.Detail; !strings.Contains(d, "assigned by the server") {
				t.Fatalf("rescue cause: %q", d)
			}
			if d := res[3].Problem.Detail; !strings.Contains(d, "not a known cause") {
				t.Fatalf("unknown cause: %q", d)
			}
			if d := res[4].Problem.Detail; !strings.Contains(d, "cause") {
				t.Fatalf("cause on a completion: %q", d)
			}
			if j := h.get(jobs["b-panic"].ID); len(j.Errors) != 1 || j.Errors[0].Cause != core.CausePanic || j.Errors[0].Trace != "goroutine 1" {
				t.Fatalf("panic: %+v", j.Errors)
			}
			if j := h.get(jobs["b-none"].ID); len(j.Errors) != 1 || j.Errors[0].Cause != core.CauseHandlerError {
				t.Fatalf("no cause: %+v", j.Errors)
			}
			for _, k := range []string{"b-rescue", "b-unknown", "b-complete"} {
				if j := h.get(jobs[k].ID); j.State != core.StateRunning || len(j.Errors) != 0 {
					t.Fatalf("%s changed: %+v", k, j)
				}
			}
			causes := map[int64]string{}
			for _, e := range eventsOf(h, core.EventJobRetried) {
				causes[e.Job.ID] = e.Cause
			}
			if len(causes) != 2 || causes[jobs["b-panic"].ID] != core.CausePanic || causes[jobs["b-none"].ID] != core.CauseHandlerError {
				t.Fatalf("retried events' causes %v", causes)
			}
			if n := failedTotal(t, reg, "b-panic", core.CausePanic); n != 1 {
				t.Fatalf("backlog_jobs_failed_total{kind=b-panic,cause=panic} = %v, want 1", n)
			}
		})

		t.Run("deadline cause on the last attempt", func(t *testing.T) {
			// As in process: the deadline, not the exhausted attempts, is
			// the reason.
			h := h0.sub(t)
			j := h.claimOne("w", map[string]any{"kind": "deadline-last", "max_attempts": 1})
			h.events.drain()
			h.must(http.StatusOK, "POST", outcomePath(j, "fail"), map[string]any{"lease_token": j.LeaseToken, "error": "too late", "cause": core.CauseDeadline}, nil)
			evs := eventsOf(h, core.EventJobDiscarded)
			if len(evs) != 1 || evs[0].Reason != core.ReasonDeadline || evs[0].Cause != core.CauseDeadline {
				t.Fatalf("events %+v", evs)
			}
		})
	})
}

// TestOpenAPIFailCause: openapi.json lists, for the cause of a failure
// (single and batch), exactly the causes the server accepts from a
// worker.
func TestOpenAPIFailCause(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]struct {
					Enum []string `json:"enum"`
				} `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(openapiDoc, &doc); err != nil {
		t.Fatal(err)
	}
	for _, schema := range []string{"FailRequest", "OutcomeItem"} {
		got := doc.Components.Schemas[schema].Properties["cause"].Enum
		if !slices.Equal(got, WorkerCauses) {
			t.Errorf("openapi.json %s.cause enum %v, want %v", schema, got, WorkerCauses)
		}
	}
}

// A worker that could not renew a lease hands the job back with
// hand_back lease_unrenewed, on the single and the batch endpoint: due
// now, the attempt given back, one error entry with that cause, as the
// engine does in process. Other causes and a delay with it are refused.
func TestSnoozeHandBack(t *testing.T) {
	teststores.Run(t, func(t *testing.T, st contract.Store) {
		clock := newFakeClock()
		h := newHarness(t, st, core.Config{Clock: clock}, Config{})
		// One worker and queue per case: a job handed back is due again
		// at once and would be the next claim's.
		for _, w := range []string{"single", "batch", "refused"} {
			h.register(w, map[string]any{"queues": []string{w}})
		}
		check := func(what string, id int64) {
			t.Helper()
			j := h.get(id)
			if j.State != core.StateAvailable || j.Attempt != 0 || len(j.Errors) != 1 || j.Errors[0].Cause != core.CauseLeaseUnrenewed || j.Errors[0].Attempt != 1 {
				t.Fatalf("%s: job after the hand-back %+v", what, j)
			}
		}
		j := h.claimOne("single", map[string]any{"kind": "k", "queue": "single"})
		for _, bad := range []map[string]any{
			{"lease_token": j.LeaseToken, "hand_back": core.CauseClaimLost},                          // a server's cause
			{"lease_token": j.LeaseToken, "hand_back": core.CauseLeaseUnrenewed, "delay_seconds": 5}, // with a delay
		} {
			wantProblem(t, h.do("POST", outcomePath(j, "snooze"), bad), SlugInvalidRequest)
		}
		h.must(http.StatusOK, "POST", outcomePath(j, "snooze"), map[string]any{"lease_token": j.LeaseToken, "hand_back": core.CauseLeaseUnrenewed}, nil)
		check("single", j.ID)

		j = h.claimOne("batch", map[string]any{"kind": "k", "queue": "batch"})
		var res OutcomesResponse
		h.must(http.StatusOK, "POST", "/v1/workers/batch/outcomes", map[string]any{"outcomes": []map[string]any{
			{"job_id": j.ID, "lease_token": j.LeaseToken, "type": "snooze", "hand_back": core.CauseLeaseUnrenewed},
		}}, &res)
		if len(res.Results) != 1 || res.Results[0].Problem != nil {
			t.Fatalf("batch: %+v", res)
		}
		check("batch", j.ID)
		j = h.claimOne("refused", map[string]any{"kind": "k", "queue": "refused"})
		h.must(http.StatusOK, "POST", "/v1/workers/refused/outcomes", map[string]any{"outcomes": []map[string]any{
			{"job_id": j.ID, "lease_token": j.LeaseToken, "type": "complete", "hand_back": core.CauseLeaseUnrenewed},
		}}, &res)
		if len(res.Results) != 1 || res.Results[0].Problem == nil {
			t.Fatalf("a hand_back on a completion was accepted: %+v", res)
		}
	})
}
