package core_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/internal/teststores"
)

type stepArgs struct {
	Name string `json:"name"`
}

func (stepArgs) Kind() string { return "step" }

// A diamond workflow (extract → transform, enrich → load) runs each step
// after the steps it names, released by their finishes; every step
// carries the workflow's id.
func TestWorkflowRunsStepsInDependencyOrder(t *testing.T) {
	var mu sync.Mutex
	var ran []string
	h := core.NewHandlers()
	core.Handle(h, func(ctx context.Context, j *core.TypedJob[stepArgs]) error {
		mu.Lock()
		ran = append(ran, j.Args.Name)
		mu.Unlock()
		return nil
	})
	c, st := newClient(t, h, nil)
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var w core.Workflow
	w.Add("load", stepArgs{"load"}, nil, "transform", "enrich").
		Add("transform", stepArgs{"transform"}, nil, "extract").
		Add("enrich", stepArgs{"enrich"}, nil, "extract").
		Add("extract", stepArgs{"extract"}, nil)
	res, err := c.EnqueueWorkflow(ctx, &w)
	if err != nil {
		t.Fatal(err)
	}
	if res.ID == 0 || len(res.Steps) != 4 || res.Steps["load"].State != core.StateWaiting || res.Steps["load"].WaitingFor != 2 {
		t.Fatalf("EnqueueWorkflow = %+v, load %+v", res, res.Steps["load"])
	}
	for name, j := range res.Steps {
		if j.WorkflowID != res.ID || j.Step != name {
			t.Fatalf("step %q: workflow %d step %q; want %d", name, j.WorkflowID, j.Step, res.ID)
		}
	}
	waitState(t, st, res.Steps["load"].ID, core.StateCompleted)
	mu.Lock()
	defer mu.Unlock()
	if len(ran) != 4 || ran[0] != "extract" || ran[3] != "load" || !slices.Contains(ran[1:3], "transform") || !slices.Contains(ran[1:3], "enrich") {
		t.Fatalf("steps ran in order %v; want extract, then transform and enrich, then load", ran)
	}
}

// A step that fails for good cancels the steps after it; one marked
// DependencyRun runs all the same.
func TestWorkflowFailedStepCancelsTheRest(t *testing.T) {
	h := core.NewHandlers()
	core.Handle(h, func(ctx context.Context, j *core.TypedJob[stepArgs]) error {
		if j.Args.Name == "fetch" {
			return core.Permanent(errors.New("the source is gone"))
		}
		return nil
	})
	c, st := newClient(t, h, nil)
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var w core.Workflow
	w.Add("fetch", stepArgs{"fetch"}, nil).
		Add("parse", stepArgs{"parse"}, nil, "fetch").
		Add("store", stepArgs{"store"}, nil, "parse").
		Add("report", stepArgs{"report"}, &core.Options{OnDependencyFailure: core.DependencyRun}, "fetch")
	res, err := c.EnqueueWorkflow(ctx, &w)
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, st, res.Steps["report"].ID, core.StateCompleted)
	for _, name := range []string{"parse", "store"} {
		j := waitState(t, st, res.Steps[name].ID, core.StateCancelled)
		if len(j.Errors) == 0 || j.Errors[len(j.Errors)-1].Cause != "dependency_failed" {
			t.Fatalf("step %q: %+v; want cancelled for a failed dependency", name, j)
		}
	}
}

// Workflows are refused whole when malformed, and on a store without
// dependencies.
func TestWorkflowRefusals(t *testing.T) {
	c, _ := newClient(t, core.NewHandlers(), func(cfg *core.Config) { cfg.AllowUnknownKinds = true })
	ctx := context.Background()
	for name, w := range map[string]*core.Workflow{
		"empty":        {},
		"unknown step": new(core.Workflow).Add("a", stepArgs{}, nil, "nope"),
		"cycle":        new(core.Workflow).Add("a", stepArgs{}, nil, "c").Add("b", stepArgs{}, nil, "a").Add("c", stepArgs{}, nil, "b"),
		"self":         new(core.Workflow).Add("a", stepArgs{}, nil, "a"),
		"twice":        new(core.Workflow).Add("a", stepArgs{}, nil).Add("a", stepArgs{}, nil),
		"unnamed":      new(core.Workflow).Add("", stepArgs{}, nil),
		"bad policy":   new(core.Workflow).Add("a", stepArgs{}, &core.Options{OnDependencyFailure: "maybe"}),
	} {
		if _, err := c.EnqueueWorkflow(ctx, w); !errors.Is(err, core.ErrInvalidJob) {
			t.Errorf("%s: %v; want an error wrapping ErrInvalidJob", name, err)
		}
	}
	if _, err := c.EnqueueRaw(ctx, "k", nil, &core.Options{DependsOn: []int64{0}}); !errors.Is(err, core.ErrInvalidJob) {
		t.Errorf("DependsOn 0: %v; want ErrInvalidJob", err)
	}
	// A store without contract.Dependencies: SQLite's, its optional
	// capabilities hidden.
	sq, err := core.NewClient(struct{ contract.Store }{teststores.SQLite(t)}, core.Config{Logger: quietLogger(), MaintenanceInterval: -1, AllowUnknownKinds: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sq.EnqueueWorkflow(ctx, new(core.Workflow).Add("a", stepArgs{}, nil)); !errors.Is(err, core.ErrUnsupported) {
		t.Errorf("a workflow on a store without dependencies: %v; want ErrUnsupported", err)
	}
	if _, err := sq.EnqueueRaw(ctx, "k", nil, &core.Options{DependsOn: []int64{1}}); !errors.Is(err, core.ErrUnsupported) {
		t.Errorf("DependsOn on a store without dependencies: %v; want ErrUnsupported", err)
	}
}
