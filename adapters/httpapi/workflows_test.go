package httpapi

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/memory"
)

// A workflow submitted over HTTP inserts its steps waiting for the steps
// they run after, reads back with its status and steps, lists among the
// workflows (not the batches), filters GET /v1/jobs by workflow_id and
// cancels whole; every answer is checked against openapi.json.
func TestWorkflowOverHTTP(t *testing.T) {
	h := newHarness(t, memory.New(), core.Config{AllowUnknownKinds: true}, Config{})
	body := map[string]any{"steps": []map[string]any{
		{"name": "load", "kind": "k", "after": []string{"extract", "transform"}, "on_dependency_failure": "run"},
		{"name": "extract", "kind": "k", "args": map[string]any{"n": 1}, "queue": "etl", "priority": 2},
		{"name": "transform", "kind": "k", "after": []string{"extract"}, "metadata": map[string]string{"m": "v"}},
	}}
	var res WorkflowResponse
	h.must(http.StatusCreated, "POST", "/v1/workflows", body, &res)
	ex, tr, lo := res.Steps["extract"], res.Steps["transform"], res.Steps["load"]
	if ex == nil || tr == nil || lo == nil || res.ID != ex.ID {
		t.Fatalf("POST /v1/workflows = %+v", res)
	}
	if ex.State != core.StateAvailable || ex.Queue != "etl" || ex.Priority != 2 || tr.State != core.StateWaiting ||
		!slices.Equal(tr.DependsOn, []int64{ex.ID}) || tr.Metadata["m"] != "v" ||
		lo.WaitingFor != 2 || lo.OnDependencyFailure != core.DependencyRun || lo.WorkflowID != res.ID {
		t.Fatalf("steps: extract %+v transform %+v load %+v", ex, tr, lo)
	}

	var d WorkflowDetail
	h.must(http.StatusOK, "GET", "/v1/workflows/"+itoa(res.ID), nil, &d)
	if d.ID != res.ID || d.Batch || d.Jobs != 3 || d.Done || d.Counts[core.StateWaiting] != 2 || len(d.Steps) != 3 ||
		d.Steps[0].Name != "extract" || d.Steps[2].Name != "load" || d.Steps[2].WaitingFor != 2 || len(d.Callbacks) != 0 {
		t.Fatalf("GET /v1/workflows/%d = %+v", res.ID, d)
	}
	wantProblem(t, h.do("GET", "/v1/batches/"+itoa(res.ID), nil), SlugWorkflowNotFound)
	wantProblem(t, h.do("GET", "/v1/workflows/"+itoa(tr.ID), nil), SlugWorkflowNotFound)
	wantProblem(t, h.do("GET", "/v1/workflows/999", nil), SlugWorkflowNotFound)
	wantProblem(t, h.do("GET", "/v1/workflows/x", nil), SlugInvalidRequest)

	var list ListResponse
	h.must(http.StatusOK, "GET", "/v1/jobs?workflow_id="+itoa(res.ID)+"&state=waiting", nil, &list)
	if len(list.Jobs) != 2 || list.Jobs[0].ID != tr.ID {
		t.Fatalf("GET /v1/jobs?workflow_id= = %+v", list.Jobs)
	}
	wantProblem(t, h.do("GET", "/v1/jobs?workflow_id=0", nil), SlugInvalidRequest)

	var cancel BulkResponse
	h.must(http.StatusOK, "POST", "/v1/workflows/"+itoa(res.ID)+"/cancel", nil, &cancel)
	if cancel.Applied != 3 || len(cancel.IDs) != 3 {
		t.Fatalf("cancel = %+v", cancel)
	}
	h.must(http.StatusOK, "GET", "/v1/workflows/"+itoa(res.ID), nil, &d)
	if !d.Done || d.Counts[core.StateCancelled] != 3 || d.FinishedAt.IsZero() {
		t.Fatalf("after cancel: %+v", d)
	}
	wantProblem(t, h.do("POST", "/v1/batches/"+itoa(res.ID)+"/cancel", nil), SlugWorkflowNotFound)
	wantProblem(t, h.do("POST", "/v1/workflows/999/cancel", nil), SlugWorkflowNotFound)
}

