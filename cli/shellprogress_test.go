package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/adapters/httpapi/apitypes"
	"github.com/backlogq/backlog/adapters/httpapi/client"
	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
)

// TestShellProgressInEngine: a shell handler appends progress and
// checkpoint lines to $BACKLOG_PROGRESS_FILE (the last one without a
// newline, and a malformed one that is skipped); its failed attempt's
// checkpoint reaches the next attempt in $BACKLOG_JOB_CHECKPOINT, and the
// job shows the last attempt's progress.
func TestShellProgressInEngine(t *testing.T) {
	t.Parallel()
	script := `
if [ -n "$BACKLOG_JOB_CHECKPOINT" ]; then
  echo '{"percent": 100, "message": "done"}' >> "$BACKLOG_PROGRESS_FILE"
  printf 'resumed from %s' "$BACKLOG_JOB_CHECKPOINT"
  exit 0
fi
echo '{"percent": 30, "message": "a third"}' >> "$BACKLOG_PROGRESS_FILE"
echo 'not json' >> "$BACKLOG_PROGRESS_FILE"
echo '{"checkpoint": {"row": 3}}' >> "$BACKLOG_PROGRESS_FILE"
sleep 0.7
printf '{"percent": 60, "message": "two thirds", "checkpoint": {"row": 6}}' >> "$BACKLOG_PROGRESS_FILE"
echo nope >&2
exit 3`
	hs := core.NewHandlers()
	hs.HandleRaw("resumable", sh(script).handle, core.WithRetry(core.DelayList{0}))
	st := openStore(t, tempDB(t))
	c, err := core.NewClient(st, core.Config{
		Queues: map[string]core.QueueConfig{core.DefaultQueue: {MaxWorkers: 1}}, Handlers: hs,
		PollInterval: 20 * time.Millisecond, MaintenanceInterval: -1, Retention: &core.Retention{Completed: time.Hour},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r, err := c.EnqueueRaw(ctx, "resumable", nil, &core.Options{MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Stop(sctx)
	})
	waitFor(t, 20*time.Second, "the job to complete", func() bool {
		j, err := st.Get(ctx, r.Job.ID)
		return err == nil && j.State == core.StateCompleted
	})
	j, _ := st.Get(ctx, r.Job.ID)
	if string(j.Result) != `resumed from {"row":6}` || j.Attempt != 2 || len(j.Errors) != 1 || !strings.Contains(j.Errors[0].Error, "exit status 3") {
		t.Fatalf("job: result %q, attempt %d, errors %+v", j.Result, j.Attempt, j.Errors)
	}
	if j.Progress == nil || j.Progress.Percent != 100 || j.Progress.Message != "done" || string(j.Checkpoint) != `{"row":6}` {
		t.Fatalf("job: progress %+v, checkpoint %s", j.Progress, j.Checkpoint)
	}
}

// TestProgressReaderLines: complete lines are applied in order, a line
// over the bound is skipped up to its newline, and a last line without a
// newline waits for the final read.
func TestProgressReaderLines(t *testing.T) {
	var saved []string
	ctx, flush := core.WithProgressSink(context.Background(), nil, func(_ context.Context, p *core.Progress, cp json.RawMessage) error {
		if cp != nil {
			saved = append(saved, string(cp))
		}
		return nil
	})
	defer flush(ctx)
	r := &progressReader{}
	r.feed(ctx, []byte(`{"checkpoint": 1}`+"\n"+`{"checkpoint": "`+strings.Repeat("x", maxProgressLine)))
	r.feed(ctx, []byte(`"}`+"\n"+`{"checkpoint": 3}`+"\n"+`{"checkpoint":`))
	r.feed(ctx, []byte(` 4}`))
	if strings.Join(saved, ",") != "1,3" {
		t.Fatalf("saved %v; want 1 and 3 (the long line skipped, the last one unfinished)", saved)
	}
	r.apply(ctx, r.partial)
	if strings.Join(saved, ",") != "1,3,4" {
		t.Fatalf("saved %v; want 1,3,4", saved)
	}
}

// TestJobsGetShowsProgress: jobs get shows a running job's progress and
// checkpoint, as text and as JSON.
func TestJobsGetShowsProgress(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	st := openStore(t, db)
	ctx := context.Background()
	now := time.Now()
	if _, err := st.Insert(ctx, now, []core.InsertParams{{Queue: "default", Kind: "import", Args: json.RawMessage(`{}`), Priority: 5, MaxAttempts: 3, RunAt: now}}); err != nil {
		t.Fatal(err)
	}
	jobs, err := st.Claim(ctx, contract.ClaimParams{Queue: "default", WorkerID: "w", Limit: 1, Now: now, LeaseUntil: now.Add(time.Hour)})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim: %v %v", jobs, err)
	}
	j := jobs[0]
	if err := st.(contract.ProgressRecorder).RecordProgress(ctx, contract.ProgressUpdate{JobID: j.ID, WorkerID: "w", ClaimSeq: j.ClaimSeq,
		Progress: &core.Progress{Percent: 42.5, Message: "row 425", At: now}, Checkpoint: json.RawMessage(`{"row":425}`)}); err != nil {
		t.Fatal(err)
	}
	_ = st.Close()
	r := mustCLI(t, db, "jobs", "get", strconv.FormatInt(j.ID, 10))
	for _, want := range []string{"42.5% row 425 (at ", `checkpoint:`, `{"row":425}`} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("get lacks %q:\n%s", want, r.stdout)
		}
	}
	g := decodeJSON[apitypes.Job](t, mustCLI(t, db, "jobs", "get", strconv.FormatInt(j.ID, 10), "-o", "json").stdout)
	var cp bytes.Buffer
	if err := json.Compact(&cp, g.Checkpoint); err != nil {
		t.Fatal(err)
	}
	if g.Progress == nil || g.Progress.Percent != 42.5 || cp.String() != `{"row":425}` {
		t.Fatalf("get json: %+v %s", g.Progress, g.Checkpoint)
	}
}

// TestWorkRemoteProgress: under work --server a shell handler's progress
// and checkpoint lines go to the server; a snoozed attempt's checkpoint
// reaches the next attempt in $BACKLOG_JOB_CHECKPOINT.
func TestWorkRemoteProgress(t *testing.T) {
	t.Parallel()
	url, admin := apiServer(t)
	id := submit(t, admin, client.SubmitRequest{Kind: "resume"})
	script := `if [ -n "$BACKLOG_JOB_CHECKPOINT" ]; then
  echo '{"percent": 100, "message": "done"}' >> "$BACKLOG_PROGRESS_FILE"
  printf '%s' "$BACKLOG_JOB_CHECKPOINT"
  exit 0
fi
echo '{"percent": 50, "message": "half", "checkpoint": {"row": 5}}' >> "$BACKLOG_PROGRESS_FILE"
echo snooze=0s
exit 75`
	w := startRemote(t, nil, url, "--token", "wtok", "--worker-id", "remote-1", "--handler", "resume="+script)
	waitFor(t, 30*time.Second, "the job to complete", func() bool { return getJob(t, admin, id).State == core.StateCompleted })
	if code := w.stop(t); code != 0 {
		t.Fatalf("exit %d: %s", code, w.stderr)
	}
	j := getJob(t, admin, id)
	if string(j.Result) != `{"row":5}` || j.Progress == nil || j.Progress.Percent != 100 || j.Progress.Message != "done" || string(j.Checkpoint) != `{"row":5}` {
		t.Fatalf("job: result %s, progress %+v, checkpoint %s", j.Result, j.Progress, j.Checkpoint)
	}
}
