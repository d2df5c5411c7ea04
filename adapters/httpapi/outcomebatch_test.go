package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/internal/teststores"
)

// outcomes posts a batch for worker w and decodes a 200 answer.
func (h *harness) outcomes(w string, items ...map[string]any) []OutcomeResult {
	h.t.Helper()
	var out OutcomesResponse
	h.must(http.StatusOK, "POST", "/v1/workers/"+w+"/outcomes", map[string]any{"outcomes": items}, &out)
	if len(out.Results) != len(items) {
		h.t.Fatalf("%d results for %d items", len(out.Results), len(items))
	}
	return out.Results
}

// item is one outcome of a batch for job j.
func item(j *Job, typ string, fields ...any) map[string]any {
	m := map[string]any{"job_id": j.ID, "lease_token": j.LeaseToken, "type": typ}
	for i := 0; i+1 < len(fields); i += 2 {
		m[fields[i].(string)] = fields[i+1]
	}
	return m
}

// wantItem asserts one result: applied in state, or a problem of slug.
func wantItem(t *testing.T, name string, r OutcomeResult, id int64, state core.State, slug string) {
	t.Helper()
	if r.JobID != id {
		t.Fatalf("%s: result for job %d, want %d", name, r.JobID, id)
	}
	if slug == "" {
		if !r.Applied || r.State != state || r.Problem != nil {
			t.Fatalf("%s: %+v, want applied in %s", name, r, state)
		}
		return
	}
	info := problems[slug]
	if r.Applied || r.State != "" || r.Problem == nil || r.Problem.Type != ProblemTypeBase+slug ||
		r.Problem.Status != info.status || r.Problem.Title != info.title || r.Problem.Detail == "" {
		t.Fatalf("%s: %+v (problem %+v), want problem %s", name, r, r.Problem, slug)
	}
}

