package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/backlogq/backlog/adapters/httpapi/client"
	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/internal/teststores"
)

// TestWorkerProgressAndCheckpoint: a remote handler reports progress and
// saves a checkpoint with core.ReportProgress and core.SaveCheckpoint, as
// in process; its failed attempt's next attempt resumes from the
// checkpoint, and the server shows the last progress.
func TestWorkerProgressAndCheckpoint(t *testing.T) {
	t.Parallel()
	s := startServer(t, teststores.Memory(t), core.Config{}, false)
	ctx := context.Background()
	r, err := s.producer.Submit(ctx, client.SubmitRequest{Kind: "resume", MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		starts []int
	)
	w := s.newWorker(client.WorkerConfig{Handler: func(ctx context.Context, j *client.Job) (json.RawMessage, error) {
		var cp struct{ Next int }
		if _, err := core.LoadCheckpoint(j.CoreJob(), &cp); err != nil {
			return nil, err
		}
		mu.Lock()
		starts = append(starts, cp.Next)
		mu.Unlock()
		if err := core.ReportProgress(ctx, float64(cp.Next*10), "working"); err != nil {
			return nil, err
		}
		if cp.Next == 0 {
			if err := core.SaveCheckpoint(ctx, map[string]int{"Next": 7}); err != nil {
				return nil, err
			}
			return nil, client.RetryIn(errors.New("interrupted"), 0)
		}
		return nil, core.ReportProgress(ctx, 100, "done")
	}})
	runWorker(t, w)
	waitFor(t, 20*time.Second, "the job to complete", func() bool { return s.job(r.Job.ID).State == core.StateCompleted })
	mu.Lock()
	defer mu.Unlock()
	if len(starts) != 2 || starts[0] != 0 || starts[1] != 7 {
		t.Fatalf("attempts started at %v; want [0 7]", starts)
	}
	j := s.job(r.Job.ID)
	if j.Progress == nil || j.Progress.Percent != 100 || j.Progress.Message != "done" || string(j.Checkpoint) != `{"Next":7}` {
		t.Fatalf("completed job: progress %+v, checkpoint %s", j.Progress, j.Checkpoint)
	}
}
