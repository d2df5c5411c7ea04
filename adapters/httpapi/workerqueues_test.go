package httpapi

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/internal/teststores"
)

// queueNames returns n distinct queue names q0, q1, …
func queueNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("q%d", i)
	}
	return out
}

// TestWorkerQueuesAreCapped: a registration may name at most
// MaxWorkerQueues queues, and so may a claim; a claim naming many queues
// is checked in linear time, and its error quotes a few names and a count,
// never the whole list.
func TestWorkerQueuesAreCapped(t *testing.T) {
	h := newHarness(t, teststores.Memory(t), core.Config{}, Config{})

	p := wantProblem(t, h.do("PUT", "/v1/workers/w1", map[string]any{"queues": queueNames(MaxWorkerQueues + 1)}), SlugInvalidRequest)
	if !strings.Contains(p.Detail, "over the limit") {
		t.Fatalf("registration over the cap: %q", p.Detail)
	}
	h.register("w1", map[string]any{"queues": queueNames(MaxWorkerQueues)})

	// A claim naming 100,000 queues is refused at once, briefly.
	start := time.Now()
	r := h.do("POST", "/v1/workers/w1/claim", map[string]any{"queues": queueNames(100_000)})
	p = wantProblem(t, r, SlugInvalidRequest)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("claim naming 100k queues took %s", d)
	}
	if len(p.Detail) > 512 {
		t.Fatalf("error detail is %d bytes: %.200q…", len(p.Detail), p.Detail)
	}

	// A stray queue among the allowed count: the error names it and
	// a few registered queues, with their count.
	req := queueNames(MaxWorkerQueues)
	req[MaxWorkerQueues-1] = "stray"
	p = wantProblem(t, h.do("POST", "/v1/workers/w1/claim", map[string]any{"queues": req}), SlugInvalidRequest)
	if !strings.Contains(p.Detail, `"stray"`) || !strings.Contains(p.Detail, "and 995 more (1000 in all)") || len(p.Detail) > 512 {
		t.Fatalf("stray queue detail: %q", p.Detail)
	}

	// A subset claims; so does the whole registration.
	h.submit(map[string]any{"kind": "k", "queue": "q999"})
	if jobs := h.claim("w1", map[string]any{"queues": []string{"q999"}}); len(jobs) != 1 {
		t.Fatalf("claimed %d jobs from a registered queue, want 1", len(jobs))
	}
	h.claim("w1", map[string]any{})
}

// TestClaimRefusesOversizedRegistration: a record holding more queues than
// a claim may read (written before the cap) makes a claim without queues
// fail fast with 400, rather than reading every queue.
func TestClaimRefusesOversizedRegistration(t *testing.T) {
	st := teststores.Memory(t)
	h := newHarness(t, st, core.Config{}, Config{})
	h.register("w1", map[string]any{"queues": []string{"default"}})
	now := time.Now()
	if err := st.RegisterWorker(t.Context(), core.WorkerInfo{ID: "w1", Queues: queueNames(100_000), StartedAt: now, HeartbeatAt: now}); err != nil {
		t.Fatal(err)
	}
	h.srv.workers = newWorkerCache() // forget the cached record
	r := h.do("POST", "/v1/workers/w1/claim", map[string]any{})
	if r.status != http.StatusBadRequest {
		t.Fatalf("claim of a worker registered for 100k queues: %d %.300s", r.status, r.body)
	}
	p := wantProblem(t, r, SlugInvalidRequest)
	if !strings.Contains(p.Detail, "register again") {
		t.Fatalf("detail %q", p.Detail)
	}
}
