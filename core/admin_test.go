package core_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/memory"
)

// producerClient builds an insert-only client on a fresh memory store,
// with a fake clock.
func producerClient(t *testing.T, mod func(*core.Config)) (*core.Client, *memory.Store, *core.ManualClock) {
	t.Helper()
	clock := core.NewManualClock(time.Date(2030, 1, 2, 3, 4, 5, 678_901_234, time.UTC))
	c, st := newClient(t, nil, func(cfg *core.Config) {
		cfg.Queues = nil
		cfg.Clock = clock
		if mod != nil {
			mod(cfg)
		}
	})
	return c, st, clock
}

func TestGetJob(t *testing.T) {
	c, _, _ := producerClient(t, nil)
	ctx := context.Background()
	res, err := c.Enqueue(ctx, greetArgs{Name: "ann"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	j, err := c.GetJob(ctx, res.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if j.ID != res.Job.ID || j.Kind != "greet" || string(j.Args) != `{"name":"ann"}` || j.State != core.StateAvailable {
		t.Fatalf("GetJob = %+v", j)
	}
	if _, err := c.GetJob(ctx, res.Job.ID+100); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("GetJob of a missing job: err %v, want ErrNotFound", err)
	}
}

func TestGetJobKeepsSealedArgs(t *testing.T) {
	keys := mustKeyring(t, "k1", map[string][]byte{"k1": testKey(1)})
	c, _, _ := producerClient(t, func(cfg *core.Config) { cfg.Encryption = &core.Encryption{Keys: keys} })
	ctx := context.Background()
	res, err := c.Enqueue(ctx, greetArgs{Name: "secret"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	j, err := c.GetJob(ctx, res.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(j.Args), "secret") {
		t.Fatalf("GetJob opened the args: %s", j.Args)
	}
	opened, err := keys.OpenJob(j)
	if err != nil || string(opened.Args) != `{"name":"secret"}` {
		t.Fatalf("OpenJob = %s, %v", opened.Args, err)
	}
}

func TestListJobs(t *testing.T) {
	c, _, _ := producerClient(t, nil)
	ctx := context.Background()
	var ids []int64
	for _, q := range []string{"a", "b", "a", "a"} {
		res, err := c.EnqueueRaw(ctx, "k", nil, &core.Options{Queue: q})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.Job.ID)
	}
	page, err := c.ListJobs(ctx, core.ListParams{Queue: "a", Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(page) != 2 || page[0].ID != ids[0] || page[1].ID != ids[2] {
		t.Fatalf("first page = %v", jobIDs(page))
	}
	page, err = c.ListJobs(ctx, core.ListParams{Queue: "a", Limit: 2, AfterID: page[1].ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(page) != 1 || page[0].ID != ids[3] {
		t.Fatalf("second page = %v", jobIDs(page))
	}
	desc, err := c.ListJobs(ctx, core.ListParams{Desc: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(desc) != 4 || desc[0].ID != ids[3] {
		t.Fatalf("newest first = %v", jobIDs(desc))
	}
}

func jobIDs(js []*core.Job) []int64 {
	out := make([]int64, len(js))
	for i, j := range js {
		out[i] = j.ID
	}
	return out
}

func TestRetryJob(t *testing.T) {
	c, _, clock := producerClient(t, nil)
	ctx := context.Background()
	res, err := c.EnqueueRaw(ctx, "k", nil, &core.Options{RunAt: clock.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CancelJob(ctx, res.Job.ID); err != nil {
		t.Fatal(err)
	}
	clock.Add(time.Minute)
	j, err := c.RetryJob(ctx, res.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := contract.UTC(clock.Now()); j.State != core.StateAvailable || !j.RunAt.Equal(want) || !j.FinishedAt.IsZero() {
		t.Fatalf("RetryJob = state %s run_at %s finished_at %s; want available at %s", j.State, j.RunAt, j.FinishedAt, want)
	}
	if _, err := c.RetryJob(ctx, res.Job.ID+100); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("RetryJob of a missing job: err %v, want ErrNotFound", err)
	}
}

func TestRetryJobRunningRefused(t *testing.T) {
	started, release := make(chan int64, 1), make(chan struct{})
	h := core.NewHandlers()
	h.HandleRaw("block", func(ctx context.Context, j *core.Job) error {
		started <- j.ID
		<-release
		return nil
	})
	c, st := newClient(t, h, nil)
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := c.EnqueueRaw(ctx, "block", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-started
	if _, err := c.RetryJob(ctx, res.Job.ID); !errors.Is(err, core.ErrInvalidState) {
		t.Fatalf("RetryJob of a running job: err %v, want ErrInvalidState", err)
	}
	if err := c.DeleteJob(ctx, res.Job.ID); !errors.Is(err, core.ErrInvalidState) {
		t.Fatalf("DeleteJob of a running job: err %v, want ErrInvalidState", err)
	}
	close(release)
	waitState(t, st, res.Job.ID, core.StateCompleted)
}

// TestRetryJobWakesProducer: a retried job runs at once on the node that
// retried it, without waiting for a poll (PollInterval is an hour).
func TestRetryJobWakesProducer(t *testing.T) {
	ran := make(chan int64, 4)
	h := core.NewHandlers()
	h.HandleRaw("k", func(ctx context.Context, j *core.Job) error {
		ran <- j.ID
		return core.Cancel(errors.New("stop here"))
	})
	c, st := newClient(t, h, nil)
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := c.EnqueueRaw(ctx, "k", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-ran
	waitState(t, st, res.Job.ID, core.StateCancelled)
	if _, err := c.RetryJob(ctx, res.Job.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("the retried job did not run")
	}
}

func TestDeleteJob(t *testing.T) {
	c, _, _ := producerClient(t, nil)
	ctx := context.Background()
	res, err := c.EnqueueRaw(ctx, "k", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteJob(ctx, res.Job.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetJob(ctx, res.Job.ID); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("GetJob after DeleteJob: err %v, want ErrNotFound", err)
	}
	if err := c.DeleteJob(ctx, res.Job.ID); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("DeleteJob of a missing job: err %v, want ErrNotFound", err)
	}
}

func TestListWorkers(t *testing.T) {
	h := core.NewHandlers()
	h.HandleRaw("k", func(context.Context, *core.Job) error { return nil })
	c, _ := newClient(t, h, func(cfg *core.Config) { cfg.WorkerID = "node-1" })
	ctx := context.Background()
	if ws, err := c.ListWorkers(ctx); err != nil || len(ws) != 0 {
		t.Fatalf("ListWorkers before Start = %v, %v", ws, err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	ws, err := c.ListWorkers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 1 || ws[0].ID != "node-1" || len(ws[0].Queues) != 1 || ws[0].Queues[0] != core.DefaultQueue {
		t.Fatalf("ListWorkers = %+v", ws)
	}
}
