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

// heartbeat sends a heartbeat of worker id naming tokens.
func (h *harness) heartbeat(id string, tokens ...string) HeartbeatResponse {
	h.t.Helper()
	if tokens == nil {
		tokens = []string{}
	}
	var hb HeartbeatResponse
	h.must(http.StatusOK, "POST", "/v1/workers/"+id+"/heartbeat", map[string]any{"leases": tokens}, &hb)
	return hb
}

// coreJob reads a job straight from the store.
func (h *harness) coreJob(id int64) *core.Job {
	h.t.Helper()
	j, err := h.st.Get(h.t.Context(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return j
}

// TestHeartbeatRequiresLeases: a heartbeat that names no leases (an
// outdated worker) is refused with a message that says what to send, and
// changes nothing: not the worker's record, not its jobs' leases.
func TestHeartbeatRequiresLeases(t *testing.T) {
	teststores.Run(t, func(t *testing.T, st contract.Store) {
		clock := newFakeClock()
		h := newHarness(t, st, core.Config{Clock: clock}, Config{})
		h.register("w", map[string]any{"queues": []string{"default"}})
		h.claimOne("w", map[string]any{"kind": "k"})
		clock.Advance(10 * time.Second)
		before := h.state()
		for _, body := range []any{nil, "{}", `{"leases":null}`} {
			p := wantProblem(t, h.do("POST", "/v1/workers/w/heartbeat", body), SlugInvalidRequest)
			if !strings.Contains(p.Detail, `"leases"`) || !strings.Contains(p.Detail, "lease tokens") || !strings.Contains(p.Detail, "upgraded") {
				t.Fatalf("body %v: detail %q does not say what to send", body, p.Detail)
			}
		}
		if after := h.state(); after != before {
			t.Fatalf("refused heartbeats changed the store:\nbefore %s\nafter  %s", before, after)
		}
		// An empty list is a heartbeat of a worker that holds nothing.
		if hb := h.heartbeat("w"); hb.LeasesExtended != 0 || !hb.Worker.HeartbeatAt.Equal(clock.Now()) {
			t.Fatalf("heartbeat: %+v", hb)
		}
	})
}

// TestHeartbeatHandsBackLostClaims: a job claimed for a worker whose claim
// answer never reached it (the claim committed, the answer was lost) is
// handed back by the worker's next heartbeat once the claim is older than
// ClaimReplyGrace, without using an attempt; the jobs the heartbeat names
// are renewed, and a claim younger than the grace is left alone.
func TestHeartbeatHandsBackLostClaims(t *testing.T) {
	teststores.Run(t, func(t *testing.T, st contract.Store) {
		clock := newFakeClock()
		h := newHarness(t, st, core.Config{Clock: clock}, Config{})
		h.register("w", map[string]any{"queues": []string{"default"}})
		known := h.claimOne("w", map[string]any{"kind": "known"})
		// Claimed for w straight through the store: w never hears of it.
		lost := h.submit(map[string]any{"kind": "lost", "queue": "elsewhere", "max_attempts": 1})
		claimed, err := st.Claim(t.Context(), contract.ClaimParams{Queue: "elsewhere", WorkerID: "w", Limit: 1, Now: clock.Now(), LeaseUntil: clock.Now().Add(30 * time.Second)})
		if err != nil || len(claimed) != 1 || claimed[0].ID != lost.ID {
			t.Fatalf("claim: %v %+v", err, claimed)
		}

		// Within the grace the answer may still be on its way.
		clock.Advance(ClaimReplyGrace - time.Second)
		if hb := h.heartbeat("w", known.LeaseToken); hb.LeasesExtended != 1 || hb.HandedBack != 0 {
			t.Fatalf("heartbeat within the grace: %+v", hb)
		}
		if j := h.coreJob(lost.ID); j.State != core.StateRunning || j.WorkerID != "w" {
			t.Fatalf("lost claim within the grace: %+v", j)
		}

		clock.Advance(2 * time.Second)
		h.events.drain()
		hb := h.heartbeat("w", known.LeaseToken)
		if hb.LeasesExtended != 1 || hb.HandedBack != 1 {
			t.Fatalf("heartbeat: %+v", hb)
		}
		now := clock.Now()
		if j := h.coreJob(known.ID); j.State != core.StateRunning || !j.LeaseUntil.Equal(now.Add(30*time.Second)) {
			t.Fatalf("named job: %s lease %s, want running until %s", j.State, j.LeaseUntil, now.Add(30*time.Second))
		}
		j := h.coreJob(lost.ID)
		if j.State != core.StateAvailable || j.Attempt != 0 || j.RunAt.After(now) ||
			len(j.Errors) != 1 || j.Errors[0].Cause != core.CauseClaimLost || j.Errors[0].Attempt != 1 || !strings.Contains(j.Errors[0].Error, "never received") {
			t.Fatalf("lost claim after the heartbeat: %+v", j)
		}
		var snoozed []core.Event
		for _, e := range h.events.drain() {
			if e.Kind == core.EventJobSnoozed {
				snoozed = append(snoozed, e)
			}
		}
		if len(snoozed) != 1 || snoozed[0].Job.ID != lost.ID || snoozed[0].Cause != core.CauseClaimLost {
			t.Fatalf("snoozed events %+v", snoozed)
		}
		// Its only attempt is still there: it runs.
		h.register("w2", map[string]any{"queues": []string{"elsewhere"}})
		again := h.claim("w2", nil)
		if len(again) != 1 || again[0].ID != lost.ID || again[0].Attempt != 1 {
			t.Fatalf("re-claim: %+v", again)
		}
		h.must(http.StatusOK, "POST", outcomePath(again[0], "complete"), map[string]any{"lease_token": again[0].LeaseToken}, nil)

		// Nothing else to hand back; the named job stays w's.
		clock.Advance(10 * time.Second)
		if hb := h.heartbeat("w", known.LeaseToken); hb.LeasesExtended != 1 || hb.HandedBack != 0 {
			t.Fatalf("next heartbeat: %+v", hb)
		}
		h.must(http.StatusOK, "POST", outcomePath(known, "complete"), map[string]any{"lease_token": known.LeaseToken}, nil)
	})
}

// TestHeartbeatStaleAndCurrentTokenOfOneJob: a heartbeat naming an earlier
// claim's token of a job next to the current claim's (in either order)
// renews the current claim and hands nothing back.
func TestHeartbeatStaleAndCurrentTokenOfOneJob(t *testing.T) {
	clock := newFakeClock()
	h := newHarness(t, teststores.Memory(t), core.Config{Clock: clock}, Config{})
	h.register("w", map[string]any{"queues": []string{"default"}})
	first := h.claimOne("w", map[string]any{"kind": "k"})
	h.must(http.StatusOK, "POST", outcomePath(first, "snooze"), map[string]any{"lease_token": first.LeaseToken}, nil)
	second := h.claim("w", nil)
	if len(second) != 1 || second[0].ID != first.ID || second[0].LeaseToken == first.LeaseToken {
		t.Fatalf("re-claim: %+v", second)
	}
	for _, order := range [][]string{{first.LeaseToken, second[0].LeaseToken}, {second[0].LeaseToken, first.LeaseToken}} {
		clock.Advance(2 * ClaimReplyGrace)
		if hb := h.heartbeat("w", order...); hb.LeasesExtended != 1 || hb.HandedBack != 0 {
			t.Fatalf("heartbeat %v: %+v", order, hb)
		}
		if j := h.coreJob(first.ID); j.State != core.StateRunning || !j.LeaseUntil.Equal(clock.Now().Add(30*time.Second)) {
			t.Fatalf("job after heartbeat: %+v", j)
		}
	}
}

// TestSnoozedAndReclaimedTokenIsFenced: a job snoozed and claimed again by
// the same worker is at the same attempt as before; the first execution's
// token must not complete, fail, snooze or extend the second.
func TestSnoozedAndReclaimedTokenIsFenced(t *testing.T) {
	teststores.Run(t, func(t *testing.T, st contract.Store) {
		h := newHarness(t, st, core.Config{}, Config{})
		h.register("w", map[string]any{"queues": []string{"default"}})
		first := h.claimOne("w", map[string]any{"kind": "k"})
		h.must(http.StatusOK, "POST", outcomePath(first, "snooze"), map[string]any{"lease_token": first.LeaseToken}, nil)
		got := h.claim("w", nil)
		if len(got) != 1 || got[0].ID != first.ID || got[0].Attempt != first.Attempt || got[0].WorkerID != "w" {
			t.Fatalf("re-claim: %+v (first %+v)", got, first)
		}
		second := got[0]
		if second.LeaseToken == first.LeaseToken || !strings.HasPrefix(second.LeaseToken, "v3.") {
			t.Fatalf("tokens: first %q, second %q", first.LeaseToken, second.LeaseToken)
		}
		before := h.coreJob(first.ID)
		h.events.drain()
		for _, c := range []struct {
			what string
			body map[string]any
		}{
			{"complete", map[string]any{"result": 1}},
			{"fail", map[string]any{"error": "x"}},
			{"fail", map[string]any{"error": "x", "action": "discard"}},
			{"snooze", map[string]any{"delay_seconds": 60}},
			{"lease", map[string]any{"extend_seconds": 3600}},
		} {
			c.body["lease_token"] = first.LeaseToken
			wantProblem(t, h.do("POST", outcomePath(first, c.what), c.body), SlugLeaseLost)
		}
		// And in a batch.
		for _, it := range []map[string]any{item(first, "complete"), item(first, "fail", "error", "x")} {
			r := h.outcomes("w", it)[0]
			if r.Problem == nil || r.Problem.Type != ProblemTypeBase+SlugLeaseLost {
				t.Fatalf("batch item with the first token: %+v %+v", r, r.Problem)
			}
		}
		after := h.coreJob(first.ID)
		if after.State != core.StateRunning || after.ClaimSeq != before.ClaimSeq || after.Attempt != before.Attempt ||
			!after.LeaseUntil.Equal(before.LeaseUntil) || len(after.Errors) != 0 {
			t.Fatalf("the first token changed the second execution:\nbefore %+v\nafter  %+v", before, after)
		}
		if evs := eventsOf(h, core.EventLeaseLost); len(evs) != 7 {
			t.Fatalf("%d lease_lost events, want 7", len(evs))
		}
		// A heartbeat naming the first token renews nothing.
		if hb := h.heartbeat("w", first.LeaseToken); hb.LeasesExtended != 0 {
			t.Fatalf("heartbeat with the first token: %+v", hb)
		}
		// The second token works.
		h.must(http.StatusOK, "POST", outcomePath(second, "complete"), map[string]any{"lease_token": second.LeaseToken, "result": 2}, nil)
		if j := h.get(first.ID); j.State != core.StateCompleted || string(j.Result) != "2" {
			t.Fatalf("completed: %+v", j)
		}
	})
}

// TestExtendLeaseRenewsOnlyThatJob: POST /v1/jobs/{id}/lease renews the
// lease of the job its token names, not the other jobs the worker holds.
func TestExtendLeaseRenewsOnlyThatJob(t *testing.T) {
	teststores.Run(t, func(t *testing.T, st contract.Store) {
		clock := newFakeClock()
		h := newHarness(t, st, core.Config{Clock: clock}, Config{})
		h.register("w", map[string]any{"queues": []string{"default"}})
		for range 3 {
			h.submit(map[string]any{"kind": "k"})
		}
		jobs := h.claim("w", map[string]any{"limit": 3})
		if len(jobs) != 3 {
			t.Fatalf("claim: %+v", jobs)
		}
		claimedUntil := clock.Now().Add(30 * time.Second)
		clock.Advance(10 * time.Second)
		var out LeaseResponse
		h.must(http.StatusOK, "POST", outcomePath(jobs[1], "lease"), map[string]any{"lease_token": jobs[1].LeaseToken, "extend_seconds": 600}, &out)
		if want := clock.Now().Add(10 * time.Minute); !out.LeaseUntil.Equal(want) {
			t.Fatalf("lease until %s, want %s", out.LeaseUntil, want)
		}
		for i, j := range jobs {
			want := claimedUntil
			if i == 1 {
				want = out.LeaseUntil
			}
			if got := h.coreJob(j.ID).LeaseUntil; !got.Equal(want) {
				t.Fatalf("job %d (#%d): lease until %s, want %s", i, j.ID, got, want)
			}
		}
	})
}
