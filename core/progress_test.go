package core_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
)

// TestProgressAndCheckpointAcrossAttempts: a handler reports progress
// and saves a checkpoint, fails, and its next attempt resumes from the
// checkpoint; the throttle holds back a report that comes too soon and
// writes it when the handler returns; the job keeps the checkpoint and
// the last attempt's progress.
func TestProgressAndCheckpointAcrossAttempts(t *testing.T) {
	type cp struct {
		Next int `json:"next"`
	}
	var (
		mu      sync.Mutex
		resumed []int
		seen    []*core.Progress
	)
	h := core.NewHandlers()
	h.HandleRaw("resume", func(ctx context.Context, j *core.Job) error {
		var c cp
		ok, err := core.LoadCheckpoint(j, &c)
		if err != nil {
			return core.Permanent(err)
		}
		if !ok {
			c.Next = 0
		}
		mu.Lock()
		resumed = append(resumed, c.Next)
		seen = append(seen, j.Progress)
		mu.Unlock()
		for i := c.Next; i < 10; i++ {
			if err := core.ReportProgress(ctx, float64(i*10), fmt.Sprintf("item %d", i)); err != nil {
				return err
			}
			if err := core.SaveCheckpoint(ctx, cp{Next: i + 1}); err != nil {
				return err
			}
			if j.Attempt == 1 && i == 4 {
				// Two reports within the interval: the second is held
				// back, then written when the handler returns.
				if err := core.ReportProgress(ctx, 45, "failing"); err != nil {
					return err
				}
				return core.RetryIn(errors.New("disk full"), 0)
			}
		}
		return core.ReportProgress(ctx, 100, "done")
	})
	c, st := newClient(t, h, func(c *core.Config) { c.PollInterval = 10 * time.Millisecond })
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	r, err := c.EnqueueRaw(context.Background(), "resume", nil, &core.Options{MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	j := waitState(t, st, r.Job.ID, core.StateCompleted)
	mu.Lock()
	defer mu.Unlock()
	if len(resumed) != 2 || resumed[0] != 0 || resumed[1] != 5 {
		t.Fatalf("attempts started at items %v; want [0 5] (the second resumes from the checkpoint)", resumed)
	}
	if seen[1] != nil {
		t.Fatalf("the second attempt saw progress %+v; a claim clears it", seen[1])
	}
	if j.Progress == nil || j.Progress.Percent != 100 || j.Progress.Message != "done" {
		t.Fatalf("completed job's progress %+v; want 100 %% done", j.Progress)
	}
	if string(j.Checkpoint) != `{"next":10}` {
		t.Fatalf("completed job's checkpoint %s; want {\"next\":10}", j.Checkpoint)
	}
	if len(j.Errors) != 1 || j.Errors[0].Error != "disk full" {
		t.Fatalf("errors %+v; want the first attempt's", j.Errors)
	}
}

// TestProgressHeldBackIsWritten: a report the throttle holds back is
// written when the handler returns, so the job shows the latest one.
func TestProgressHeldBackIsWritten(t *testing.T) {
	release := make(chan struct{})
	h := core.NewHandlers()
	h.HandleRaw("slow", func(ctx context.Context, j *core.Job) error {
		if err := core.ReportProgress(ctx, 10, "first"); err != nil {
			return err
		}
		if err := core.ReportProgress(ctx, 20, "second"); err != nil {
			return err
		}
		<-release
		return core.Permanent(errors.New("stop"))
	})
	c, st := newClient(t, h, func(c *core.Config) { c.PollInterval = 10 * time.Millisecond })
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	r, err := c.EnqueueRaw(context.Background(), "slow", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	j := waitProgress(t, st, r.Job.ID, "first")
	if j.State != core.StateRunning {
		t.Fatalf("job in state %s; want running", j.State)
	}
	close(release)
	j = waitState(t, st, r.Job.ID, core.StateDiscarded)
	if j.Progress == nil || j.Progress.Message != "second" || j.Progress.Percent != 20 {
		t.Fatalf("discarded job's progress %+v; want the held-back report 20 %% second", j.Progress)
	}
}

// waitProgress polls job id until its progress message is msg.
func waitProgress(t *testing.T, st contract.Store, id int64, msg string) *core.Job {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		j, err := st.Get(context.Background(), id)
		if err == nil && j.Progress != nil && j.Progress.Message == msg {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %d: want progress %q, have %+v (err %v)", id, msg, j, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestProgressErrors: outside a handler, out-of-bounds values, and an
// attempt whose lease is lost.
func TestProgressErrors(t *testing.T) {
	ctx := context.Background()
	if err := core.ReportProgress(ctx, 1, ""); err == nil || !strings.Contains(err.Error(), "outside a job handler") {
		t.Fatalf("ReportProgress outside a handler: %v", err)
	}
	if err := core.SaveCheckpoint(ctx, 1); err == nil || !strings.Contains(err.Error(), "outside a job handler") {
		t.Fatalf("SaveCheckpoint outside a handler: %v", err)
	}
	errs := make(chan error, 4)
	lost := make(chan struct{})
	h := core.NewHandlers()
	h.HandleRaw("k", func(ctx context.Context, j *core.Job) error {
		errs <- core.ReportProgress(ctx, 101, "")
		errs <- core.SaveCheckpoint(ctx, strings.Repeat("x", core.MaxCheckpointBytes))
		<-lost
		// The engine cancels the handler's context when it learns of the
		// cancel; a write that outlives the context still fails its fence.
		errs <- core.SaveCheckpoint(context.WithoutCancel(ctx), map[string]int{"n": 1})
		return nil
	})
	c, st := newClient(t, h, func(c *core.Config) { c.PollInterval = 10 * time.Millisecond })
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := c.EnqueueRaw(ctx, "k", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, why := range []string{"percent 101", "a checkpoint over the limit"} {
		if err := <-errs; !errors.Is(err, core.ErrInvalidArgument) {
			t.Fatalf("report %d (%s): %v; want ErrInvalidArgument", i, why, err)
		}
	}
	// The job is cancelled under the handler: its writes fail the fence.
	if _, err := st.Cancel(ctx, r.Job.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	close(lost)
	if err := <-errs; !errors.Is(err, core.ErrLeaseLost) {
		t.Fatalf("SaveCheckpoint after the job was cancelled: %v; want ErrLeaseLost", err)
	}
}