func TestOutcomeBatch(t *testing.T) {
	teststores.Run(t, func(t *testing.T, st contract.Store) {
		clock := newFakeClock()
		h := newHarness(t, st, core.Config{Clock: clock, Retry: core.DelayList{time.Hour}, MaxResultBytes: 100}, Config{})
		h.register("w", map[string]any{"queues": []string{"default"}})
		h.register("w2", map[string]any{"queues": []string{"default"}})

		// A job held by w2, whose token w must not present.
		foreign := h.claimOne("w2", map[string]any{"kind": "foreign"})

		kinds := []string{"complete", "retry", "last", "snooze", "snooze-now", "cancelled", "garbage", "oversized", "bad-action", "discard", "cancel", "twice"}
		maxAttempts := map[string]int{"last": 1, "retry": 3}
		ids := map[string]int64{}
		for _, k := range kinds {
			body := map[string]any{"kind": k}
			if n := maxAttempts[k]; n > 0 {
				body["max_attempts"] = n
			}
			ids[k] = h.submit(body).ID
		}
		jobs := map[string]*Job{}
		for _, j := range h.claim("w", map[string]any{"limit": 100}) {
			jobs[j.Kind] = j
		}
		if len(jobs) != len(kinds) {
			t.Fatalf("claimed %d jobs, want %d", len(jobs), len(kinds))
		}
		// Cancelled while running: its token is stale.
		h.must(http.StatusOK, "POST", "/v1/jobs/"+itoa(ids["cancelled"])+"/cancel", nil, nil)
		garbage := item(jobs["garbage"], "complete")
		garbage["lease_token"] = "garbage"
		twice := item(jobs["twice"], "complete")

		clock.Advance(2 * time.Second)
		h.events.drain()
		before := map[string]*Job{}
		for k, j := range jobs {
			before[k] = h.get(j.ID)
		}
		res := h.outcomes("w",
			item(jobs["complete"], "complete", "result", map[string]int{"n": 1}),
			item(jobs["retry"], "fail", "error", "boom", "trace", "line 1"),
			item(jobs["last"], "fail", "error", "last try"),
			item(jobs["snooze"], "snooze", "delay_seconds", 30),
			item(jobs["snooze-now"], "snooze"),
			item(jobs["cancelled"], "complete"),
			garbage,
			map[string]any{"job_id": foreign.ID, "lease_token": foreign.LeaseToken, "type": "complete"},
			item(jobs["oversized"], "complete", "result", strings.Repeat("x", 200)),
			item(jobs["bad-action"], "fail", "error", "x", "action", "explode"),
			item(jobs["discard"], "fail", "error", "bad input", "action", "discard"),
			item(jobs["cancel"], "fail", "error", "not wanted", "action", "cancel"),
			twice,
			twice,
		)
		now := clock.Now()
		wantItem(t, "complete", res[0], ids["complete"], core.StateCompleted, "")
		wantItem(t, "retry", res[1], ids["retry"], core.StateRetryable, "")
		wantItem(t, "last attempt", res[2], ids["last"], core.StateDiscarded, "")
		wantItem(t, "snooze", res[3], ids["snooze"], core.StateScheduled, "")
		wantItem(t, "snooze now", res[4], ids["snooze-now"], core.StateAvailable, "")
		wantItem(t, "stale token", res[5], ids["cancelled"], "", SlugLeaseLost)
		wantItem(t, "garbage token", res[6], ids["garbage"], "", SlugInvalidLeaseToken)
		wantItem(t, "another worker's token", res[7], foreign.ID, "", SlugInvalidLeaseToken)
		wantItem(t, "oversized result", res[8], ids["oversized"], "", SlugInvalidRequest)
		wantItem(t, "bad action", res[9], ids["bad-action"], "", SlugInvalidRequest)
		wantItem(t, "discard", res[10], ids["discard"], core.StateDiscarded, "")
		wantItem(t, "cancel", res[11], ids["cancel"], core.StateCancelled, "")
		wantItem(t, "first of two", res[12], ids["twice"], core.StateCompleted, "")
		wantItem(t, "second of two", res[13], ids["twice"], "", SlugInvalidRequest)

		// The effects.
		if j := h.get(ids["complete"]); j.State != core.StateCompleted || strings.ReplaceAll(string(j.Result), " ", "") != `{"n":1}` || !j.FinishedAt.Equal(now) {
			t.Fatalf("complete: %+v %s", j, j.Result)
		}
		if j := h.get(ids["retry"]); j.State != core.StateRetryable || !j.RunAt.Equal(now.Add(time.Hour)) ||
			len(j.Errors) != 1 || j.Errors[0] != (core.AttemptError{Attempt: 1, At: now, Error: "boom", Trace: "line 1", Cause: core.CauseHandlerError, StartedAt: j.AttemptedAt}) {
			t.Fatalf("retry: %+v", j)
		}
		if j := h.get(ids["last"]); j.State != core.StateDiscarded || len(j.Errors) != 1 || j.Errors[0].Error != "last try" {
			t.Fatalf("last attempt: %+v", j)
		}
		if j := h.get(ids["snooze"]); j.State != core.StateScheduled || j.Attempt != 0 || !j.RunAt.Equal(now.Add(30*time.Second)) {
			t.Fatalf("snooze: %+v", j)
		}
		if j := h.get(ids["snooze-now"]); j.State != core.StateAvailable || j.Attempt != 0 {
			t.Fatalf("snooze now: %+v", j)
		}
		if j := h.get(ids["discard"]); j.State != core.StateDiscarded || j.Errors[0].Error != "bad input" {
			t.Fatalf("discard: %+v", j)
		}
		if j := h.get(ids["cancel"]); j.State != core.StateCancelled || j.Errors[0].Error != "not wanted" {
			t.Fatalf("cancel: %+v", j)
		}
		if j := h.get(ids["twice"]); j.State != core.StateCompleted {
			t.Fatalf("twice: %+v", j)
		}
		// Refused items changed nothing.
		for _, k := range []string{"cancelled", "garbage", "oversized", "bad-action"} {
			if j := h.get(ids[k]); !jobEqual(j, before[k]) {
				t.Fatalf("%s changed:\nbefore %+v\nafter  %+v", k, before[k], j)
			}
		}
		if j := h.get(foreign.ID); j.State != core.StateRunning || j.WorkerID != "w2" {
			t.Fatalf("w2's job: %+v", j)
		}

		// The events, as the single endpoints report them.
		evs := map[core.EventKind][]core.Event{}
		for _, e := range h.events.drain() {
			evs[e.Kind] = append(evs[e.Kind], e)
		}
		if es := evs[core.EventJobCompleted]; len(es) != 2 {
			t.Fatalf("completed events %+v", es)
		}
		for _, e := range evs[core.EventJobCompleted] {
			if e.Duration != 2*time.Second || e.Queue != "default" || e.Job.Queue != "default" || (e.Job.Kind != "complete" && e.Job.Kind != "twice") {
				t.Fatalf("completed event %+v (job %+v)", e, e.Job)
			}
		}
		if es := evs[core.EventJobRetried]; len(es) != 1 || es[0].Job.ID != ids["retry"] || es[0].Err == nil || es[0].Err.Error() != "boom" || es[0].Duration != 2*time.Second {
			t.Fatalf("retried events %+v", es)
		}
		discarded := map[string]int64{}
		for _, e := range evs[core.EventJobDiscarded] {
			discarded[e.Reason] = e.Job.ID
		}
		if len(evs[core.EventJobDiscarded]) != 2 || discarded[core.ReasonExhausted] != ids["last"] || discarded[core.ReasonPermanent] != ids["discard"] {
			t.Fatalf("discarded events %+v", evs[core.EventJobDiscarded])
		}
		if es := evs[core.EventJobCancelled]; len(es) != 1 || es[0].Job.ID != ids["cancel"] {
			t.Fatalf("cancelled events %+v", es)
		}
		if es := evs[core.EventJobSnoozed]; len(es) != 2 || es[0].Duration != 2*time.Second || es[0].Job.Kind == "" {
			t.Fatalf("snoozed events %+v", es)
		}
		if es := evs[core.EventLeaseLost]; len(es) != 1 || es[0].Job.ID != ids["cancelled"] {
			t.Fatalf("lease lost events %+v", es)
		}

		// A replay of the applied items (an answer lost on the way): every
		// one is lease-lost and nothing changes.
		snap := h.state()
		res = h.outcomes("w",
			item(jobs["complete"], "complete", "result", 2),
			item(jobs["retry"], "fail", "error", "again"),
			item(jobs["snooze"], "snooze"),
		)
		for i, r := range res {
			wantItem(t, fmt.Sprintf("replay %d", i), r, r.JobID, "", SlugLeaseLost)
		}
		if h.state() != snap {
			t.Fatal("a replay changed the store")
		}
		// The refused ones can still be reported.
		res = h.outcomes("w",
			item(jobs["oversized"], "complete", "result", "small"),
			item(jobs["bad-action"], "fail", "error", "x", "action", "discard", "trace", "t"),
			item(jobs["garbage"], "snooze", "delay_seconds", 0.5),
		)
		wantItem(t, "oversized again", res[0], ids["oversized"], core.StateCompleted, "")
		wantItem(t, "bad action again", res[1], ids["bad-action"], core.StateDiscarded, "")
		wantItem(t, "garbage again", res[2], ids["garbage"], core.StateScheduled, "")
		// Only w2's job, still running, is remembered.
		if n := h.srv.claims.len(); n != 1 {
			t.Fatalf("%d claims remembered after every outcome but one", n)
		}
	})
}