// The engine's refusals of a workflow's shape are 400 with its message; a
// step refused as POST /v1/jobs refuses a job is 422 naming the step.
func TestWorkflowRefused(t *testing.T) {
	h := newHarness(t, memory.New(), core.Config{AllowUnknownKinds: true}, Config{})
	for _, c := range []struct {
		name  string
		steps []map[string]any
		slug  string
		want  string
	}{
		{"cycle", []map[string]any{{"name": "a", "kind": "k", "after": []string{"b"}}, {"name": "b", "kind": "k", "after": []string{"a"}}}, SlugInvalidRequest, "cycle"},
		{"unknown", []map[string]any{{"name": "a", "kind": "k", "after": []string{"nope"}}}, SlugInvalidRequest, `"nope"`},
		{"duplicate", []map[string]any{{"name": "a", "kind": "k"}, {"name": "a", "kind": "k"}}, SlugInvalidRequest, "twice"},
		{"unnamed", []map[string]any{{"kind": "k"}}, SlugInvalidRequest, "name"},
		{"empty", []map[string]any{}, SlugInvalidRequest, "steps must hold"},
		{"priority", []map[string]any{{"name": "a", "kind": "k"}, {"name": "b", "kind": "k", "priority": 11}}, SlugInvalidJob, "steps[1]: priority"},
		{"policy", []map[string]any{{"name": "a", "kind": "k", "on_dependency_failure": "maybe"}}, SlugInvalidJob, "on_dependency_failure"},
		{"dependency", []map[string]any{{"name": "a", "kind": "k", "depends_on": []int64{0}}}, SlugInvalidJob, "depends_on"},
		{"missing dependency", []map[string]any{{"name": "a", "kind": "k", "depends_on": []int64{999}}}, SlugInvalidJob, "does not exist"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := h.do("POST", "/v1/workflows", map[string]any{"steps": c.steps})
			if c.name == "unnamed" || c.name == "policy" || c.name == "dependency" {
				// The document refuses some bodies itself; the server
				// must refuse them with a 4xx (checked by the harness).
				if r.status < 400 || r.status >= 500 {
					t.Fatalf("status %d: %s", r.status, r.body)
				}
				return
			}
			p := wantProblem(t, r, c.slug)
			if !strings.Contains(p.Detail, c.want) {
				t.Fatalf("detail %q, want it to contain %q", p.Detail, c.want)
			}
		})
	}
	if n := len(h.snapshot()); n != 0 {
		t.Fatalf("%d jobs inserted by refused workflows", n)
	}
	r := h.send(req{method: "POST", path: "/v1/workflows", body: map[string]any{"steps": []map[string]any{{"name": "a", "kind": "k"}}},
		header: map[string]string{"Idempotency-Key": "k1"}})
	wantProblem(t, r, SlugInvalidRequest)
}

