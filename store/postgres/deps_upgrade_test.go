package postgres

import (
	"context"
	"testing"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/internal/upgradetest"
)

// TestMigrateUpgradeDependencies runs upgradetest.RunFrom from the schema
// below version 17: the jobs written before the upgrade read back
// unchanged and are claimed, and a job inserted after it may depend on
// them: it waits for the one running since before the upgrade, counts the
// completed one as settled, and is released when the running one
// completes (its settle trigger, turned on by the dependant's insert).
func TestMigrateUpgradeDependencies(t *testing.T) {
	b := upgradeBackend(t)
	s := b.Store.(*Store)
	upgradetest.RunFrom(t, b, 17, func(t *testing.T) {
		ctx := context.Background()
		js, err := s.List(ctx, contract.ListParams{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		var claimed, done *contract.Job
		for _, j := range js {
			switch {
			case j.State == contract.StateRunning && j.WorkerID == "upgrade-w":
				claimed = j
			case j.State == contract.StateCompleted:
				done = j
			}
		}
		if claimed == nil || done == nil {
			t.Fatalf("after the upgrade: %d jobs, none claimed by upgrade-w or none completed", len(js))
		}
		now := claimed.AttemptedAt
		p := depJob("after-upgrade")
		p.RunAt = now
		p.DependsOn = []int64{claimed.ID, done.ID}
		res, err := s.Insert(ctx, now, []contract.InsertParams{p})
		if err != nil {
			t.Fatal(err)
		}
		j := res[0].Job
		if j.State != contract.StateWaiting || j.WaitingFor != 1 || j.DependencyEnds != (contract.DependencyEnds{Completed: 1}) {
			t.Fatalf("a job depending on jobs from before the upgrade: state %s waiting for %d, ends %+v; want waiting for 1, one completed",
				j.State, j.WaitingFor, j.DependencyEnds)
		}
		fr, err := s.Finish(ctx, []contract.Outcome{{JobID: claimed.ID, WorkerID: claimed.WorkerID, ClaimSeq: claimed.ClaimSeq, Attempt: claimed.Attempt,
			Kind: contract.OutcomeComplete, At: now}})
		if err != nil || !fr[0].Applied {
			t.Fatalf("finish of job %d: %v %+v", claimed.ID, err, fr)
		}
		if got, err := s.Get(ctx, j.ID); err != nil || got.State != contract.StateAvailable || got.DependencyEnds != (contract.DependencyEnds{Completed: 2}) {
			t.Fatalf("the dependant after its last dependency completed: %+v, %v; want available with two completed", got, err)
		}
	})
}
