package httpapi

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/memory"
)

// GET /v1/jobs?archived=true lists the archive, marked archived; GET
// /v1/jobs leaves archived jobs out; GET /v1/jobs/{id} falls back to the
// archive; a malformed archived is 400, and a store without an archive
// 501.
func TestListArchived(t *testing.T) {
	runAll(t, core.Config{}, Config{}, func(t *testing.T, h *harness) {
		old := h.submit(map[string]any{"kind": "old", "args": map[string]any{"n": 1}})
		live := h.submit(map[string]any{"kind": "live", "args": map[string]any{}})
		h.must(http.StatusOK, "POST", "/v1/jobs/"+itoa(old.ID)+"/cancel", nil, nil)
		if n, err := h.st.(contract.Archiver).Archive(context.Background(), core.StateCancelled, time.Now().Add(time.Hour), 100); err != nil || n != 1 {
			t.Fatalf("Archive: %d, %v", n, err)
		}

		var out ListResponse
		h.must(http.StatusOK, "GET", "/v1/jobs", nil, &out)
		if len(out.Jobs) != 1 || out.Jobs[0].ID != live.ID || out.Jobs[0].Archived {
			t.Fatalf("GET /v1/jobs after archiving: %+v; want the live job only", out.Jobs)
		}
		h.must(http.StatusOK, "GET", "/v1/jobs?archived=true&state=cancelled", nil, &out)
		if len(out.Jobs) != 1 || out.Jobs[0].ID != old.ID || !out.Jobs[0].Archived || out.Jobs[0].State != core.StateCancelled {
			t.Fatalf("GET /v1/jobs?archived=true: %+v; want the archived job, marked archived", out.Jobs)
		}
		h.must(http.StatusOK, "GET", "/v1/jobs?archived=false", nil, &out)
		if len(out.Jobs) != 1 || out.Jobs[0].ID != live.ID {
			t.Fatalf("GET /v1/jobs?archived=false: %+v; want the live job", out.Jobs)
		}
		if j := h.get(old.ID); j.ID != old.ID || !j.Archived || j.State != core.StateCancelled {
			t.Fatalf("GET /v1/jobs/%d of an archived job: %+v; want it from the archive, archived true", old.ID, j)
		}
		if j := h.get(live.ID); j.Archived {
			t.Fatalf("GET /v1/jobs/%d of a live job is marked archived", live.ID)
		}
		wantProblem(t, h.do("GET", "/v1/jobs/"+itoa(old.ID+100), nil), SlugJobNotFound)
		for _, q := range []string{"archived=yes", "archived=true&archived=true"} {
			wantProblem(t, h.do("GET", "/v1/jobs?"+q, nil), SlugInvalidRequest)
		}
	})
	type plain struct{ contract.Store }
	h := newHarness(t, plain{memory.New()}, core.Config{}, Config{})
	wantProblem(t, h.do("GET", "/v1/jobs?archived=true", nil), SlugNotSupported)
}