// jobEqual compares two API jobs field by field.
func jobEqual(a, b *Job) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func TestOutcomeBatchMalformedChangesNothing(t *testing.T) {
	teststores.Run(t, func(t *testing.T, st contract.Store) {
		h := newHarness(t, st, core.Config{}, Config{MaxBodyBytes: 160 << 10})
		h.register("w", map[string]any{"queues": []string{"default"}})
		j := h.claimOne("w", map[string]any{"kind": "k"})
		good := fmt.Sprintf(`{"job_id":%d,"lease_token":%q,"type":"complete"}`, j.ID, j.LeaseToken)
		many := strings.TrimSuffix(strings.Repeat(good+",", MaxOutcomeBatch+1), ",")
		path := "/v1/workers/w/outcomes"
		text := "text/plain"
		for _, c := range []struct {
			name string
			req  req
			slug string
		}{
			{"not JSON", req{method: "POST", path: path, body: `{"outcomes":[` + good}, SlugInvalidJSON},
			{"trailing data", req{method: "POST", path: path, body: `{"outcomes":[` + good + `]} x`}, SlugInvalidJSON},
			{"no body", req{method: "POST", path: path, body: []byte{}}, SlugInvalidRequest},
			{"no outcomes", req{method: "POST", path: path, body: `{}`}, SlugInvalidRequest},
			{"empty outcomes", req{method: "POST", path: path, body: `{"outcomes":[]}`}, SlugInvalidRequest},
			{"too many outcomes", req{method: "POST", path: path, body: `{"outcomes":[` + many + `]}`}, SlugInvalidRequest},
			{"unknown top-level field", req{method: "POST", path: path, body: `{"outcomes":[` + good + `],"x":1}`}, SlugInvalidRequest},
			{"unknown item field", req{method: "POST", path: path, body: `{"outcomes":[` + good + `,{"job_id":1,"lease_token":"t","type":"complete","reslt":1}]}`}, SlugInvalidRequest},
			{"wrong item type", req{method: "POST", path: path, body: `{"outcomes":[` + good + `,{"job_id":"1","lease_token":"t","type":"complete"}]}`}, SlugInvalidRequest},
			{"outcomes not a list", req{method: "POST", path: path, body: `{"outcomes":` + good + `}`}, SlugInvalidRequest},
			{"wrong content type", req{method: "POST", path: path, body: `{"outcomes":[` + good + `]}`, contentType: &text}, SlugUnsupportedMediaType},
			{"too large", req{method: "POST", path: path, body: `{"outcomes":[` + strings.Repeat(good+",", 2000) + good + `]}`}, SlugBodyTooLarge},
			{"bad worker id", req{method: "POST", path: "/v1/workers/" + strings.Repeat("i", 256) + "/outcomes", body: `{"outcomes":[` + good + `]}`}, SlugInvalidRequest},
		} {
			t.Run(c.name, func(t *testing.T) {
				h := h.sub(t)
				before := h.state()
				h.events.drain()
				wantProblem(t, h.send(c.req), c.slug)
				if h.state() != before {
					t.Fatalf("%s changed the store", c.name)
				}
				if evs := h.events.drain(); len(evs) != 0 {
					t.Fatalf("%s emitted %+v", c.name, evs)
				}
			})
		}
		// The job is still held, and the good item still applies.
		wantItem(t, "good", h.outcomes("w", item(j, "complete"))[0], j.ID, core.StateCompleted, "")
	})
}

