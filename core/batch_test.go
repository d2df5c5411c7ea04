package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/internal/teststores"
)

type batchItem struct {
	N int `json:"n"`
}

func (batchItem) Kind() string { return "batch_item" }

type batchDone struct{}

func (batchDone) Kind() string { return "batch_done" }

type batchOK struct{}

func (batchOK) Kind() string { return "batch_ok" }

// A batch of ten jobs, one of which fails for good: OnFinish runs once,
// after the last, with the counts of how they ended and the batch's
// metadata; OnSuccess is cancelled; WorkflowStatus counts the batch.
func TestBatchCallbacks(t *testing.T) {
	teststores.Run(t, func(t *testing.T, st contract.Store) {
		if _, ok := st.(contract.Dependencies); !ok {
			t.Skip("the store does not implement contract.Dependencies")
		}
		var mu sync.Mutex
		var finished []*core.Job
		h := core.NewHandlers()
		core.Handle(h, func(ctx context.Context, j *core.TypedJob[batchItem]) error {
			if j.Args.N == 7 {
				return core.Permanent(errors.New("seven fails"))
			}
			return nil
		})
		core.Handle(h, func(ctx context.Context, j *core.TypedJob[batchDone]) error {
			mu.Lock()
			finished = append(finished, j.Job)
			mu.Unlock()
			return nil
		})
		core.Handle(h, func(ctx context.Context, j *core.TypedJob[batchOK]) error { return nil })
		c, err := core.NewClient(st, core.Config{
			Queues:              map[string]core.QueueConfig{core.DefaultQueue: {MaxWorkers: 4}},
			Handlers:            h,
			Logger:              quietLogger(),
			PollInterval:        50 * time.Millisecond,
			MaintenanceInterval: -1,
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		b := &core.Batch{Metadata: map[string]string{"import": "2026-11"}}
		for i := range 10 {
			b.Add(batchItem{N: i}, nil)
		}
		b.OnFinish(batchDone{}, nil).OnSuccess(batchOK{}, nil)
		res, err := c.EnqueueBatch(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		if res.ID != res.Jobs[0].ID || len(res.Jobs) != 10 || res.OnFinish == nil || res.OnSuccess == nil {
			t.Fatalf("EnqueueBatch = id %d, %d jobs, callbacks %v %v", res.ID, len(res.Jobs), res.OnFinish != nil, res.OnSuccess != nil)
		}
		if res.OnFinish.State != core.StateWaiting || res.OnFinish.WaitingFor != 10 || res.OnFinish.WorkflowID != res.ID || res.OnFinish.Metadata["import"] != "2026-11" {
			t.Fatalf("OnFinish inserted as %+v", res.OnFinish)
		}
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Stop(ctx) }()
		done := waitState(t, st, res.OnFinish.ID, core.StateCompleted)
		if want := (core.DependencyEnds{Completed: 9, Discarded: 1}); done.DependencyEnds != want {
			t.Fatalf("OnFinish ran with DependencyEnds %+v; want %+v", done.DependencyEnds, want)
		}
		ok := waitState(t, st, res.OnSuccess.ID, core.StateCancelled)
		if len(ok.Errors) == 0 || ok.Errors[len(ok.Errors)-1].Cause != contract.CauseDependency {
			t.Fatalf("OnSuccess cancelled with errors %+v; want a dependency_failed entry", ok.Errors)
		}
		mu.Lock()
		if len(finished) != 1 || finished[0].DependencyEnds.Total() != 10 {
			t.Fatalf("OnFinish's handler ran %d times (%+v); want once with 10 ends", len(finished), finished)
		}
		mu.Unlock()
		status, err := c.WorkflowStatus(ctx, res.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !status.Batch || !status.Done || status.Jobs != 12 || status.Counts[core.StateCompleted] != 10 ||
			status.Counts[core.StateDiscarded] != 1 || status.Counts[core.StateCancelled] != 1 || status.FinishedAt.IsZero() {
			t.Fatalf("WorkflowStatus = %+v", status)
		}
		if _, err := c.WorkflowStatus(ctx, res.ID+1000); !errors.Is(err, core.ErrNotFound) {
			t.Fatalf("WorkflowStatus of an unknown id: %v; want ErrNotFound", err)
		}
	})
}

// CancelWorkflow cancels a batch whole: its jobs and both callbacks end
// cancelled, the OnFinish callback is not released to run.
func TestCancelWorkflow(t *testing.T) {
	teststores.Run(t, func(t *testing.T, st contract.Store) {
		if _, ok := st.(contract.Dependencies); !ok {
			t.Skip("the store does not implement contract.Dependencies")
		}
		c, err := core.NewClient(st, core.Config{Logger: quietLogger(), MaintenanceInterval: -1, AllowUnknownKinds: true})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		b := &core.Batch{}
		for i := range 5 {
			b.AddRaw("item", json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)), nil)
		}
		b.OnFinishRaw("done", nil, nil)
		res, err := c.EnqueueBatch(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		r, err := c.CancelWorkflow(ctx, res.ID)
		if err != nil {
			t.Fatal(err)
		}
		if r.Applied != 6 {
			t.Fatalf("CancelWorkflow = %+v; want 6 jobs cancelled", r)
		}
		status, err := c.WorkflowStatus(ctx, res.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !status.Done || status.Counts[core.StateCancelled] != 6 {
			t.Fatalf("after CancelWorkflow: %+v", status)
		}
	})
}