// A batch submitted over HTTP has its jobs and callbacks, reads back with
// its status and callbacks (not its jobs), lists among the batches, and
// its on_success callback runs with the counts of how the batch went.
func TestBatchOverHTTP(t *testing.T) {
	h := newHarness(t, memory.New(), core.Config{AllowUnknownKinds: true}, Config{})
	body := map[string]any{
		"jobs":       []map[string]any{{"kind": "part", "args": map[string]any{"i": 0}}, {"kind": "part", "args": map[string]any{"i": 1}}},
		"on_finish":  map[string]any{"kind": "done"},
		"on_success": nil,
		"metadata":   map[string]string{"batch": "b1"},
	}
	var res BatchCreateResponse
	h.must(http.StatusCreated, "POST", "/v1/batches", body, &res)
	if len(res.Jobs) != 2 || res.OnFinish == nil || res.OnSuccess != nil || res.ID != res.Jobs[0].ID ||
		res.OnFinish.Step != core.BatchOnFinishStep || res.OnFinish.State != core.StateWaiting || res.OnFinish.Metadata["batch"] != "b1" {
		t.Fatalf("POST /v1/batches = %+v", res)
	}
	var d WorkflowDetail
	h.must(http.StatusOK, "GET", "/v1/batches/"+itoa(res.ID), nil, &d)
	if !d.Batch || d.Jobs != 3 || len(d.Steps) != 0 || len(d.Callbacks) != 1 || d.Callbacks[0].ID != res.OnFinish.ID {
		t.Fatalf("GET /v1/batches/%d = %+v", res.ID, d)
	}
	wantProblem(t, h.do("GET", "/v1/workflows/"+itoa(res.ID), nil), SlugWorkflowNotFound)

	// A workflow beside it: each list holds its own sort.
	var wf WorkflowResponse
	h.must(http.StatusCreated, "POST", "/v1/workflows", map[string]any{"steps": []map[string]any{{"name": "a", "kind": "k"}}}, &wf)
	var batches, workflows WorkflowListResponse
	h.must(http.StatusOK, "GET", "/v1/batches", nil, &batches)
	h.must(http.StatusOK, "GET", "/v1/workflows", nil, &workflows)
	if len(batches.Workflows) != 1 || batches.Workflows[0].ID != res.ID || !batches.Workflows[0].Batch ||
		len(workflows.Workflows) != 1 || workflows.Workflows[0].ID != wf.ID || batches.NextAfter != nil {
		t.Fatalf("GET /v1/batches = %+v, GET /v1/workflows = %+v", batches, workflows)
	}

	// Finishing the batch's jobs releases the callback with the counts.
	w := h.register("w1", map[string]any{"queues": []string{"default"}})
	_ = w
	for _, j := range h.claim("w1", map[string]any{"limit": 10}) {
		h.must(http.StatusOK, "POST", "/v1/jobs/"+itoa(j.ID)+"/complete", map[string]any{"lease_token": j.LeaseToken}, nil)
	}
	cb := h.get(res.OnFinish.ID)
	if cb.State != core.StateAvailable || cb.DependencyEnds != (core.DependencyEnds{Completed: 2}) {
		t.Fatalf("callback after the batch: %+v", cb)
	}
	var cancel BulkResponse
	h.must(http.StatusOK, "POST", "/v1/batches/"+itoa(res.ID)+"/cancel", nil, &cancel)
	if cancel.Applied != 1 || !slices.Equal(cancel.IDs, []int64{res.OnFinish.ID}) {
		t.Fatalf("cancel = %+v", cancel)
	}
	wantProblem(t, h.do("POST", "/v1/batches", map[string]any{"jobs": []map[string]any{}}), SlugInvalidRequest)
	wantProblem(t, h.do("POST", "/v1/batches", map[string]any{"jobs": []map[string]any{{"kind": "k"}}, "on_success": map[string]any{"kind": "k", "priority": 0}}), SlugInvalidJob)
}

// Pages of workflows come newest first, limit at a time, with a cursor.
func TestWorkflowListPages(t *testing.T) {
	h := newHarness(t, memory.New(), core.Config{AllowUnknownKinds: true}, Config{})
	var ids []int64
	for range 5 {
		var wf WorkflowResponse
		h.must(http.StatusCreated, "POST", "/v1/workflows", map[string]any{"steps": []map[string]any{{"name": "a", "kind": "k"}, {"name": "b", "kind": "k", "after": []string{"a"}}}}, &wf)
		ids = append(ids, wf.ID)
		h.must(http.StatusCreated, "POST", "/v1/batches", map[string]any{"jobs": []map[string]any{{"kind": "k"}}}, nil)
	}
	var got []int64
	after := ""
	for range 5 {
		var page WorkflowListResponse
		h.must(http.StatusOK, "GET", "/v1/workflows?limit=2"+after, nil, &page)
		for _, st := range page.Workflows {
			got = append(got, st.ID)
			if st.Jobs != 2 || st.Batch {
				t.Fatalf("item %+v", st)
			}
		}
		if page.NextAfter == nil {
			break
		}
		after = "&after=" + itoa(*page.NextAfter)
	}
	slices.Reverse(ids)
	if !slices.Equal(got, ids) {
		t.Fatalf("pages gave %v, want %v", got, ids)
	}
	wantProblem(t, h.do("GET", "/v1/workflows?limit=101", nil), SlugInvalidRequest)
}

