package core_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/memory"
)

// countingStore counts the claims that reach the store.
type countingStore struct {
	contract.Store
	claims atomic.Int64
}

func (s *countingStore) Claim(ctx context.Context, p contract.ClaimParams) ([]*core.Job, error) {
	s.claims.Add(1)
	return s.Store.Claim(ctx, p)
}

func enqueueN(t *testing.T, c *core.Client, kind, queue string, n int) []core.InsertResult {
	t.Helper()
	var ps []core.InsertParams
	for range n {
		p, err := core.NewInsertRaw(kind, nil, &core.Options{Queue: queue}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	res, err := c.EnqueueMany(context.Background(), ps)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// With ClaimAhead a node holds claimed jobs beyond its slots, but never
// runs more than MaxWorkers at once, and every job completes.
func TestClaimAheadHoldsJobsButRunsAtMostMaxWorkers(t *testing.T) {
	var cur, peak atomic.Int32
	release := make(chan struct{})
	h := core.NewHandlers()
	h.HandleRaw("work", func(ctx context.Context, j *core.Job) error {
		n := cur.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		<-release
		cur.Add(-1)
		return nil
	})
	c, st := newClient(t, h, func(c *core.Config) {
		c.Queues = map[string]core.QueueConfig{"q": {MaxWorkers: 2, ClaimAhead: 3}}
		c.Retention = &core.Retention{Completed: time.Hour}
	})
	res := enqueueN(t, c, "work", "q", 20)
	_ = c.Start(context.Background())
	ctx := context.Background()
	// Two run, three wait claimed: five running in the store.
	deadline := time.Now().Add(5 * time.Second)
	for {
		held, err := st.List(ctx, core.ListParams{Queue: "q", States: []core.State{core.StateRunning}, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if len(held) == 5 {
			break
		}
		if len(held) > 5 || time.Now().After(deadline) {
			t.Fatalf("want 5 jobs held (2 running, 3 waiting), have %d", len(held))
		}
		time.Sleep(2 * time.Millisecond)
	}
	// Both slots' handlers must have started before they are released:
	// five held in the store says only that the jobs were claimed (on a
	// loaded machine the second handler may not have begun yet, and then
	// never overlaps the first).
	for cur.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d handlers running after the claims; want 2", cur.Load())
		}
		time.Sleep(2 * time.Millisecond)
	}
	close(release)
	for _, r := range res {
		waitState(t, st, r.Job.ID, core.StateCompleted)
	}
	if peak.Load() != 2 {
		t.Fatalf("ran %d jobs at once with MaxWorkers 2", peak.Load())
	}
}

// A stopping node hands back the jobs it holds waiting for a slot: unrun,
// available again, no attempt used, no error entry.
func TestStopHandsBackJobsClaimedAhead(t *testing.T) {
	started := make(chan struct{}, 10)
	release := make(chan struct{})
	h := core.NewHandlers()
	h.HandleRaw("work", func(ctx context.Context, j *core.Job) error {
		started <- struct{}{}
		<-release
		return nil
	})
	c, st := newClient(t, h, func(c *core.Config) {
		c.Queues = map[string]core.QueueConfig{"q": {MaxWorkers: 1, ClaimAhead: 4}}
		c.Retention = &core.Retention{Completed: time.Hour}
	})
	res := enqueueN(t, c, "work", "q", 5)
	ctx := context.Background()
	_ = c.Start(ctx)
	<-started
	deadline := time.Now().Add(5 * time.Second)
	for {
		held, _ := st.List(ctx, core.ListParams{Queue: "q", States: []core.State{core.StateRunning}, Limit: 100})
		if len(held) == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("want all 5 jobs held, have %d", len(held))
		}
		time.Sleep(2 * time.Millisecond)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- c.Stop(ctx) }()
	// The soft stop waits for the running job; the waiting ones are
	// handed back meanwhile, not started.
	time.Sleep(50 * time.Millisecond)
	close(release)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	completed := 0
	for _, r := range res {
		j, err := st.Get(ctx, r.Job.ID)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case j.State == core.StateCompleted:
			completed++
		case j.State == core.StateAvailable && j.Attempt == 0 && len(j.Errors) == 0:
		default:
			t.Fatalf("job %d after stop: state %s attempt %d errors %v", j.ID, j.State, j.Attempt, j.Errors)
		}
	}
	if completed != 1 {
		t.Fatalf("%d jobs ran, want only the one started before the stop", completed)
	}
}

// A claim that finds the queue empty waits for a wake-up or the poll: an
// idle queue does not claim in a loop.
func TestIdleQueueDoesNotSpin(t *testing.T) {
	for _, ahead := range []int{0, 10} {
		h := core.NewHandlers()
		h.HandleRaw("work", func(ctx context.Context, j *core.Job) error { return nil })
		cs := &countingStore{Store: memory.New()}
		c2, err := core.NewClient(cs, core.Config{
			Queues:       map[string]core.QueueConfig{"q": {MaxWorkers: 10, ClaimAhead: ahead}},
			Handlers:     h,
			Logger:       quietLogger(),
			PollInterval: time.Hour, MaintenanceInterval: -1,
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		_ = c2.Start(ctx)
		res := enqueueN(t, c2, "work", "q", 3)
		for _, r := range res {
			waitState(t, cs, r.Job.ID, core.StateCompleted)
		}
		time.Sleep(100 * time.Millisecond)
		before := cs.claims.Load()
		time.Sleep(200 * time.Millisecond)
		if n := cs.claims.Load() - before; n > 2 {
			t.Fatalf("claim ahead %d: an idle queue claimed %d times in 200 ms", ahead, n)
		}
		_ = c2.Stop(ctx)
	}
}

// A job claimed ahead and cancelled while it waits for a slot never
// reaches its handler.
func TestClaimedAheadJobCancelledWhileWaitingDoesNotRun(t *testing.T) {
	release := make(chan struct{})
	ran := make(chan int64, 10)
	h := core.NewHandlers()
	h.HandleRaw("work", func(ctx context.Context, j *core.Job) error {
		ran <- j.ID
		<-release
		return nil
	})
	c, st := newClient(t, h, func(c *core.Config) {
		c.Queues = map[string]core.QueueConfig{"q": {MaxWorkers: 1, ClaimAhead: 1}}
		c.Retention = &core.Retention{Completed: time.Hour}
	})
	res := enqueueN(t, c, "work", "q", 2)
	ctx := context.Background()
	_ = c.Start(ctx)
	first := <-ran
	waiting := res[0].Job.ID
	if waiting == first {
		waiting = res[1].Job.ID
	}
	waitState(t, st, waiting, core.StateRunning) // claimed ahead
	if _, err := c.CancelJob(ctx, waiting); err != nil {
		t.Fatal(err)
	}
	close(release)
	waitState(t, st, first, core.StateCompleted)
	time.Sleep(50 * time.Millisecond)
	select {
	case id := <-ran:
		t.Fatalf("job %d ran after it was cancelled while waiting", id)
	default:
	}
	if j := waitState(t, st, waiting, core.StateCancelled); j.Attempt != 1 {
		t.Fatalf("cancelled job: %+v", j)
	}
}
