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

// TestRecordProgress: a remote worker records progress and a checkpoint
// with its lease token; GET shows them; the next attempt's claim returns
// the checkpoint without the progress; a stale token is lease-lost and
// values out of bounds are invalid-request, both changing nothing.
func TestRecordProgress(t *testing.T) {
	teststores.Run(t, func(t *testing.T, st contract.Store) {
		clock := newFakeClock()
		h := newHarness(t, st, core.Config{Clock: clock}, Config{})
		h.register("w", map[string]any{"queues": []string{"default"}})
		h.submit(map[string]any{"kind": "k", "max_attempts": 3})
		jobs := h.claim("w", map[string]any{"limit": 1})
		if len(jobs) != 1 || jobs[0].Progress != nil || jobs[0].Checkpoint != nil {
			t.Fatalf("claim: %+v", jobs)
		}
		j := jobs[0]
		clock.Advance(time.Second)
		var out ProgressResponse
		h.must(http.StatusOK, "POST", outcomePath(j, "progress"), map[string]any{"lease_token": j.LeaseToken,
			"percent": 42.5, "message": "row 425 of 1000", "checkpoint": map[string]any{"row": 425}}, &out)
		if out.Progress == nil || out.Progress.Percent != 42.5 || !out.Progress.At.Equal(clock.Now()) || string(out.Checkpoint) != `{"row":425}` {
			t.Fatalf("progress answer: %+v %s", out.Progress, out.Checkpoint)
		}
		got := h.get(j.ID)
		if got.Progress == nil || got.Progress.Percent != 42.5 || got.Progress.Message != "row 425 of 1000" || !strings.Contains(string(got.Checkpoint), "425") {
			t.Fatalf("GET after progress: %+v %s", got.Progress, got.Checkpoint)
		}

		before := h.coreJob(j.ID)
		for name, body := range map[string]map[string]any{
			"neither":           {"lease_token": j.LeaseToken},
			"percent above 100": {"lease_token": j.LeaseToken, "percent": 101},
			"negative percent":  {"lease_token": j.LeaseToken, "percent": -1},
			"message alone":     {"lease_token": j.LeaseToken, "message": "hi"},
			"long message":      {"lease_token": j.LeaseToken, "percent": 1, "message": strings.Repeat("x", core.MaxProgressMessageLen+1)},
			"huge checkpoint":   {"lease_token": j.LeaseToken, "checkpoint": strings.Repeat("x", core.MaxCheckpointBytes)},
		} {
			r := h.do("POST", outcomePath(j, "progress"), body)
			if r.status != http.StatusBadRequest {
				t.Fatalf("%s: status %d %s; want 400", name, r.status, r.body)
			}
			wantProblem(t, r, SlugInvalidRequest)
		}
		if after := h.coreJob(j.ID); after.Progress.Percent != before.Progress.Percent || string(after.Checkpoint) != string(before.Checkpoint) {
			t.Fatalf("a refused report changed the job: %+v %s", after.Progress, after.Checkpoint)
		}

		h.must(http.StatusOK, "POST", outcomePath(j, "fail"), map[string]any{"lease_token": j.LeaseToken, "error": "boom", "retry_in_seconds": 0}, nil)
		r := h.do("POST", outcomePath(j, "progress"), map[string]any{"lease_token": j.LeaseToken, "percent": 99})
		wantProblem(t, r, SlugLeaseLost)
		clock.Advance(time.Second)
		again := h.claim("w", map[string]any{"limit": 1})
		if len(again) != 1 || again[0].ID != j.ID || again[0].Progress != nil || !strings.Contains(string(again[0].Checkpoint), "425") {
			t.Fatalf("claim of the next attempt: %+v", again)
		}
		// null clears the checkpoint.
		h.must(http.StatusOK, "POST", outcomePath(again[0], "progress"), map[string]any{"lease_token": again[0].LeaseToken, "checkpoint": nil}, &out)
		if out.Checkpoint != nil || h.coreJob(j.ID).Checkpoint != nil {
			t.Fatalf("checkpoint null left %s", out.Checkpoint)
		}
	})
}
