package httpapi

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
)

// handlersFor returns a registry with a do-nothing handler per kind.
func handlersFor(kinds ...string) *core.Handlers {
	h := core.NewHandlers()
	for _, k := range kinds {
		h.HandleRaw(k, func(context.Context, *core.Job) error { return nil })
	}
	return h
}

// TestUnknownKindsRefused: the server's client refuses a kind that
// neither its handlers nor a live registered worker handles
// (core.Client.CheckKinds), by default.
func TestUnknownKindsRefused(t *testing.T) {
	clock := newFakeClock()
	ccfg := core.Config{Clock: clock, Handlers: handlersFor("local")}
	runAll(t, ccfg, Config{}, func(t *testing.T, h *harness) {
		// The server's own handlers are known.
		h.submit(map[string]any{"kind": "local"})

		// Nothing handles "remote" yet: 422 naming it, nothing inserted.
		r := h.do("POST", "/v1/jobs", map[string]any{"kind": "remote"})
		p := wantProblem(t, r, SlugUnknownKind)
		if r.status != http.StatusUnprocessableEntity || !strings.Contains(p.Detail, `"remote"`) {
			t.Fatalf("submit of an unknown kind: %d %+v", r.status, p)
		}
		r = h.do("POST", "/v1/jobs/batch", map[string]any{"jobs": []map[string]any{{"kind": "local"}, {"kind": "remote"}}})
		p = wantProblem(t, r, SlugUnknownKind)
		if !strings.Contains(p.Detail, `job 1: `) || !strings.Contains(p.Detail, `"remote"`) {
			t.Fatalf("batch: detail %q, want the item and the kind", p.Detail)
		}
		if n := len(h.snapshot()); n != 1 {
			t.Fatalf("%d jobs stored, want only the first submission", n)
		}

		// A worker announcing "remote" makes it known at once.
		reg := h.register("w1", map[string]any{"queues": []string{"default"}, "kinds": []string{"remote", "other", "remote"}})
		if !slices.Equal(reg.Worker.Kinds, []string{"other", "remote"}) {
			t.Fatalf("registered kinds %v, want sorted without repeats", reg.Worker.Kinds)
		}
		if _, ok := reg.Worker.Metadata[WorkerKindsKey]; ok {
			t.Fatalf("metadata shows %s: %v", WorkerKindsKey, reg.Worker.Metadata)
		}
		h.submit(map[string]any{"kind": "remote"})
		var batch BatchResponse
		h.must(http.StatusOK, "POST", "/v1/jobs/batch", map[string]any{"jobs": []map[string]any{{"kind": "local"}, {"kind": "other"}}}, &batch)

		// GET /v1/workers shows the kinds.
		var list struct {
			Workers []Worker `json:"workers"`
		}
		h.must(http.StatusOK, "GET", "/v1/workers", nil, &list)
		if len(list.Workers) != 1 || !slices.Equal(list.Workers[0].Kinds, []string{"other", "remote"}) {
			t.Fatalf("workers: %+v", list.Workers)
		}

		// A heartbeat keeps the kinds; a worker declared dead no longer
		// counts.
		var hb HeartbeatResponse
		h.must(http.StatusOK, "POST", "/v1/workers/w1/heartbeat", map[string]any{"leases": []string{}}, &hb)
		if !slices.Equal(hb.Worker.Kinds, []string{"other", "remote"}) {
			t.Fatalf("heartbeat lost the kinds: %+v", hb.Worker)
		}
		clock.Advance(h.c.Config().WorkerDeadAfter + time.Second)
		h.c.ForgetWorkerKinds()
		wantProblem(t, h.do("POST", "/v1/jobs", map[string]any{"kind": "remote"}), SlugUnknownKind)

		// Registering again revives it; re-registering without kinds, or
		// deregistering, forgets them.
		h.register("w1", map[string]any{"queues": []string{"default"}, "kinds": []string{"remote"}})
		h.submit(map[string]any{"kind": "remote"})
		h.register("w1", map[string]any{"queues": []string{"default"}})
		wantProblem(t, h.do("POST", "/v1/jobs", map[string]any{"kind": "remote"}), SlugUnknownKind)
		h.register("w1", map[string]any{"queues": []string{"default"}, "kinds": []string{"remote"}})
		h.must(http.StatusNoContent, "DELETE", "/v1/workers/w1", nil, nil)
		wantProblem(t, h.do("POST", "/v1/jobs", map[string]any{"kind": "remote"}), SlugUnknownKind)
	})
}

