package httpapi

import (
	"net/http"
	"testing"

	"github.com/backlogq/backlog/core"
)

// TestClaimedJobsNameTheirExecution: a claimed job carries claim_seq,
// which names the execution where attempt does not (a job handed back
// unrun is claimed again at the same attempt, with the next claim_seq).
func TestClaimedJobsNameTheirExecution(t *testing.T) {
	runAll(t, core.Config{}, Config{}, func(t *testing.T, h *harness) {
		j := h.submit(map[string]any{"kind": "k"})
		h.register("w", map[string]any{"queues": []string{"default"}})
		got := h.claim("w", map[string]any{"limit": 1})
		if len(got) != 1 || got[0].ID != j.ID || got[0].ClaimSeq != 1 || got[0].Attempt != 1 {
			t.Fatalf("first claim: %+v; want claim_seq 1 at attempt 1", got)
		}
		// Handed back unrun: the same attempt comes again, not the same
		// execution.
		var out struct{ Job *Job }
		h.must(http.StatusOK, "POST", outcomePath(got[0], "snooze"), map[string]any{"lease_token": got[0].LeaseToken, "hand_back": core.CauseLeaseUnrenewed}, &out)
		got = h.claim("w", map[string]any{"limit": 1})
		if len(got) != 1 || got[0].ClaimSeq != 2 || got[0].Attempt != 1 {
			t.Fatalf("claim after the hand-back: %+v; want claim_seq 2 at attempt 1", got)
		}
	})
}
