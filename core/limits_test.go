package core_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/store/memory"
)

// TestQueueLimitsSeededOnceAndSetThrough checks that QueueConfig.Limits
// reach the store at Start only while the queue has none (the database
// wins over a later node's configuration), and that Client.SetQueueLimits
// and QueueLimits pass through to the store.
func TestQueueLimitsSeededOnceAndSetThrough(t *testing.T) {
	st := memory.New()
	start := func(max int) *core.Client {
		t.Helper()
		c, err := core.NewClient(st, core.Config{
			Queues:              map[string]core.QueueConfig{"q": {MaxWorkers: 1, Limits: &core.QueueLimits{MaxRunning: max}}},
			Handlers:            core.NewHandlers(),
			Logger:              quietLogger(),
			MaintenanceInterval: -1,
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = c.Stop(ctx)
		})
		return c
	}
	first := start(2)
	if l, err := first.QueueLimits(t.Context(), "q"); err != nil || l.MaxRunning != 2 {
		t.Fatalf("QueueLimits after the first Start: %+v, %v; want MaxRunning 2 from the configuration", l, err)
	}
	second := start(5)
	if l, _ := second.QueueLimits(t.Context(), "q"); l.MaxRunning != 2 {
		t.Fatalf("QueueLimits after a second node started with MaxRunning 5: %+v; want 2 (the database wins)", l)
	}
	if err := second.SetQueueLimits(t.Context(), "q", core.QueueLimits{MaxRunningPerPartition: 1}); err != nil {
		t.Fatal(err)
	}
	if l, _ := first.QueueLimits(t.Context(), "q"); l.MaxRunning != 0 || l.MaxRunningPerPartition != 1 {
		t.Fatalf("QueueLimits after SetQueueLimits: %+v; want only MaxRunningPerPartition 1", l)
	}
	if err := first.SetQueueLimits(t.Context(), "q", core.QueueLimits{MaxRunning: -1}); !errors.Is(err, core.ErrInvalidJob) {
		t.Fatalf("SetQueueLimits with a negative limit: %v; want ErrInvalidJob", err)
	}
	if _, err := core.NewClient(st, core.Config{Queues: map[string]core.QueueConfig{"q": {Limits: &core.QueueLimits{MaxRunningPerKind: map[string]int{"": 1}}}}}); !errors.Is(err, core.ErrInvalidJob) {
		t.Fatalf("NewClient with a per-kind limit on an empty kind: %v; want ErrInvalidJob", err)
	}
}

// TestQueueLimitsBoundTwoNodes runs two clients on one store, each with
// room for 5 jobs at once, under MaxRunning 2 and at most 1 running per
// partition key, and checks the handlers never run more at once.
func TestQueueLimitsBoundTwoNodes(t *testing.T) {
	st := memory.New()
	var (
		mu             sync.Mutex
		running, peak  int
		perPart        = map[string]int{}
		partPeak, done atomic.Int64
	)
	h := core.NewHandlers()
	h.HandleRaw("work", func(ctx context.Context, j *core.Job) error {
		mu.Lock()
		running++
		perPart[j.PartitionKey]++
		peak = max(peak, running)
		partPeak.Store(max(partPeak.Load(), int64(perPart[j.PartitionKey])))
		mu.Unlock()
		time.Sleep(5 * time.Millisecond)
		mu.Lock()
		running--
		perPart[j.PartitionKey]--
		mu.Unlock()
		done.Add(1)
		return nil
	})
	var clients []*core.Client
	for range 2 {
		c, err := core.NewClient(st, core.Config{
			Queues:              map[string]core.QueueConfig{"q": {MaxWorkers: 5, Limits: &core.QueueLimits{MaxRunning: 2, MaxRunningPerPartition: 1}}},
			Handlers:            h,
			Logger:              quietLogger(),
			PollInterval:        5 * time.Millisecond,
			MaintenanceInterval: -1,
		})
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
	}
	for _, c := range clients {
		if err := c.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = c.Stop(ctx)
		})
	}
	const n = 30
	for i := range n {
		part := []string{"a", "b", "c"}[i%3]
		if _, err := clients[i%2].EnqueueRaw(t.Context(), "work", nil, &core.Options{Queue: "q", PartitionKey: part}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for done.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d jobs done after 20 s", done.Load(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if peak > 2 || partPeak.Load() > 1 {
		t.Fatalf("at most %d jobs ran at once (%d of one partition); the limits are MaxRunning 2 and 1 per partition", peak, partPeak.Load())
	}
	if peak < 2 {
		t.Logf("peak concurrency %d (the limit allows 2)", peak)
	}
}