// TestUnknownKindsWithNothingToCheck: a server that handles no kind
// accepts every kind until a worker announces its own, then refuses the
// others; with AllowUnknownKinds it accepts every kind throughout.
func TestUnknownKindsWithNothingToCheck(t *testing.T) {
	runAll(t, core.Config{}, Config{}, func(t *testing.T, h *harness) {
		h.submit(map[string]any{"kind": "anything"})
		reg := h.register("w1", map[string]any{"queues": []string{"default"}, "kinds": []string{"x"}})
		if !slices.Equal(reg.Worker.Kinds, []string{"x"}) {
			t.Fatalf("kinds %v", reg.Worker.Kinds)
		}
		h.submit(map[string]any{"kind": "x"})
		wantProblem(t, h.do("POST", "/v1/jobs", map[string]any{"kind": "anything"}), SlugUnknownKind)
	})
	runAll(t, core.Config{AllowUnknownKinds: true}, Config{}, func(t *testing.T, h *harness) {
		h.register("w1", map[string]any{"queues": []string{"default"}, "kinds": []string{"x"}})
		h.submit(map[string]any{"kind": "anything"})
	})
}

// TestUnknownKindFromClient: a server over a client that runs handlers
// without AllowUnknownKinds answers the client's refusal as 422
// unknown-kind.
func TestUnknownKindFromClient(t *testing.T) {
	runAll(t, core.Config{Handlers: handlersFor("local")}, Config{}, func(t *testing.T, h *harness) {
		h.submit(map[string]any{"kind": "local"})
		r := h.do("POST", "/v1/jobs", map[string]any{"kind": "remote"})
		p := wantProblem(t, r, SlugUnknownKind)
		if r.status != http.StatusUnprocessableEntity || !strings.Contains(p.Detail, `"remote"`) {
			t.Fatalf("%d %+v", r.status, p)
		}
		if n := len(h.snapshot()); n != 1 {
			t.Fatalf("%d jobs stored, want 1", n)
		}
	})
}

func TestRegisterKindsValidation(t *testing.T) {
	runAll(t, core.Config{}, Config{}, func(t *testing.T, h *harness) {
		many := make([]string, MaxWorkerKinds+1)
		for i := range many {
			many[i] = "k" + itoa(int64(i))
		}
		for name, body := range map[string]map[string]any{
			"empty kind":    {"queues": []string{"q"}, "kinds": []string{""}},
			"long kind":     {"queues": []string{"q"}, "kinds": []string{strings.Repeat("k", contract.MaxKindLen+1)}},
			"too many":      {"queues": []string{"q"}, "kinds": many},
			"reserved key":  {"queues": []string{"q"}, "metadata": map[string]string{WorkerKindsKey: `["x"]`}},
			"metadata size": {"queues": []string{"q"}, "kinds": []string{strings.Repeat("k", 200)}, "metadata": map[string]string{"m": strings.Repeat("v", contract.MaxMetadataBytes-100)}},
		} {
			t.Run(name, func(t *testing.T) {
				wantProblem(t, h.sub(t).do("PUT", "/v1/workers/w1", body), SlugInvalidRequest)
			})
		}
		var list struct {
			Workers []Worker `json:"workers"`
		}
		h.must(http.StatusOK, "GET", "/v1/workers", nil, &list)
		if len(list.Workers) != 0 {
			t.Fatalf("a refused registration was stored: %+v", list.Workers)
		}
	})
}
