package upgradetest

import (
	"context"
	"testing"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

// RunClaimPolicy migrates b's store to the version before version (the
// migration that adds rate limits, fair claims and priority aging),
// writes there with raw SQL a pending, a running and a completed job and
// pauses queue "paused-before", runs Migrate, and checks that the rows
// read back unchanged, the pause is kept, no queue has a policy, a rate
// limit set afterwards lets exactly its burst through (the job running
// across the upgrade does not count: rates count starts), a fair queue
// still claims jobs without a partition key, and Migrate is then a no-op.
func RunClaimPolicy(t *testing.T, b Backend, version int64) {
	ctx := context.Background()
	ls, pending, now := upgradeWithJobs(t, b, version, "claim policies")

	claim := func() []*contract.Job { t.Helper(); return claimAfterUpgrade(t, b, pending, now) }
	if err := ls.SetQueueLimits(ctx, pending.Queue, contract.QueueLimits{Rate: contract.RateLimit{Starts: 1, Per: time.Hour}, Fair: true}, now); err != nil {
		t.Fatal(err)
	}
	if got := claim(); len(got) != 1 || got[0].ID != pending.ID {
		t.Fatalf("fair claim under a rate of 1 an hour returned %d jobs; want the pending job %d", len(got), pending.ID)
	}
	if states, err := ls.QueueRateStates(ctx, pending.Queue, now); err != nil || len(states) != 1 {
		t.Fatalf("QueueRateStates after the claim: %+v, %v; want the queue's instant", states, err)
	}

	migrateAgainIsNoop(t, b)
}
