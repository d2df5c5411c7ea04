package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/memory"
)

// y10k is a run_at with a four-digit year whose UTC instant is in year
// 10000, beyond what encoding/json writes.
const y10k = "9999-12-31T23:59:59-14:00"

// TestSubmitRejectsTimesOutOfRange: run_at and deadline outside core's
// range are 400 invalid-request naming the field, alone and in a batch,
// and nothing is stored.
func TestSubmitRejectsTimesOutOfRange(t *testing.T) {
	runAll(t, core.Config{}, Config{}, func(t *testing.T, h *harness) {
		for _, tc := range []struct {
			body  map[string]any
			field string
		}{
			{map[string]any{"kind": "y10k", "run_at": y10k}, "run_at 9999-12-31T23:59:59-14:00 (10000-01-01T13:59:59Z) is outside"},
			{map[string]any{"kind": "y10k", "deadline": y10k}, "deadline 9999-12-31T23:59:59-14:00 (10000-01-01T13:59:59Z) is outside"},
			{map[string]any{"kind": "old", "run_at": "0001-01-01T00:00:01Z"}, "run_at 0001-01-01T00:00:01Z is outside"},
			{map[string]any{"kind": "old", "run_at": "1969-12-31T23:59:59Z"}, "run_at 1969-12-31T23:59:59Z is outside"},
		} {
			p := wantProblem(t, h.do("POST", "/v1/jobs", tc.body), SlugInvalidRequest)
			if !strings.Contains(p.Detail, tc.field) {
				t.Fatalf("detail %q does not name %q", p.Detail, tc.field)
			}
			batch := map[string]any{"jobs": []any{map[string]any{"kind": "fine"}, tc.body}}
			p = wantProblem(t, h.do("POST", "/v1/jobs/batch", batch), SlugInvalidRequest)
			if !strings.HasPrefix(p.Detail, "jobs[1]: ") || !strings.Contains(p.Detail, tc.field) {
				t.Fatalf("batch detail %q does not name jobs[1] and %q", p.Detail, tc.field)
			}
		}
		if n := len(h.snapshot()); n != 0 {
			t.Fatalf("%d jobs stored", n)
		}
		// The bounds themselves are fine and read back as sent.
		j := h.submit(map[string]any{"kind": "edge", "run_at": "9999-12-31T23:59:59.999999Z", "deadline": "9999-12-31T23:59:59.999999Z"})
		if got := h.get(j.ID); !got.RunAt.Equal(core.MaxTime) || !got.Deadline.Equal(core.MaxTime) {
			t.Fatalf("MaxTime read back as run_at %s, deadline %s", got.RunAt, got.Deadline)
		}
		var page ListResponse
		h.must(http.StatusOK, "GET", "/v1/jobs", nil, &page)
		if len(page.Jobs) != 1 {
			t.Fatalf("list: %d jobs", len(page.Jobs))
		}
	})
}

// TestSubmitRejectsInvalidUTF8: args and results must be UTF-8; the
// decoder lets invalid bytes inside a raw value through.
func TestSubmitRejectsInvalidUTF8(t *testing.T) {
	runAll(t, core.Config{}, Config{}, func(t *testing.T, h *harness) {
		bad := "{\"kind\":\"k\",\"args\":{\"s\":\"\xff\xfe\"}}"
		p := wantProblem(t, h.do("POST", "/v1/jobs", bad), SlugInvalidJSON)
		if !strings.Contains(p.Detail, "UTF-8") {
			t.Fatalf("detail %q", p.Detail)
		}
		wantProblem(t, h.do("POST", "/v1/jobs/batch", "{\"jobs\":[{\"kind\":\"k\",\"args\":\"\xc3\"}]}"), SlugInvalidJSON)
		if n := len(h.snapshot()); n != 0 {
			t.Fatalf("%d jobs stored", n)
		}

		h.submit(map[string]any{"kind": "k"})
		h.register("w", map[string]any{"queues": []string{"default"}})
		jobs := h.claim("w", nil)
		if len(jobs) != 1 {
			t.Fatalf("claimed %d", len(jobs))
		}
		p = wantProblem(t, h.do("POST", "/v1/jobs/"+itoa(jobs[0].ID)+"/complete", "{\"lease_token\":\""+jobs[0].LeaseToken+"\",\"result\":\"\xff\"}"), SlugInvalidJSON)
		if !strings.Contains(p.Detail, "UTF-8") {
			t.Fatalf("detail %q", p.Detail)
		}
		if j := h.get(jobs[0].ID); j.State != core.StateRunning {
			t.Fatalf("job %s after a rejected completion", j.State)
		}
	})
}

// TestStoredBytesEchoAsValidJSON: args and results stored before UTF-8
// was checked (or written by RecordRawResult) are answered as JSON
// strings, so every answer stays valid JSON in UTF-8.
func TestStoredBytesEchoAsValidJSON(t *testing.T) {
	st := memory.New()
	h := newHarness(t, st, core.Config{}, Config{})
	ctx := context.Background()
	now := time.Now()
	res, err := st.Insert(ctx, now, []core.InsertParams{{Queue: "default", Kind: "k", Args: []byte("{\"s\":\"\xff\"}"), Priority: 5, MaxAttempts: 1, RunAt: now}})
	if err != nil {
		t.Fatal(err)
	}
	id := res[0].Job.ID
	claimed, err := st.Claim(ctx, contract.ClaimParams{Queue: "default", WorkerID: "w", Limit: 1, Now: now, LeaseUntil: now.Add(time.Minute)})
	if err != nil || len(claimed) != 1 {
		t.Fatal(claimed, err)
	}
	if _, err := st.Finish(ctx, []contract.Outcome{{JobID: id, WorkerID: "w", ClaimSeq: claimed[0].ClaimSeq, Attempt: 1, Kind: contract.OutcomeComplete, At: now, Result: []byte("[\"\xfe\"]")}}); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/v1/jobs/" + itoa(id), "/v1/jobs"} {
		r := h.do("GET", path, nil)
		if r.status != http.StatusOK || !utf8.Valid(r.body) || !json.Valid(r.body) {
			t.Fatalf("GET %s: %d, valid UTF-8 %v: %q", path, r.status, utf8.Valid(r.body), r.body)
		}
	}
}