// noDeps hides the memory store's optional interfaces, contract.Dependencies
// among them.
type noDeps struct{ contract.Store }

// On a store without dependencies every route answers 501 not-supported.
func TestWorkflowsUnsupported(t *testing.T) {
	h := newHarness(t, noDeps{memory.New()}, core.Config{AllowUnknownKinds: true}, Config{})
	wantProblem(t, h.do("POST", "/v1/workflows", map[string]any{"steps": []map[string]any{{"name": "a", "kind": "k"}}}), SlugNotSupported)
	wantProblem(t, h.do("POST", "/v1/batches", map[string]any{"jobs": []map[string]any{{"kind": "k"}}}), SlugNotSupported)
	wantProblem(t, h.do("GET", "/v1/workflows", nil), SlugNotSupported)
	wantProblem(t, h.do("GET", "/v1/batches/1", nil), SlugNotSupported)
	wantProblem(t, h.do("POST", "/v1/workflows/1/cancel", nil), SlugNotSupported)
	wantProblem(t, h.do("GET", "/v1/jobs?workflow_id=1", nil), SlugNotSupported)
}

// A producer may not set reserved metadata keys on a step, a batch's job
// or, through the batch's metadata, its callbacks; the admin may.
func TestWorkflowReservedMetadata(t *testing.T) {
	h := newHarness(t, memory.New(), core.Config{AllowUnknownKinds: true}, Config{Tokens: Tokens{Producer: "p", Admin: "a"}})
	producer, admin := "p", "a"
	for _, c := range []struct {
		path string
		body map[string]any
	}{
		{"/v1/workflows", map[string]any{"steps": []map[string]any{{"name": "a", "kind": "k", "metadata": map[string]string{"backlog.periodic": "x"}}}}},
		{"/v1/batches", map[string]any{"jobs": []map[string]any{{"kind": "k", "metadata": map[string]string{"backlog.periodic": "x"}}}}},
		{"/v1/batches", map[string]any{"jobs": []map[string]any{{"kind": "k"}}, "on_finish": map[string]any{"kind": "k"}, "metadata": map[string]string{"backlog.periodic": "x"}}},
	} {
		p := wantProblem(t, h.send(req{method: "POST", path: c.path, body: c.body, token: &producer}), SlugInvalidRequest)
		if !strings.Contains(p.Detail, "reserved") {
			t.Fatalf("POST %s: %s", c.path, p.Detail)
		}
		if r := h.send(req{method: "POST", path: c.path, body: c.body, token: &admin}); r.status != http.StatusCreated {
			t.Fatalf("POST %s with the admin token: %d %s", c.path, r.status, r.body)
		}
	}
	// Cancel needs the admin token.
	wantProblem(t, h.send(req{method: "POST", path: "/v1/workflows/1/cancel", token: &producer}), SlugForbidden)
}

// A workflow whose first step was deleted still reads and cancels by its
// id, as core.WorkflowStatus finds it.
func TestWorkflowFirstStepGone(t *testing.T) {
	h := newHarness(t, memory.New(), core.Config{AllowUnknownKinds: true}, Config{})
	var res WorkflowResponse
	h.must(http.StatusCreated, "POST", "/v1/workflows", map[string]any{"steps": []map[string]any{
		{"name": "a", "kind": "k"}, {"name": "b", "kind": "k", "after": []string{"a"}, "on_dependency_failure": "run"}, {"name": "c", "kind": "k", "run_at": "2099-01-01T00:00:00Z"}}}, &res)
	h.must(http.StatusNoContent, "DELETE", "/v1/jobs/"+itoa(res.ID), nil, nil)
	var d WorkflowDetail
	h.must(http.StatusOK, "GET", "/v1/workflows/"+itoa(res.ID), nil, &d)
	if d.Jobs != 2 || len(d.Steps) != 2 {
		t.Fatalf("GET after the first step's delete = %+v", d)
	}
	var cancel BulkResponse
	h.must(http.StatusOK, "POST", "/v1/workflows/"+itoa(res.ID)+"/cancel", nil, &cancel)
	if cancel.Applied != 2 {
		t.Fatalf("cancel = %+v", cancel)
	}
}
