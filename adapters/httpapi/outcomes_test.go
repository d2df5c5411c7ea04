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

// claimOne submits a job with body, claims it as worker w and returns it.
func (h *harness) claimOne(w string, body map[string]any) *Job {
	h.t.Helper()
	j := h.submit(body)
	got := h.claim(w, map[string]any{"limit": 1})
	if len(got) != 1 || got[0].ID != j.ID {
		h.t.Fatalf("claim: %+v, want job %d", got, j.ID)
	}
	return got[0]
}

func outcomePath(j *Job, what string) string { return "/v1/jobs/" + itoa(j.ID) + "/" + what }

func eventsOf(h *harness, kind core.EventKind) []core.Event {
	var out []core.Event
	for _, e := range h.events.drain() {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

func TestOutcomes(t *testing.T) {
	teststores.Run(t, func(t *testing.T, st contract.Store) {
		clock := newFakeClock()
		h := newHarness(t, st, core.Config{Clock: clock, Retry: core.DelayList{time.Hour}, MaxResultBytes: 100}, Config{})
		h0 := h
		h0.register("w", map[string]any{"queues": []string{"default"}})
		// advance moves the clock on and registers w again (it would be
		// dead after a jump of more than WorkerDeadAfter).
		advance := func(h *harness, d time.Duration) {
			clock.Advance(d)
			h.register("w", map[string]any{"queues": []string{"default"}})
		}

		t.Run("complete", func(t *testing.T) {
			h := h0.sub(t)
			j := h.claimOne("w", map[string]any{"kind": "k"})
			clock.Advance(2 * time.Second)
			h.events.drain()
			var out JobResponse
			h.must(http.StatusOK, "POST", outcomePath(j, "complete"), map[string]any{"lease_token": j.LeaseToken, "result": "done"}, &out)
			if out.Job.State != core.StateCompleted || string(out.Job.Result) != `"done"` || !out.Job.FinishedAt.Equal(clock.Now()) || out.Job.LeaseUntil != (time.Time{}) {
				t.Fatalf("completed: %+v %s", out.Job, out.Job.Result)
			}
			evs := eventsOf(h, core.EventJobCompleted)
			if len(evs) != 1 || evs[0].Duration != 2*time.Second || evs[0].Job.ID != j.ID {
				t.Fatalf("completed events %+v", evs)
			}
			// The same token again: the job is no longer held.
			wantProblem(t, h.do("POST", outcomePath(j, "complete"), map[string]any{"lease_token": j.LeaseToken}), SlugLeaseLost)
		})

		t.Run("result too large", func(t *testing.T) {
			h := h0.sub(t)
			j := h.claimOne("w", map[string]any{"kind": "k"})
			wantProblem(t, h.do("POST", outcomePath(j, "complete"), map[string]any{"lease_token": j.LeaseToken, "result": strings.Repeat("x", 200)}), SlugInvalidRequest)
			if got := h.get(j.ID); got.State != core.StateRunning {
				t.Fatalf("job after refused result: %+v", got)
			}
			var out JobResponse
			h.must(http.StatusOK, "POST", outcomePath(j, "complete"), map[string]any{"lease_token": j.LeaseToken, "result": map[string]int{"n": 7}}, &out)
			if strings.ReplaceAll(string(out.Job.Result), " ", "") != `{"n":7}` {
				t.Fatalf("result %s", out.Job.Result)
			}
		})

		t.Run("fail retries with backoff", func(t *testing.T) {
			h := h0.sub(t)
			j := h.claimOne("w", map[string]any{"kind": "k", "max_attempts": 3})
			h.events.drain()
			var out JobResponse
			h.must(http.StatusOK, "POST", outcomePath(j, "fail"), map[string]any{"lease_token": j.LeaseToken, "error": "boom", "trace": "line 1"}, &out)
			if out.Job.State != core.StateRetryable || !out.Job.RunAt.Equal(clock.Now().Add(time.Hour)) || len(out.Job.Errors) != 1 ||
				out.Job.Errors[0] != (core.AttemptError{Attempt: 1, At: clock.Now(), Error: "boom", Trace: "line 1", Cause: core.CauseHandlerError, StartedAt: j.AttemptedAt}) {
				t.Fatalf("failed: %+v", out.Job)
			}
			if evs := eventsOf(h, core.EventJobRetried); len(evs) != 1 || evs[0].Err == nil || evs[0].Err.Error() != "boom" {
				t.Fatalf("retried events %+v", evs)
			}
			// Due again; fail with an explicit delay.
			advance(h, time.Hour)
			j = h.claim("w", nil)[0]
			h.must(http.StatusOK, "POST", outcomePath(j, "fail"), map[string]any{"lease_token": j.LeaseToken, "error": "again", "retry_in_seconds": 5}, &out)
			if out.Job.State != core.StateRetryable || !out.Job.RunAt.Equal(clock.Now().Add(5*time.Second)) || out.Job.Attempt != 2 {
				t.Fatalf("failed with retry_in_seconds: %+v", out.Job)
			}
			// The last attempt fails: discarded, exhausted.
			advance(h, 5*time.Second)
			j = h.claim("w", nil)[0]
			h.events.drain()
			h.must(http.StatusOK, "POST", outcomePath(j, "fail"), map[string]any{"lease_token": j.LeaseToken, "error": "last"}, &out)
			if out.Job.State != core.StateDiscarded || out.Job.Attempt != 3 || len(out.Job.Errors) != 3 || out.Job.FinishedAt.IsZero() {
				t.Fatalf("last attempt: %+v", out.Job)
			}
			if evs := eventsOf(h, core.EventJobDiscarded); len(evs) != 1 || evs[0].Reason != core.ReasonExhausted {
				t.Fatalf("discarded events %+v", evs)
			}
		})

		t.Run("fail past the deadline", func(t *testing.T) {
			h := h0.sub(t)
			deadline := clock.Now().Add(10 * time.Minute)
			j := h.claimOne("w", map[string]any{"kind": "k", "deadline": deadline})
			h.events.drain()
			var out JobResponse
			h.must(http.StatusOK, "POST", outcomePath(j, "fail"), map[string]any{"lease_token": j.LeaseToken, "error": "slow"}, &out)
			if out.Job.State != core.StateDiscarded || !strings.Contains(out.Job.Errors[0].Error, "deadline") {
				t.Fatalf("deadline: %+v", out.Job)
			}
			if evs := eventsOf(h, core.EventJobDiscarded); len(evs) != 1 || evs[0].Reason != core.ReasonDeadline {
				t.Fatalf("discarded events %+v", evs)
			}
		})

		t.Run("fail discard and cancel", func(t *testing.T) {
			h := h0.sub(t)
			j := h.claimOne("w", map[string]any{"kind": "k"})
			h.events.drain()
			var out JobResponse
			h.must(http.StatusOK, "POST", outcomePath(j, "fail"), map[string]any{"lease_token": j.LeaseToken, "error": "bad input", "action": "discard"}, &out)
			if out.Job.State != core.StateDiscarded || out.Job.Errors[0].Error != "bad input" {
				t.Fatalf("discard: %+v", out.Job)
			}
			if evs := eventsOf(h, core.EventJobDiscarded); len(evs) != 1 || evs[0].Reason != core.ReasonPermanent {
				t.Fatalf("discarded events %+v", evs)
			}
			j = h.claimOne("w", map[string]any{"kind": "k"})
			h.must(http.StatusOK, "POST", outcomePath(j, "fail"), map[string]any{"lease_token": j.LeaseToken, "error": "not wanted", "action": "cancel"}, &out)
			if out.Job.State != core.StateCancelled || out.Job.Errors[0].Error != "not wanted" {
				t.Fatalf("cancel: %+v", out.Job)
			}
			if evs := eventsOf(h, core.EventJobCancelled); len(evs) != 1 {
				t.Fatalf("cancelled events %+v", evs)
			}
		})

		t.Run("snooze", func(t *testing.T) {
			h := h0.sub(t)
			j := h.claimOne("w", map[string]any{"kind": "k", "max_attempts": 1})
			var out JobResponse
			h.must(http.StatusOK, "POST", outcomePath(j, "snooze"), map[string]any{"lease_token": j.LeaseToken, "delay_seconds": 30}, &out)
			if out.Job.State != core.StateScheduled || out.Job.Attempt != 0 || !out.Job.RunAt.Equal(clock.Now().Add(30*time.Second)) {
				t.Fatalf("snooze: %+v", out.Job)
			}
			advance(h, 30*time.Second)
			j = h.claim("w", nil)[0]
			if j.Attempt != 1 {
				t.Fatalf("attempt after snooze %d", j.Attempt)
			}
			h.must(http.StatusOK, "POST", outcomePath(j, "snooze"), map[string]any{"lease_token": j.LeaseToken}, &out)
			if out.Job.State != core.StateAvailable || out.Job.Attempt != 0 {
				t.Fatalf("snooze 0: %+v", out.Job)
			}
			h.claim("w", nil)
		})

		t.Run("lease extension", func(t *testing.T) {
			h := h0.sub(t)
			// Leave nothing running from earlier subtests.
			for _, j := range h.snapshot() {
				if j.State == core.StateRunning {
					h.must(http.StatusOK, "POST", "/v1/jobs/"+itoa(j.ID)+"/cancel", nil, nil)
				}
			}
			j := h.claimOne("w", map[string]any{"kind": "k"})
			var out LeaseResponse
			h.must(http.StatusOK, "POST", outcomePath(j, "lease"), map[string]any{"lease_token": j.LeaseToken, "extend_seconds": 600}, &out)
			if !out.LeaseUntil.Equal(clock.Now().Add(600 * time.Second)) {
				t.Fatalf("lease until %s", out.LeaseUntil)
			}
			if got := h.get(j.ID); !got.LeaseUntil.Equal(out.LeaseUntil) {
				t.Fatalf("stored lease %s, want %s", got.LeaseUntil, out.LeaseUntil)
			}
			h.must(http.StatusOK, "POST", outcomePath(j, "lease"), map[string]any{"lease_token": j.LeaseToken}, &out)
			if !out.LeaseUntil.Equal(clock.Now().Add(30 * time.Second)) {
				t.Fatalf("default lease until %s", out.LeaseUntil)
			}
			wantProblem(t, h.do("POST", outcomePath(j, "lease"), map[string]any{"lease_token": j.LeaseToken, "extend_seconds": 3601}), SlugInvalidRequest)
			wantProblem(t, h.do("POST", outcomePath(j, "lease"), map[string]any{"lease_token": j.LeaseToken, "extend_seconds": 0}), SlugInvalidRequest)
			h.must(http.StatusOK, "POST", outcomePath(j, "complete"), map[string]any{"lease_token": j.LeaseToken}, nil)
		})
	})
}

func TestStaleLeaseTokens(t *testing.T) {
	teststores.Run(t, func(t *testing.T, st contract.Store) {
		clock := newFakeClock()
		h := newHarness(t, st, core.Config{Clock: clock}, Config{})
		h.register("w1", map[string]any{"queues": []string{"default"}})
		h.register("w2", map[string]any{"queues": []string{"default"}})

		// Rescued after its lease ran out, then claimed by w2.
		old := h.claimOne("w1", map[string]any{"kind": "k"})
		clock.Advance(31 * time.Second)
		if rescued, err := st.Rescue(t.Context(), clock.Now(), 10, decideRescue(core.CauseLeaseExpired, clock.Now())); err != nil || len(rescued) != 1 {
			t.Fatalf("rescue: %v %v", rescued, err)
		}
		// Retryable at its own run_at (its place in the queue), the lost
		// attempt recorded with its cause.
		if j := h.get(old.ID); j.State != core.StateRetryable || !j.RunAt.Equal(old.RunAt) || j.Attempt != 1 ||
			len(j.Errors) != 1 || j.Errors[0].Cause != core.CauseLeaseExpired || j.Errors[0].Attempt != 1 || !strings.Contains(j.Errors[0].Error, "lease expired") {
			t.Fatalf("rescued: %+v", j)
		}
		h.register("w2", map[string]any{"queues": []string{"default"}})
		cur := h.claim("w2", nil)
		if len(cur) != 1 || cur[0].ID != old.ID || cur[0].Attempt != 2 {
			t.Fatalf("re-claim: %+v", cur)
		}
		before := h.get(old.ID)
		h.events.drain()
		for _, c := range []struct {
			what string
			body map[string]any
		}{
			{"complete", map[string]any{"result": 1}},
			{"fail", map[string]any{"error": "x"}},
			{"fail", map[string]any{"error": "x", "action": "discard"}},
			{"snooze", map[string]any{"delay_seconds": 1}},
			{"lease", map[string]any{}},
		} {
			c.body["lease_token"] = old.LeaseToken
			wantProblem(t, h.do("POST", outcomePath(old, c.what), c.body), SlugLeaseLost)
		}
		after := h.get(old.ID)
		if after.State != core.StateRunning || after.WorkerID != "w2" || after.Attempt != 2 || !after.LeaseUntil.Equal(before.LeaseUntil) || len(after.Errors) != len(before.Errors) {
			t.Fatalf("stale tokens changed the job: %+v", after)
		}
		if evs := eventsOf(h, core.EventLeaseLost); len(evs) != 5 {
			t.Fatalf("%d lease_lost events, want 5", len(evs))
		}
		// The holder's token still works.
		h.must(http.StatusOK, "POST", outcomePath(cur[0], "complete"), map[string]any{"lease_token": cur[0].LeaseToken}, nil)

		// Cancelled while running.
		j := h.claimOne("w1", map[string]any{"kind": "k"})
		h.must(http.StatusOK, "POST", "/v1/jobs/"+itoa(j.ID)+"/cancel", nil, nil)
		wantProblem(t, h.do("POST", outcomePath(j, "complete"), map[string]any{"lease_token": j.LeaseToken}), SlugLeaseLost)
		if got := h.get(j.ID); got.State != core.StateCancelled {
			t.Fatalf("cancelled job now %s", got.State)
		}
		// Deleted after it finished.
		h.must(http.StatusNoContent, "DELETE", "/v1/jobs/"+itoa(j.ID), nil, nil)
		wantProblem(t, h.do("POST", outcomePath(j, "fail"), map[string]any{"lease_token": j.LeaseToken, "error": "x"}), SlugLeaseLost)
	})
}

func TestCompleteWithZeroRetentionDeletes(t *testing.T) {
	runAll(t, core.Config{Retention: &core.Retention{Completed: 0, Cancelled: time.Hour, Discarded: time.Hour}}, Config{}, func(t *testing.T, h *harness) {
		h.register("w", map[string]any{"queues": []string{"default"}})
		j := h.claimOne("w", map[string]any{"kind": "k"})
		r := h.must(http.StatusOK, "POST", outcomePath(j, "complete"), map[string]any{"lease_token": j.LeaseToken, "result": true}, nil)
		if strings.TrimSpace(string(r.body)) != `{"job":null}` {
			t.Fatalf("complete with retention 0: %s", r.body)
		}
		wantProblem(t, h.do("GET", "/v1/jobs/"+itoa(j.ID), nil), SlugJobNotFound)
	})
}
