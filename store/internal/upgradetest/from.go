package upgradetest

import (
	"context"
	"testing"
	"time"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/internal/sqlq"
)

// RunFrom migrates b's store to every migration numbered below version,
// writes there with raw SQL a pending, a running and a completed job, runs
// Migrate, and checks that the schema reached the newest version, that the
// rows read back unchanged and that the pending job is claimed; then it
// calls check for what the migration itself must have done.
func RunFrom(t *testing.T, b Backend, version int64, check func(t *testing.T)) {
	ctx := context.Background()
	pending, _, _ := upgradeBelow(t, b, version)
	now := pending.RunAt.Add(time.Minute)
	got, err := b.Store.Claim(ctx, contract.ClaimParams{Queue: pending.Queue, Tags: pending.Tags, Limit: 10, WorkerID: "upgrade-w", Now: now, LeaseUntil: now.Add(time.Minute)})
	if err != nil || len(got) != 1 || got[0].ID != pending.ID {
		t.Fatalf("claim after the upgrade: %d jobs, %v; want the pending job %d", len(got), err, pending.ID)
	}
	check(t)
}

// upgradeBelow migrates b's store to every migration numbered below
// version (numbers below it may have gaps), writes there with raw SQL the
// pending, running and completed jobs of Jobs, runs Migrate, and checks
// that the schema reached the newest version and that the rows read back
// unchanged. It returns the three jobs, their ids set.
func upgradeBelow(t *testing.T, b Backend, version int64) (pending, running, completed *contract.Job) {
	t.Helper()
	return upgradeBelowWith(t, b, version, nil)
}

// upgradeBelowWith is upgradeBelow calling prepare, when not nil, with
// the three jobs written, just before Migrate.
func upgradeBelowWith(t *testing.T, b Backend, version int64, prepare func(pending, running, completed *contract.Job)) (pending, running, completed *contract.Job) {
	t.Helper()
	ctx := context.Background()
	full, newest, err := sqlq.RenderMigrations(b.Migrations, b.Data)
	if err != nil {
		t.Fatal(err)
	}
	if newest < version {
		t.Fatalf("newest migration is %d; want at least %d", newest, version)
	}
	if err := sqlq.Migrate(ctx, b.DB, b.Dialect, below(t, full, version), b.Versions); err != nil {
		t.Fatalf("migrate to the versions below %d: %v", version, err)
	}
	pending, running, completed = Jobs()
	b.InsertV1(t, pending, 4)
	b.InsertV1(t, running, 5)
	b.InsertV1(t, completed, 7)
	before := snapshotN(t, b, 3)
	if prepare != nil {
		prepare(pending, running, completed)
	}
	if err := b.Store.Migrate(ctx); err != nil {
		t.Fatalf("migrate to version %d: %v", newest, err)
	}
	if v := schemaVersion(t, b); v != newest {
		t.Fatalf("schema at version %d after Migrate; want %d", v, newest)
	}
	sameRows(t, "the migration", before, snapshotN(t, b, 3))
	for _, want := range []*contract.Job{pending, running, completed} {
		checkGet(t, b.Store, want)
	}
	return pending, running, completed
}
