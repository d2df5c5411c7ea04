package upgradetest

import (
	"context"
	"io/fs"
	"testing"
	"testing/fstest"
	"time"

	"github.com/backlogq/backlog/core/contract"

	"github.com/pressly/goose/v3"

	"github.com/backlogq/backlog/core"
)

// RunQueueHistory migrates b's store to every migration numbered below
// version (the migration that adds the queue history tables; numbers
// below it may have gaps), writes there with raw SQL a pending, a running
// and a completed job, runs Migrate, and checks that the rows read back
// unchanged, that the history starts empty, that DueJobs counts the
// pending job written before the upgrade, that samples added afterwards
// read back as buckets and totals, and that Migrate is then a no-op.
func RunQueueHistory(t *testing.T, b Backend, version int64) {
	ctx := context.Background()
	qh, ok := b.Store.(contract.QueueHistory)
	if !ok {
		t.Fatalf("%T is no contract.QueueHistory", b.Store)
	}
	pending, _, _ := upgradeBelow(t, b, version)

	now := pending.RunAt.Add(time.Minute)
	if got, err := qh.QueueHistory(ctx, "", now.Add(-core.HistoryRetention)); err != nil || len(got) != 0 {
		t.Fatalf("QueueHistory right after the upgrade: %+v, %v; want no bucket", got, err)
	}
	due, err := qh.DueJobs(ctx, now)
	if err != nil || len(due) != 1 || due[0].Queue != pending.Queue || due[0].Count != 1 || !due[0].OldestRunAt.Equal(pending.RunAt) {
		t.Fatalf("DueJobs after the upgrade: %+v, %v; want the pending job of queue %q written before it, due since %s", due, err, pending.Queue, pending.RunAt)
	}
	if err := qh.AddQueueHistory(ctx, []contract.QueueSample{
		{Queue: pending.Queue, At: now, Completed: 2, Failed: 1, Gauge: true, Depth: due[0].Count, OldestAge: now.Sub(due[0].OldestRunAt)},
		{Queue: pending.Queue, At: now.Add(time.Second), Completed: 1},
	}); err != nil {
		t.Fatalf("AddQueueHistory after the upgrade: %v", err)
	}
	got, err := qh.QueueHistory(ctx, pending.Queue, now)
	if err != nil || len(got) != 1 || got[0].Completed != 3 || got[0].Failed != 1 || !got[0].Gauge || got[0].Depth != 1 || got[0].OldestAge != time.Minute {
		t.Fatalf("QueueHistory after adding samples: %+v, %v; want one bucket of 3 completed, 1 failed, 1 due job a minute old", got, err)
	}
	totals, err := qh.QueueTotals(ctx)
	if err != nil || len(totals) != 1 || totals[0] != (contract.QueueTotals{Queue: pending.Queue, Completed: 3, Failed: 1}) {
		t.Fatalf("QueueTotals after adding samples: %+v, %v", totals, err)
	}

	migrateAgainIsNoop(t, b)
	if got, err := qh.QueueHistory(ctx, pending.Queue, now); err != nil || len(got) != 1 || got[0].Completed != 3 {
		t.Fatalf("QueueHistory after a second Migrate: %+v, %v; want the bucket kept", got, err)
	}
}

// below returns the rendered migrations numbered below version, whatever
// numbers are missing among them.
func below(t *testing.T, full fs.FS, version int64) fs.FS {
	t.Helper()
	entries, err := fs.ReadDir(full, ".")
	if err != nil {
		t.Fatal(err)
	}
	out := fstest.MapFS{}
	for _, e := range entries {
		v, err := goose.NumericComponent(e.Name())
		if err != nil || v >= version {
			continue
		}
		data, err := fs.ReadFile(full, e.Name())
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = &fstest.MapFile{Data: data, Mode: 0o444}
	}
	if len(out) == 0 {
		t.Fatalf("no migration numbered below %d", version)
	}
	return out
}
