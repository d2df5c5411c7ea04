package mysql

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/internal/upgradetest"
)

// TestMigrateUpgradeDependencies runs upgradetest.RunFrom from the schema
// below version 15 (dependencies): jobs written before the upgrade read
// back unchanged, with no dependencies, and new jobs depend on them: one
// on the completed job is due at once, counting its end; one on the job
// running since before the upgrade waits, and is released when that job
// finishes under its old claim.
func TestMigrateUpgradeDependencies(t *testing.T) {
	b := upgradeBackend(t)
	s := b.Store.(*Store)
	upgradetest.RunFrom(t, b, 15, func(t *testing.T) {
		ctx := context.Background()
		old, err := s.List(ctx, contract.ListParams{Queue: "upgrade", Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		var running, completed *contract.Job
		for _, j := range old {
			if j.WorkflowID != 0 || j.Step != "" || j.DependsOn != nil || j.WaitingFor != 0 || j.DependencyEnds.Total() != 0 || j.OnDependencyFailure != "" {
				t.Fatalf("job %d from before the upgrade reads back with dependency fields %+v", j.ID, j)
			}
			switch {
			case j.State == contract.StateCompleted:
				completed = j
			case j.State == contract.StateRunning && j.WorkerID == "w-old-1":
				running = j
			}
		}
		if running == nil || completed == nil {
			t.Fatalf("the running and completed jobs from before the upgrade are not in queue upgrade: %d jobs", len(old))
		}
		now := running.RunAt.Add(time.Minute)
		p := func(step string, ids ...int64) contract.InsertParams {
			return contract.InsertParams{Queue: "after", Kind: "k", Args: []byte("{}"), MaxAttempts: 1, RunAt: now, DependsOn: ids, Step: step}
		}
		second := p("second")
		second.DependsOnIndex = []int{1}
		got, err := s.Insert(ctx, now, []contract.InsertParams{p("", completed.ID), p("first", running.ID), second})
		if err != nil {
			t.Fatal(err)
		}
		if j := got[0].Job; j.State != contract.StateAvailable || j.DependencyEnds.Completed != 1 || !slices.Equal(j.DependsOn, []int64{completed.ID}) {
			t.Fatalf("a job depending on the completed job from before the upgrade: state %s ends %+v depends on %v; want available, 1 completed", j.State, j.DependencyEnds, j.DependsOn)
		}
		for _, r := range got[1:] {
			if j, err := s.Get(ctx, r.Job.ID); err != nil || j.State != contract.StateWaiting || j.WaitingFor != 1 || j.WorkflowID != got[1].Job.ID {
				t.Fatalf("job %d read back: %+v, %v; want waiting for 1 in workflow %d", r.Job.ID, j, err, got[1].Job.ID)
			}
		}
		res, err := s.Finish(ctx, []contract.Outcome{{JobID: running.ID, WorkerID: running.WorkerID, ClaimSeq: running.ClaimSeq, Attempt: running.Attempt,
			Kind: contract.OutcomeComplete, At: now}})
		if err != nil || !res[0].Applied {
			t.Fatalf("finish of job %d, running since before the upgrade: %+v, %v", running.ID, res, err)
		}
		if j, err := s.Get(ctx, got[1].Job.ID); err != nil || j.State != contract.StateAvailable || j.DependencyEnds.Completed != 1 {
			t.Fatalf("the job depending on it after it completed: %+v, %v; want available, 1 completed", j, err)
		}
		if j, err := s.Get(ctx, got[2].Job.ID); err != nil || j.State != contract.StateWaiting || j.WaitingFor != 1 {
			t.Fatalf("the job after that one: %+v, %v; want still waiting for 1", j, err)
		}
	})
}

// TestMigrateUpgradeDependencyEdges runs upgradetest.RunDependencyEdges
// from the schema below version 16: the edges of jobs already gone are
// forgotten, the others kept.
func TestMigrateUpgradeDependencyEdges(t *testing.T) {
	upgradetest.RunDependencyEdges(t, upgradeBackend(t), 16)
}
