package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
)

// TestMaintainArchivesInsteadOfPruning: with Retention.Archive,
// maintenance moves final jobs past their retention into the archive,
// where ListArchivedJobs, GetArchivedJob and FindJob read them, and then
// prunes the archive past ArchiveTTL.
func TestMaintainArchivesInsteadOfPruning(t *testing.T) {
	c, _, clock := producerClient(t, func(cfg *core.Config) {
		cfg.Retention = &core.Retention{Completed: time.Hour, Cancelled: time.Hour, Discarded: -1, Archive: true, ArchiveTTL: 24 * time.Hour}
	})
	ctx := context.Background()
	res, err := c.Enqueue(ctx, greetArgs{Name: "old"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	id := res.Job.ID
	if _, err := c.CancelJob(ctx, id); err != nil {
		t.Fatal(err)
	}
	kept, err := c.Enqueue(ctx, greetArgs{Name: "live"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	clock.Add(2 * time.Hour)
	c.Maintain(ctx)

	if _, err := c.GetJob(ctx, id); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("GetJob of an archived job: %v; want ErrNotFound", err)
	}
	j, archived, err := c.FindJob(ctx, id)
	if err != nil || !archived || j.ID != id || j.State != core.StateCancelled || string(j.Args) != `{"name":"old"}` {
		t.Fatalf("FindJob(%d) = %+v, archived %v, %v; want the cancelled job from the archive", id, j, archived, err)
	}
	if j, archived, err := c.FindJob(ctx, kept.Job.ID); err != nil || archived || j.ID != kept.Job.ID {
		t.Fatalf("FindJob of a live job = %+v, archived %v, %v; want it from the jobs", j, archived, err)
	}
	if _, _, err := c.FindJob(ctx, id+100); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("FindJob of a missing job: %v; want ErrNotFound", err)
	}
	list, err := c.ListArchivedJobs(ctx, core.ListParams{})
	if err != nil || len(list) != 1 || list[0].ID != id {
		t.Fatalf("ListArchivedJobs = %d jobs, %v; want job %d", len(list), err, id)
	}

	clock.Add(21 * time.Hour)
	c.Maintain(ctx)
	if _, err := c.GetArchivedJob(ctx, id); err != nil {
		t.Fatalf("GetArchivedJob before ArchiveTTL has passed since it finished: %v", err)
	}
	clock.Add(2 * time.Hour)
	c.Maintain(ctx)
	if _, err := c.GetArchivedJob(ctx, id); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("GetArchivedJob after ArchiveTTL: %v; want ErrNotFound (pruned from the archive)", err)
	}
}

// TestArchiveKeepsCompletedJobsOfZeroRetention: with Archive on, a
// completed job under a zero Completed retention is kept at completion
// and archived by the next maintenance round, not deleted.
func TestArchiveKeepsCompletedJobsOfZeroRetention(t *testing.T) {
	h := core.NewHandlers()
	h.HandleRaw("ok", func(context.Context, *core.Job) error { return nil })
	c, st := newClient(t, h, func(cfg *core.Config) {
		cfg.Retention = &core.Retention{Completed: 0, Archive: true}
	})
	ctx := context.Background()
	r, err := c.EnqueueRaw(ctx, "ok", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WorkJob(ctx, r.Job.ID); err != nil {
		t.Fatal(err)
	}
	if j, err := st.Get(ctx, r.Job.ID); err != nil || j.State != core.StateCompleted {
		t.Fatalf("job after completion: %+v, %v; want it kept, completed", j, err)
	}
	time.Sleep(time.Millisecond) // FinishedAt must be before the round's now
	c.Maintain(ctx)
	if _, err := c.GetArchivedJob(ctx, r.Job.ID); err != nil {
		t.Fatalf("GetArchivedJob after a maintenance round: %v", err)
	}
}

// TestArchiveNeedsAnArchiver: NewClient refuses Retention.Archive on a
// store without an archive.
func TestArchiveNeedsAnArchiver(t *testing.T) {
	_, st := newClient(t, nil, nil)
	type plain struct{ contract.Store }
	_, err := core.NewClient(plain{st}, core.Config{Retention: &core.Retention{Archive: true}})
	if !errors.Is(err, core.ErrUnsupported) {
		t.Fatalf("NewClient with Retention.Archive on a store without an archive: %v; want ErrUnsupported", err)
	}
	c, err := core.NewClient(plain{st}, core.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListArchivedJobs(context.Background(), core.ListParams{}); !errors.Is(err, core.ErrUnsupported) {
		t.Fatalf("ListArchivedJobs on a store without an archive: %v; want ErrUnsupported", err)
	}
}
