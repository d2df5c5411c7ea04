package upgradetest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

// RunProgress migrates b's store to every migration numbered below
// version (the one that adds the progress and checkpoint columns),
// writes there with raw SQL a pending, a running and a completed job,
// runs Migrate, and checks that the rows read back unchanged, with no
// progress and no checkpoint; that the running job, claimed before the
// upgrade, records progress and a checkpoint under its old claim; that
// a claim after the upgrade clears the progress and returns the
// checkpoint; and that Migrate is then a no-op.
func RunProgress(t *testing.T, b Backend, version int64) {
	ctx := context.Background()
	rec, ok := b.Store.(contract.ProgressRecorder)
	if !ok {
		t.Fatalf("%T is no contract.ProgressRecorder", b.Store)
	}
	pending, running, completed := upgradeBelow(t, b, version)
	for _, j := range []*contract.Job{pending, running, completed} {
		got, err := b.Store.Get(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Progress != nil || got.Checkpoint != nil {
			t.Fatalf("job %d from before the upgrade has progress %+v and checkpoint %s; want neither", j.ID, got.Progress, got.Checkpoint)
		}
	}
	now := pending.RunAt.Add(time.Minute)
	at := contract.UTC(now)
	if err := rec.RecordProgress(ctx, contract.ProgressUpdate{JobID: running.ID, WorkerID: running.WorkerID, ClaimSeq: running.ClaimSeq,
		Progress: &contract.Progress{Percent: 75, Message: "from before ✓", At: at}, Checkpoint: json.RawMessage(`{"row":750}`)}); err != nil {
		t.Fatalf("record progress of job %d, running since before the upgrade: %v", running.ID, err)
	}
	got, err := b.Store.Get(ctx, running.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Progress == nil || got.Progress.Percent != 75 || got.Progress.Message != "from before ✓" || !got.Progress.At.Equal(at) || string(compactJSON(t, got.Checkpoint)) != `{"row":750}` {
		t.Fatalf("job %d after RecordProgress: progress %+v, checkpoint %s; want 75 %%, \"from before ✓\" at %s and {\"row\":750}", running.ID, got.Progress, got.Checkpoint, at)
	}
	// Its lease ends; the retry is claimed with the checkpoint and
	// without the progress.
	res, err := b.Store.Finish(ctx, []contract.Outcome{{JobID: running.ID, WorkerID: running.WorkerID, ClaimSeq: running.ClaimSeq, Attempt: running.Attempt,
		Kind: contract.OutcomeRetry, At: now, RunAt: now, Error: &contract.AttemptError{Attempt: running.Attempt, At: now, Error: "boom"}}})
	if err != nil || len(res) != 1 || !res[0].Applied {
		t.Fatalf("retry of job %d: %+v, %v; want it applied", running.ID, res, err)
	}
	claimed, err := b.Store.Claim(ctx, contract.ClaimParams{Queue: running.Queue, Tags: running.Tags, Limit: 1, WorkerID: "upgrade-w",
		Now: now.Add(time.Second), LeaseUntil: now.Add(time.Minute)})
	if err != nil || len(claimed) != 1 || claimed[0].ID != running.ID {
		t.Fatalf("claim of the retried job %d: %d jobs, %v", running.ID, len(claimed), err)
	}
	if claimed[0].Progress != nil || string(compactJSON(t, claimed[0].Checkpoint)) != `{"row":750}` {
		t.Fatalf("claim after the upgrade returned progress %+v and checkpoint %s; want no progress and {\"row\":750}", claimed[0].Progress, claimed[0].Checkpoint)
	}
	if got, err := b.Store.Get(ctx, running.ID); err != nil || got.Progress != nil {
		t.Fatalf("job %d after its claim: progress %+v, %v; want none (a claim clears it)", running.ID, got.Progress, err)
	}
	migrateAgainIsNoop(t, b)
}

// compactJSON returns raw without insignificant whitespace.
func compactJSON(t *testing.T, raw json.RawMessage) []byte {
	t.Helper()
	if raw == nil {
		return nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%q is not JSON: %v", raw, err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
