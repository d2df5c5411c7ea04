package upgradetest

import (
	"context"
	"slices"
	"testing"

	"github.com/backlogq/backlog/core/contract"
)

// RunListOrder migrates b's store to every migration numbered below
// version (the migration that indexes jobs by run_at for lists), writes
// there with raw SQL a pending, a running and a completed job (Jobs, whose
// run_at order is completed, running, pending: not their id order), runs
// Migrate, and checks that the rows read back unchanged, that pages of
// one job by run_at, ascending and descending, walk the jobs written
// before the upgrade in run_at order with the keyset cursor (ListPage and
// List alike), that a byte budget of one byte ends each page after one
// job, and that Migrate is then a no-op.
func RunListOrder(t *testing.T, b Backend, version int64) {
	ctx := context.Background()
	type lister interface {
		contract.PageLister
		List(ctx context.Context, p contract.ListParams) ([]*contract.Job, error)
	}
	ls, ok := b.Store.(lister)
	if !ok {
		t.Fatalf("%T has no List and ListPage", b.Store)
	}
	pending, running, completed := upgradeBelow(t, b, version)

	want := []int64{completed.ID, running.ID, pending.ID}
	for _, desc := range []bool{false, true} {
		w := slices.Clone(want)
		if desc {
			slices.Reverse(w)
		}
		for _, bounded := range []bool{false, true} {
			var got []int64
			p := contract.ListParams{Queue: "upgrade", ByRunAt: true, Desc: desc, Limit: 1}
			for range 5 {
				var (
					jobs []*contract.Job
					err  error
				)
				if bounded {
					p.Limit = 100
					jobs, err = ls.ListPage(ctx, p, 1)
				} else {
					jobs, err = ls.List(ctx, p)
				}
				if err != nil {
					t.Fatalf("list by run_at after the upgrade: %v", err)
				}
				if len(jobs) == 0 {
					break
				}
				if len(jobs) != 1 {
					t.Fatalf("a page of limit 1, or of a budget of 1 byte, returned %d jobs after the upgrade; want 1", len(jobs))
				}
				got = append(got, jobs[0].ID)
				p.AfterID, p.AfterRunAt = jobs[0].ID, jobs[0].RunAt
			}
			if !slices.Equal(got, w) {
				t.Fatalf("pages by run_at (desc %v, byte budget %v) after the upgrade returned %v; want %v", desc, bounded, got, w)
			}
		}
	}

	migrateAgainIsNoop(t, b)
}