// TestOutcomeBatchItemChecks: fields of another type, missing fields and
// bad values are item problems; the other items apply.
func TestOutcomeBatchItemChecks(t *testing.T) {
	h := newHarness(t, teststores.Memory(t), core.Config{}, Config{})
	h.register("w", map[string]any{"queues": []string{"default"}})
	j := h.claimOne("w", map[string]any{"kind": "k"})
	tok := j.LeaseToken
	other := h.tokenFor(&core.Job{ID: j.ID + 1000, ClaimSeq: 1, Attempt: 1}, "w")
	bad := []map[string]any{
		{"lease_token": tok, "type": "complete"},
		{"job_id": j.ID, "lease_token": tok},
		{"job_id": j.ID, "lease_token": tok, "type": "finish"},
		{"job_id": j.ID, "lease_token": tok, "type": "complete", "error": "x"},
		{"job_id": j.ID, "lease_token": tok, "type": "complete", "delay_seconds": 1},
		{"job_id": j.ID, "lease_token": tok, "type": "fail"},
		{"job_id": j.ID, "lease_token": tok, "type": "fail", "error": "x", "result": 1},
		{"job_id": j.ID, "lease_token": tok, "type": "fail", "error": "x", "action": "discard", "retry_in_seconds": 1},
		{"job_id": j.ID, "lease_token": tok, "type": "fail", "error": "x", "retry_in_seconds": -1},
		{"job_id": j.ID, "lease_token": tok, "type": "snooze", "delay_seconds": -1},
		{"job_id": j.ID, "lease_token": tok, "type": "snooze", "result": "x"},
		{"job_id": j.ID, "lease_token": tok, "type": "snooze", "trace": "x"},
		{"job_id": j.ID, "lease_token": "", "type": "complete"},
		{"job_id": j.ID, "lease_token": other, "type": "complete"},
	}
	slugs := []string{SlugInvalidRequest, SlugInvalidRequest, SlugInvalidRequest, SlugInvalidRequest, SlugInvalidRequest, SlugInvalidRequest,
		SlugInvalidRequest, SlugInvalidRequest, SlugInvalidRequest, SlugInvalidRequest, SlugInvalidRequest, SlugInvalidRequest,
		SlugInvalidLeaseToken, SlugInvalidLeaseToken}
	before := h.state()
	for i, it := range bad {
		// One bad item per batch (a job may appear once per batch).
		res := h.outcomes("w", it)
		id, _ := it["job_id"].(int64)
		wantItem(t, fmt.Sprintf("item %d %v", i, it), res[0], id, "", slugs[i])
	}
	if h.state() != before {
		t.Fatal("refused items changed the store")
	}
	wantItem(t, "good", h.outcomes("w", item(j, "complete", "result", nil))[0], j.ID, core.StateCompleted, "")
}

