package sqlite

import (
	"context"
	"testing"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/internal/upgradetest"
)

// TestMigrateUpgradeDependencies runs upgradetest.RunFrom from the schema
// below version 15 (job dependencies): jobs written before the upgrade
// read back with no dependencies, and a job inserted after it may depend
// on them: the completed one is settled at insert, and the one running
// across the upgrade releases it when it completes (the triggers on a row
// from before the upgrade, marked by the insert).
func TestMigrateUpgradeDependencies(t *testing.T) {
	b := upgradeBackend(t)
	s := b.Store.(*Store)
	upgradetest.RunFrom(t, b, 15, func(t *testing.T) {
		ctx := context.Background()
		old, err := s.List(ctx, contract.ListParams{Queue: "upgrade", Limit: 10})
		if err != nil || len(old) != 3 {
			t.Fatalf("list of the jobs from before the upgrade: %d jobs, %v", len(old), err)
		}
		var running, completed *contract.Job
		for _, j := range old {
			if j.DependsOn != nil || j.WaitingFor != 0 || j.WorkflowID != 0 || j.Step != "" || j.OnDependencyFailure != "" || j.DependencyEnds != (contract.DependencyEnds{}) {
				t.Fatalf("job %d from before the upgrade has dependency fields %v %d %d %q %q %+v; want none", j.ID, j.DependsOn, j.WaitingFor, j.WorkflowID, j.Step, j.OnDependencyFailure, j.DependencyEnds)
			}
			switch j.State {
			case contract.StateRunning:
				running = j
			case contract.StateCompleted:
				completed = j
			}
		}
		if running == nil || completed == nil {
			t.Fatal("no running or no completed job from before the upgrade")
		}
		p := job("after", "k")
		p.DependsOn = []int64{running.ID, completed.ID}
		res, err := s.Insert(ctx, t0, []contract.InsertParams{p})
		if err != nil {
			t.Fatal(err)
		}
		if j := res[0].Job; j.State != contract.StateWaiting || j.WaitingFor != 1 || j.DependencyEnds != (contract.DependencyEnds{Completed: 1}) {
			t.Fatalf("a job depending on the running and the completed job from before the upgrade: %s waiting for %d, ends %+v; want waiting for 1 with 1 completed", j.State, j.WaitingFor, j.DependencyEnds)
		}
		fin, err := s.Finish(ctx, []contract.Outcome{{JobID: running.ID, WorkerID: running.WorkerID, ClaimSeq: running.ClaimSeq, Attempt: running.Attempt,
			Kind: contract.OutcomeComplete, At: t0}})
		if err != nil || !fin[0].Applied {
			t.Fatalf("completion of job %d, running since before the upgrade: %+v, %v", running.ID, fin, err)
		}
		if j, err := s.Get(ctx, res[0].Job.ID); err != nil || j.State != contract.StateAvailable || j.DependencyEnds != (contract.DependencyEnds{Completed: 2}) {
			t.Fatalf("the dependant after the completion: %+v, %v; want available with 2 completed", j, err)
		}
	})
}