// farFutureStore is a memory store holding jobs written past core's
// validation, as older versions stored them: the way to meet year-10000
// rows until the migration repairs them.
func farFutureStore(t *testing.T, n int, bad map[int]string) (*memory.Store, []int64) {
	t.Helper()
	st := memory.New()
	t.Cleanup(func() { _ = st.Close() })
	far, err := time.Parse(time.RFC3339, y10k)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	var ids []int64
	for i := range n {
		p := core.InsertParams{Queue: "default", Kind: "k", Args: []byte(`{}`), Priority: 5, MaxAttempts: 3, RunAt: now.Add(-time.Minute)}
		switch bad[i] {
		case "run_at":
			p.RunAt = far
		case "deadline":
			p.Deadline = far
		}
		res, err := st.Insert(context.Background(), now, []core.InsertParams{p})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res[0].Job.ID)
	}
	return st, ids
}

// TestEncodingFailureIsAProblem: a stored job JSON cannot carry answers
// 500 problem+json with the correlation id and the reason, never an empty
// 500; a list page ends before it with next_after, and the page that
// starts at it is that problem.
func TestEncodingFailureIsAProblem(t *testing.T) {
	st, ids := farFutureStore(t, 3, map[int]string{1: "run_at"})
	h := newHarness(t, st, core.Config{}, Config{})
	for _, path := range []string{"/v1/jobs/" + itoa(ids[1]), "/v1/jobs?after=" + itoa(ids[0])} {
		r := h.send(req{method: "GET", path: path, header: map[string]string{"X-Correlation-Id": "cid-y10k"}})
		if r.status != http.StatusInternalServerError || r.header.Get("Content-Type") != "application/problem+json" {
			t.Fatalf("GET %s: %d %q: %q", path, r.status, r.header.Get("Content-Type"), r.body)
		}
		var p problemBody
		if err := json.Unmarshal(r.body, &p); err != nil {
			t.Fatalf("GET %s: %v: %q", path, err, r.body)
		}
		if p.CorrelationID != "cid-y10k" || p.Type != ProblemTypeBase+SlugInternal || !strings.Contains(p.Detail, "year outside of range") {
			t.Fatalf("GET %s: problem %+v", path, p)
		}
	}
	var page ListResponse
	h.must(http.StatusOK, "GET", "/v1/jobs", nil, &page)
	if len(page.Jobs) != 1 || page.Jobs[0].ID != ids[0] || page.NextAfter == nil || *page.NextAfter != ids[0] {
		t.Fatalf("first page: %d jobs, next_after %v; want job %d alone and the cursor after it", len(page.Jobs), page.NextAfter, ids[0])
	}
}

// TestClaimHandsBackUndeliverableJobs: a claim that meets a job it cannot
// encode answers the others and hands that job back unrun, its attempt
// not used, instead of answering 500 with every job left running.
func TestClaimHandsBackUndeliverableJobs(t *testing.T) {
	st, ids := farFutureStore(t, 10, map[int]string{3: "deadline"})
	clock := newFakeClock()
	h := newHarness(t, st, core.Config{Clock: clock}, Config{})
	h.register("w", map[string]any{"queues": []string{"default"}})
	var out ClaimResponse
	h.must(http.StatusOK, "POST", "/v1/workers/w/claim", map[string]any{"limit": 10}, &out)
	if len(out.Jobs) != 9 {
		t.Fatalf("claim answered %d jobs; want the 9 that encode", len(out.Jobs))
	}
	for _, j := range out.Jobs {
		if j.ID == ids[3] || j.LeaseToken == "" {
			t.Fatalf("answered job %d (token %q)", j.ID, j.LeaseToken)
		}
	}
	j, err := st.Get(context.Background(), ids[3])
	if err != nil {
		t.Fatal(err)
	}
	if j.State == core.StateRunning || j.Attempt != 0 || len(j.Errors) != 1 || j.Errors[0].Cause != core.CauseUndeliverable {
		t.Fatalf("the undeliverable job: state %s, attempt %d, errors %+v; want handed back, attempt 0, one undeliverable entry", j.State, j.Attempt, j.Errors)
	}
	if !j.RunAt.After(clock.Now()) {
		t.Fatalf("handed back due at %s, now %s: every claim would meet it again at once", j.RunAt, clock.Now())
	}
	handedBack := false
	for _, e := range h.events.drain() {
		if e.Kind == core.EventJobClaimed && e.Job.ID == ids[3] {
			t.Fatal("the undeliverable job was reported claimed")
		}
		handedBack = handedBack || e.Kind == core.EventJobSnoozed && e.Job.ID == ids[3] && e.Cause == core.CauseUndeliverable
	}
	if !handedBack {
		t.Fatal("no snoozed event with cause undeliverable for the job handed back")
	}
	// It is not claimed again before its delay.
	if jobs := h.claim("w", map[string]any{"limit": 10}); len(jobs) != 0 {
		t.Fatalf("claimed %d more", len(jobs))
	}
}