// TestOutcomeBatchOtherServer: outcomes of a job another server handed
// out apply; their events know only what the token says.
func TestOutcomeBatchOtherServer(t *testing.T) {
	teststores.Run(t, func(t *testing.T, st contract.Store) {
		h := newHarness(t, st, core.Config{}, Config{})
		h2 := newHarness(t, st, core.Config{}, Config{})
		h.register("w", map[string]any{"queues": []string{"default"}})
		a := h.claimOne("w", map[string]any{"kind": "a"})
		b := h.claimOne("w", map[string]any{"kind": "b", "max_attempts": 5})
		h2.events.drain()
		res := h2.outcomes("w", item(a, "complete"), item(b, "fail", "error", "x"))
		wantItem(t, "complete", res[0], a.ID, core.StateCompleted, "")
		wantItem(t, "fail", res[1], b.ID, core.StateRetryable, "")
		for _, e := range h2.events.drain() {
			switch e.Kind {
			case core.EventJobCompleted:
				if e.Job.ID != a.ID || e.Job.Attempt != 1 || e.Job.WorkerID != "w" || e.Duration != 0 {
					t.Fatalf("completed event %+v job %+v", e, e.Job)
				}
			case core.EventJobRetried:
				// A failure reads its job: the event knows it all.
				if e.Job.ID != b.ID || e.Job.Kind != "b" || e.Queue != "default" {
					t.Fatalf("retried event %+v job %+v", e, e.Job)
				}
			}
		}
		// The first server still remembers both claims; that is bounded
		// by time, and a later claim of the same job replaces the entry.
		if n := h.srv.claims.len(); n != 2 {
			t.Fatalf("first server remembers %d claims", n)
		}
	})
}

