package upgradetest

import (
	"context"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/store/internal/sqlq"
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
	ls, ok := b.Store.(limitsStore)
	if !ok {
		t.Fatalf("%T is no core.QueueLimiter with PauseQueue and Stats", b.Store)
	}
	full, newest, err := sqlq.RenderMigrations(b.Migrations, b.Data)
	if err != nil {
		t.Fatal(err)
	}
	if newest < version {
		t.Fatalf("newest migration is %d; want at least %d (claim policies)", newest, version)
	}
	if err := sqlq.Migrate(ctx, b.DB, b.Dialect, upTo(t, full, version-1), b.Versions); err != nil {
		t.Fatalf("migrate to version %d: %v", version-1, err)
	}
	pending, running, completed := Jobs()
	b.InsertV1(t, pending, 4)
	b.InsertV1(t, running, 5)
	b.InsertV1(t, completed, 7)
	now := pending.RunAt.Add(time.Minute)
	if err := ls.PauseQueue(ctx, "paused-before", now); err != nil {
		t.Fatalf("pause at version %d: %v", version-1, err)
	}
	before := snapshotN(t, b, 3)

	if err := b.Store.Migrate(ctx); err != nil {
		t.Fatalf("migrate from version %d: %v", version-1, err)
	}
	if v := schemaVersion(t, b); v != newest {
		t.Fatalf("schema at version %d after Migrate; want %d", v, newest)
	}
	sameRows(t, "the migration", before, snapshotN(t, b, 3))
	for _, want := range []*core.Job{pending, running, completed} {
		checkGet(t, b.Store, want)
	}
	st, err := ls.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	paused := false
	for _, q := range st {
		paused = paused || (q.Queue == "paused-before" && q.Paused)
	}
	if !paused {
		t.Fatalf("queue paused-before lost its pause in the upgrade: Stats %+v", st)
	}
	if l, err := ls.QueueLimits(ctx, "paused-before"); err != nil || !l.IsZero() {
		t.Fatalf("QueueLimits of a queue from before the upgrade: %+v, %v; want none", l, err)
	}

	claim := func() []*core.Job {
		t.Helper()
		got, err := b.Store.Claim(ctx, core.ClaimParams{Queue: pending.Queue, WorkerID: "w-new", Limit: 10, Now: now, LeaseUntil: now.Add(time.Minute), Tags: pending.Tags})
		if err != nil {
			t.Fatalf("claim after the upgrade: %v", err)
		}
		return got
	}
	if err := ls.SetQueueLimits(ctx, pending.Queue, core.QueueLimits{Rate: core.RateLimit{Starts: 1, Per: time.Hour}, Fair: true}, now); err != nil {
		t.Fatal(err)
	}
	if got := claim(); len(got) != 1 || got[0].ID != pending.ID {
		t.Fatalf("fair claim under a rate of 1 an hour returned %d jobs; want the pending job %d", len(got), pending.ID)
	}
	if states, err := ls.QueueRateStates(ctx, pending.Queue, now); err != nil || len(states) != 1 {
		t.Fatalf("QueueRateStates after the claim: %+v, %v; want the queue's instant", states, err)
	}

	applied := versionRows(t, b)
	if err := b.Store.Migrate(ctx); err != nil {
		t.Fatalf("second migrate: %v", err)
	}
	if again := versionRows(t, b); again != applied || schemaVersion(t, b) != newest {
		t.Fatalf("second migrate wrote versions: %d rows, then %d", applied, again)
	}
}
