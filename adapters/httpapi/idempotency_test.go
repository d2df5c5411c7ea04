package httpapi

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/internal/teststores"
)

// A submission with an Idempotency-Key returns the original job when it
// is retried, while the job is live and for IdempotencyWindow after it
// finished, even when its row was deleted at completion.
func TestIdempotencyKey(t *testing.T) {
	teststores.Run(t, func(t *testing.T, st contract.Store) {
		h := newHarness(t, st, core.Config{}, Config{})
		submit := func(key string, body any) reply {
			return h.send(req{method: "POST", path: "/v1/jobs", body: body, header: map[string]string{"Idempotency-Key": key}})
		}
		var first SubmitResponse
		r := submit("order-42", map[string]any{"kind": "charge", "args": map[string]int{"order": 42}})
		if r.status != http.StatusCreated {
			t.Fatalf("first: %d %s", r.status, r.body)
		}
		r.decode(t, &first)
		if first.Job.UniqueKey != "order-42" || first.Duplicate {
			t.Fatalf("first: %+v", first)
		}
		var again SubmitResponse
		r = submit("order-42", map[string]any{"kind": "charge", "args": map[string]int{"order": 42}})
		r.decode(t, &again)
		if r.status != http.StatusOK || !again.Duplicate || again.Job.ID != first.Job.ID {
			t.Fatalf("retried while live: %d %+v", r.status, again)
		}
		// Complete it with a completed retention of zero: the row goes,
		// the key stays held for the window.
		ctx := context.Background()
		now := time.Now().UTC()
		jobs, err := st.Claim(ctx, contract.ClaimParams{Queue: core.DefaultQueue, WorkerID: "w", Limit: 1, Now: now, LeaseUntil: now.Add(time.Minute)})
		if err != nil || len(jobs) != 1 {
			t.Fatalf("claim: %v %v", jobs, err)
		}
		if _, err := st.Finish(ctx, []contract.Outcome{{JobID: jobs[0].ID, WorkerID: "w", ClaimSeq: jobs[0].ClaimSeq, Attempt: 1, Kind: contract.OutcomeComplete, At: now, Delete: true}}); err != nil {
			t.Fatal(err)
		}
		r = submit("order-42", map[string]any{"kind": "charge", "args": map[string]int{"order": 42}})
		r.decode(t, &again)
		if r.status != http.StatusOK || !again.Duplicate || again.Job.ID != first.Job.ID {
			t.Fatalf("retried after completion: %d %s", r.status, r.body)
		}
		// A body may give the same key and its own window; not another key.
		wantProblem(t, submit("order-43", map[string]any{"kind": "charge", "unique_key": "other"}), SlugInvalidRequest)
		h.must(http.StatusCreated, "POST", "/v1/jobs", map[string]any{"kind": "charge", "unique_key": "u", "unique_scope": "kind", "unique_for_seconds": 60}, nil)
		wantProblem(t, h.do("POST", "/v1/jobs", map[string]any{"kind": "charge", "unique_key": "v", "unique_scope": "tenant"}), SlugInvalidRequest)
		wantProblem(t, h.do("POST", "/v1/jobs", map[string]any{"kind": "charge", "unique_key": "v", "unique_for_seconds": -1}), SlugInvalidRequest)
		wantProblem(t, h.do("POST", "/v1/jobs", map[string]any{"kind": "charge", "unique_key": "v", "unique_for_seconds": 400 * 86400}), SlugInvalidRequest)
		wantProblem(t, h.send(req{method: "POST", path: "/v1/jobs/batch", body: map[string]any{"jobs": []any{map[string]any{"kind": "charge"}}}, header: map[string]string{"Idempotency-Key": "b"}}), SlugInvalidRequest)
	})
}