// TestOutcomeBatchWakesLongPolls: a snooze to now in a batch wakes a
// waiting claim at once (no poll ticks in this test).
func TestOutcomeBatchWakesLongPolls(t *testing.T) {
	h := newHarness(t, teststores.Memory(t), core.Config{}, Config{ClaimPollInterval: time.Hour})
	h.register("w", map[string]any{"queues": []string{"default"}})
	j := h.claimOne("w", map[string]any{"kind": "k"})
	done := h.sendAsync(req{method: "POST", path: "/v1/workers/w/claim", body: map[string]any{"wait_seconds": 60}})
	eventually(t, "the claim to wait", func() bool { return h.srv.waiting.Load() == 1 })
	wantItem(t, "snooze", h.outcomes("w", item(j, "snooze"))[0], j.ID, core.StateAvailable, "")
	r := <-done
	var out ClaimResponse
	_ = json.Unmarshal(r.body, &out)
	if r.status != http.StatusOK || len(out.Jobs) != 1 || out.Jobs[0].ID != j.ID || out.Jobs[0].Attempt != 1 {
		t.Fatalf("long-poll after a batched snooze: %d %s", r.status, r.body)
	}
}

// TestOutcomeBatchZeroRetention: completions delete the row and report
// the state completed.
func TestOutcomeBatchZeroRetention(t *testing.T) {
	runAll(t, core.Config{Retention: &core.Retention{Completed: 0, Cancelled: time.Hour, Discarded: time.Hour}}, Config{}, func(t *testing.T, h *harness) {
		h.register("w", map[string]any{"queues": []string{"default"}})
		j := h.claimOne("w", map[string]any{"kind": "k"})
		wantItem(t, "complete", h.outcomes("w", item(j, "complete", "result", true))[0], j.ID, core.StateCompleted, "")
		wantProblem(t, h.do("GET", "/v1/jobs/"+itoa(j.ID), nil), SlugJobNotFound)
	})
}

func TestClaimMemoryBounds(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	c := newClaimMemory(30 * time.Second)
	c.remember([]*core.Job{{ID: 1, Attempt: 1, ClaimSeq: 1, Queue: "q", Kind: "k", Args: []byte(`{"big":1}`), AttemptedAt: now}}, now)
	if j := c.take(1, 2); j != nil {
		t.Fatalf("another claim's job: %+v", j)
	}
	j := c.take(1, 1)
	if j == nil || j.Queue != "q" || j.Kind != "k" || j.ClaimSeq != 1 || j.Args != nil || !j.AttemptedAt.Equal(now) {
		t.Fatalf("take: %+v", j)
	}
	if c.take(1, 1) != nil || c.len() != 0 {
		t.Fatal("taken twice")
	}
	// A later claim replaces the earlier one, also at the same attempt
	// (after a snooze): the claim sequence tells them apart.
	c.remember([]*core.Job{{ID: 2, Attempt: 1, ClaimSeq: 1, AttemptedAt: now}}, now)
	c.remember([]*core.Job{{ID: 2, Attempt: 1, ClaimSeq: 2, AttemptedAt: now}}, now)
	if c.len() != 1 || c.take(2, 1) != nil || c.take(2, 2) == nil {
		t.Fatal("re-claim")
	}
	// Claims are forgotten after an hour (at least twice the lease).
	c.remember([]*core.Job{{ID: 3, Attempt: 1, ClaimSeq: 1, AttemptedAt: now}}, now)
	later := now.Add(time.Hour)
	c.remember([]*core.Job{{ID: 4, Attempt: 1, ClaimSeq: 1, AttemptedAt: later}}, later)
	if c.len() != 1 || c.take(3, 1) != nil {
		t.Fatalf("expired claims kept: %d", c.len())
	}
}
