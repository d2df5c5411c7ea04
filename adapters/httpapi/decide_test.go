package httpapi

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/internal/teststores"
)

// TestKindRetryPrecedence: the delay of a remote failure is the worker's
// retry_in_seconds, else the engine's policy for the kind (declared on the
// server's client: core.Client.RetryPolicy), else the server's default;
// through the single endpoint and the batch alike.
func TestKindRetryPrecedence(t *testing.T) {
	teststores.Run(t, func(t *testing.T, st contract.Store) {
		clock := newFakeClock()
		// Kinds remote workers run, declared with their policies on the
		// server's engine (one policy per kind, wherever it runs).
		kinds := core.NewHandlers()
		kinds.Declare("fast", core.WithRetry(core.DelayList{5 * time.Second}))
		kinds.Declare("exp", core.WithRetry(core.ExponentialBackoff{Base: 2 * time.Second, Max: time.Minute, Jitter: -1}))
		kinds.Declare("unset")
		h := newHarness(t, st, core.Config{Clock: clock, Retry: core.DelayList{time.Hour}, Handlers: kinds, AllowUnknownKinds: true}, Config{})
		h.register("w", map[string]any{"queues": []string{"default"}})
		fail := func(kind string, fields map[string]any) time.Duration {
			t.Helper()
			j := h.claimOne("w", map[string]any{"kind": kind})
			body := map[string]any{"lease_token": j.LeaseToken, "error": "boom"}
			for k, v := range fields {
				body[k] = v
			}
			var out JobResponse
			h.must(http.StatusOK, "POST", outcomePath(j, "fail"), body, &out)
			if out.Job.State != core.StateRetryable {
				t.Fatalf("%s: %+v", kind, out.Job)
			}
			return out.Job.RunAt.Sub(clock.Now())
		}
		for _, c := range []struct {
			kind   string
			fields map[string]any
			want   time.Duration
		}{
			{"fast", nil, 5 * time.Second},
			{"exp", nil, 2 * time.Second},
			{"other", nil, time.Hour},
			{"unset", nil, time.Hour},
			{"fast", map[string]any{"retry_in_seconds": 7}, 7 * time.Second},
		} {
			if got := fail(c.kind, c.fields); got != c.want {
				t.Errorf("%s %v: retry in %s, want %s", c.kind, c.fields, got, c.want)
			}
		}
		// The batch decides the same way.
		j := h.claimOne("w", map[string]any{"kind": "fast"})
		wantItem(t, "batch fail", h.outcomes("w", item(j, "fail", "error", "boom"))[0], j.ID, core.StateRetryable, "")
		if got := h.get(j.ID); !got.RunAt.Equal(clock.Now().Add(5 * time.Second)) {
			t.Errorf("batch: run at %s, want now+5s", got.RunAt.Sub(clock.Now()))
		}
		// retry_in_seconds 0: due at once, whatever the policies say.
		if got := fail("fast", map[string]any{"retry_in_seconds": 0}); got != 0 {
			t.Errorf("retry_in_seconds 0: retry in %s", got)
		}
	})
}

// TestContinueEndpoint: POST /v1/jobs/{id}/continue and batch items of
// type continue move the job on to its next step; an invalid continuation
// fails the attempt as in process.
func TestContinueEndpoint(t *testing.T) {
	teststores.Run(t, func(t *testing.T, st contract.Store) {
		clock := newFakeClock()
		h := newHarness(t, st, core.Config{Clock: clock, Retry: core.DelayList{time.Minute}, MaxArgsBytes: 64}, Config{})
		h.register("w", map[string]any{"queues": []string{"default"}})

		j := h.claimOne("w", map[string]any{"kind": "step1", "args": map[string]int{"n": 1}})
		h.events.drain()
		var out JobResponse
		h.must(http.StatusOK, "POST", outcomePath(j, "continue"), map[string]any{"lease_token": j.LeaseToken, "kind": "step2", "args": map[string]int{"n": 2}}, &out)
		if out.Job.State != core.StateAvailable || out.Job.Kind != "step2" || strings.ReplaceAll(string(out.Job.Args), " ", "") != `{"n":2}` ||
			out.Job.Attempt != 0 || out.Job.ID != j.ID {
			t.Fatalf("continued: %+v %s", out.Job, out.Job.Args)
		}
		if evs := eventsOf(h, core.EventJobContinued); len(evs) != 1 || evs[0].Job.ID != j.ID {
			t.Fatalf("continued events %+v", evs)
		}
		// The next step runs on the same job; it continues later.
		j = h.claim("w", nil)[0]
		at := clock.Now().Add(time.Hour)
		h.must(http.StatusOK, "POST", outcomePath(j, "continue"), map[string]any{"lease_token": j.LeaseToken, "kind": "step3", "args": "x", "run_at": at}, &out)
		if out.Job.State != core.StateScheduled || out.Job.Kind != "step3" || !out.Job.RunAt.Equal(at) {
			t.Fatalf("continued later: %+v", out.Job)
		}
		// The lease is spent: the same token again is lease-lost.
		wantProblem(t, h.do("POST", outcomePath(j, "continue"), map[string]any{"lease_token": j.LeaseToken, "kind": "step4", "args": 1}), SlugLeaseLost)

		// Invalid continuations fail the attempt (retried by the policy).
		for name, body := range map[string]map[string]any{
			"no kind":       {"args": 1},
			"no args":       {"kind": "k2"},
			"args too long": {"kind": "k2", "args": strings.Repeat("x", 100)},
		} {
			j := h.claimOne("w", map[string]any{"kind": "bad", "max_attempts": 2})
			body["lease_token"] = j.LeaseToken
			h.must(http.StatusOK, "POST", outcomePath(j, "continue"), body, &out)
			if out.Job.State != core.StateRetryable || out.Job.Kind != "bad" || !out.Job.RunAt.Equal(clock.Now().Add(time.Minute)) ||
				len(out.Job.Errors) != 1 || !strings.HasPrefix(out.Job.Errors[0].Error, "invalid continuation") {
				t.Fatalf("%s: %+v", name, out.Job)
			}
			clock.Advance(time.Minute)
			h.register("w", map[string]any{"queues": []string{"default"}})
			j = h.claim("w", nil)[0]
			h.must(http.StatusOK, "POST", outcomePath(j, "complete"), map[string]any{"lease_token": j.LeaseToken}, nil)
		}

		// In a batch: applied beside the other types; fields of other
		// types are refused.
		j1 := h.claimOne("w", map[string]any{"kind": "b1"})
		j2 := h.claimOne("w", map[string]any{"kind": "b2"})
		res := h.outcomes("w",
			item(j1, "continue", "kind", "b1-next", "args", map[string]int{"n": 3}),
			item(j2, "continue", "kind", "b2-next", "args", 1, "delay_seconds", 5),
		)
		wantItem(t, "batch continue", res[0], j1.ID, core.StateAvailable, "")
		wantItem(t, "continue with delay_seconds", res[1], j2.ID, "", SlugInvalidRequest)
		if got := h.get(j1.ID); got.Kind != "b1-next" {
			t.Fatalf("batch continued: %+v", got)
		}
		res = h.outcomes("w", item(j2, "snooze", "kind", "x"))
		wantItem(t, "snooze with kind", res[0], j2.ID, "", SlugInvalidRequest)
		res = h.outcomes("w", item(j2, "continue", "kind", "", "args", 1))
		wantItem(t, "batch invalid continuation", res[0], j2.ID, core.StateRetryable, "")
	})
}
