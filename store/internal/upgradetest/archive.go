package upgradetest

import (
	"context"
	"testing"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

// RunArchive migrates b's store to every migration numbered below
// version (the migration that creates the archive table), writes there
// with raw SQL a pending, a running and a completed job, runs Migrate,
// and checks that the rows read back unchanged, that Archive then moves
// the completed job written before the upgrade (and nothing else) into
// the new archive, where GetArchived and ListArchived return it as Get
// did, that PruneArchive deletes it, and that Migrate is then a no-op.
func RunArchive(t *testing.T, b Backend, version int64) {
	ctx := context.Background()
	a, ok := b.Store.(contract.Archiver)
	if !ok {
		t.Fatalf("%T is not a contract.Archiver", b.Store)
	}
	pending, running, completed := upgradeBelow(t, b, version)
	before, err := b.Store.Get(ctx, completed.ID)
	if err != nil {
		t.Fatal(err)
	}
	later := completed.FinishedAt.Add(time.Hour)
	n, err := a.Archive(ctx, contract.StateCompleted, later, 100)
	if err != nil || n != 1 {
		t.Fatalf("Archive after the upgrade moved %d jobs, %v; want the 1 completed job written before it", n, err)
	}
	got, err := a.GetArchived(ctx, completed.ID)
	if err != nil {
		t.Fatalf("GetArchived(%d) after the upgrade: %v", completed.ID, err)
	}
	if g, w := canon(t, got), canon(t, before); g != w {
		t.Fatalf("archived job %d reads back as\n%s\nwant\n%s", completed.ID, g, w)
	}
	list, err := a.ListArchived(ctx, contract.ListParams{})
	if err != nil || len(list) != 1 || list[0].ID != completed.ID {
		t.Fatalf("ListArchived after the upgrade: %d jobs, %v; want job %d", len(list), err, completed.ID)
	}
	if _, err := b.Store.Get(ctx, completed.ID); err == nil {
		t.Fatalf("job %d is still in the jobs table after Archive", completed.ID)
	}
	for _, j := range []*contract.Job{pending, running} {
		checkGet(t, b.Store, j)
	}
	if n, err := a.PruneArchive(ctx, later, 100); err != nil || n != 1 {
		t.Fatalf("PruneArchive after the upgrade deleted %d jobs, %v; want 1", n, err)
	}
	migrateAgainIsNoop(t, b)
}
