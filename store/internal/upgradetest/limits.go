package upgradetest

import (
	"context"
	"testing"
	"time"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/internal/sqlq"
)

// limitsStore is what RunQueueLimits needs of the store besides Store.
type limitsStore interface {
	contract.QueueLimiter
	PauseQueue(ctx context.Context, queue string, now time.Time) error
	Stats(ctx context.Context) ([]contract.QueueStats, error)
}

// RunQueueLimits migrates b's store to the version before version (the
// migration that adds partition keys and queue limits), writes there with
// raw SQL a pending, a running and a completed job of queue "upgrade" and
// pauses queue "paused-before", runs Migrate, and checks that the rows read
// back unchanged with no partition key, that the pause is kept and the
// queue has no limits (so InitQueueLimits stores its limits), that the
// job running across the upgrade counts against a limit set afterwards
// (MaxRunning 1 lets no claim through, 2 lets the pending job through),
// and that Migrate is then a no-op.
func RunQueueLimits(t *testing.T, b Backend, version int64) {
	ctx := context.Background()
	ls, pending, now := upgradeWithJobs(t, b, version, "queue limits")
	if _, created, err := ls.InitQueueLimits(ctx, "paused-before", contract.QueueLimits{MaxRunning: 3}, now); err != nil || !created {
		t.Fatalf("InitQueueLimits of a queue from before the upgrade: created %v, %v; want its limits stored", created, err)
	}

	claim := func() []*contract.Job { t.Helper(); return claimAfterUpgrade(t, b, pending, now) }
	if err := ls.SetQueueLimits(ctx, pending.Queue, contract.QueueLimits{MaxRunning: 1}, now); err != nil {
		t.Fatal(err)
	}
	if got := claim(); len(got) != 0 {
		t.Fatalf("claim under MaxRunning 1 returned %d jobs; the job running across the upgrade holds the one slot", len(got))
	}
	if err := ls.SetQueueLimits(ctx, pending.Queue, contract.QueueLimits{MaxRunning: 2}, now); err != nil {
		t.Fatal(err)
	}
	if got := claim(); len(got) != 1 || got[0].ID != pending.ID {
		t.Fatalf("claim under MaxRunning 2 returned %d jobs; want the pending job %d", len(got), pending.ID)
	}

	migrateAgainIsNoop(t, b)
}

// upgradeWithJobs migrates b's store to version-1, writes there with raw
// SQL a pending, a running and a completed job (Jobs) and pauses queue
// "paused-before", runs Migrate, and checks that the schema is at the
// newest version, the rows read back unchanged, and the pause is kept. It
// returns the store as a limitsStore, the pending job and a time just
// after it was due; no queue has limits. what names the migration for
// messages.
func upgradeWithJobs(t *testing.T, b Backend, version int64, what string) (limitsStore, *contract.Job, time.Time) {
	t.Helper()
	ctx := context.Background()
	ls, ok := b.Store.(limitsStore)
	if !ok {
		t.Fatalf("%T is no contract.QueueLimiter with PauseQueue and Stats", b.Store)
	}
	full, newest, err := sqlq.RenderMigrations(b.Migrations, b.Data)
	if err != nil {
		t.Fatal(err)
	}
	if newest < version {
		t.Fatalf("newest migration is %d; want at least %d (%s)", newest, version, what)
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
	for _, want := range []*contract.Job{pending, running, completed} {
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
	return ls, pending, now
}

// claimAfterUpgrade claims up to 10 jobs of pending's queue at now for a
// new worker, failing t on error.
func claimAfterUpgrade(t *testing.T, b Backend, pending *contract.Job, now time.Time) []*contract.Job {
	t.Helper()
	got, err := b.Store.Claim(context.Background(), contract.ClaimParams{Queue: pending.Queue, WorkerID: "w-new", Limit: 10, Now: now, LeaseUntil: now.Add(time.Minute), Tags: pending.Tags})
	if err != nil {
		t.Fatalf("claim after the upgrade: %v", err)
	}
	return got
}

// migrateAgainIsNoop checks that a second Migrate writes no version.
func migrateAgainIsNoop(t *testing.T, b Backend) {
	t.Helper()
	_, newest, err := sqlq.RenderMigrations(b.Migrations, b.Data)
	if err != nil {
		t.Fatal(err)
	}
	applied := versionRows(t, b)
	if err := b.Store.Migrate(context.Background()); err != nil {
		t.Fatalf("second migrate: %v", err)
	}
	if again := versionRows(t, b); again != applied || schemaVersion(t, b) != newest {
		t.Fatalf("second migrate wrote versions: %d rows, then %d", applied, again)
	}
}
