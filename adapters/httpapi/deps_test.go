package httpapi

import (
	"context"
	"net/http"
	"slices"
	"testing"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/store/memory"
)

// A workflow's waiting step reads back over HTTP with its state, the
// workflow's id, its step name, its dependencies and how many it waits
// for (the answer checked against openapi.json), and lists by state
// waiting.
func TestWaitingJobOverHTTP(t *testing.T) {
	h := newHarness(t, memory.New(), core.Config{AllowUnknownKinds: true}, Config{})
	var w core.Workflow
	w.AddRaw("a", "k", nil, nil).AddRaw("b", "k", nil, &core.Options{OnDependencyFailure: core.DependencyRun}, "a")
	res, err := h.c.EnqueueWorkflow(context.Background(), &w)
	if err != nil {
		t.Fatal(err)
	}
	a, b := res.Steps["a"], res.Steps["b"]
	j := h.get(b.ID)
	if j.State != core.StateWaiting || j.WorkflowID != a.ID || j.Step != "b" || !slices.Equal(j.DependsOn, []int64{a.ID}) ||
		j.WaitingFor != 1 || j.OnDependencyFailure != core.DependencyRun {
		t.Fatalf("GET /v1/jobs/%d = %+v", b.ID, j)
	}
	var list ListResponse
	h.must(http.StatusOK, "GET", "/v1/jobs?state=waiting", nil, &list)
	if len(list.Jobs) != 1 || list.Jobs[0].ID != b.ID {
		t.Fatalf("GET /v1/jobs?state=waiting = %+v", list.Jobs)
	}
}
