package httpapi

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/internal/teststores"
)

// countingStore is a real store that counts Stats calls and can hold them
// until released.
type countingStore struct {
	contract.Store
	calls atomic.Int32
	gate  chan struct{} // when set, Stats waits for it to close
}

func (s *countingStore) Stats(ctx context.Context) ([]core.QueueStats, error) {
	s.calls.Add(1)
	if s.gate != nil {
		<-s.gate
	}
	return s.Store.Stats(ctx)
}

// TestQueueCountsAreShared: GET /v1/queues reuses an answer younger than
// StatsCacheTTL, requests during a read share it, and pause/resume answer
// with fresh counts.
func TestQueueCountsAreShared(t *testing.T) {
	st := &countingStore{Store: teststores.SQLite(t)}
	// No queue cap: its own reads of the store's queues (see
	// TestQueueCapReadsAreItsOwn) would add to the count.
	h := newHarness(t, st, core.Config{}, Config{StatsCacheTTL: time.Hour, MaxQueues: -1})
	h.submit(map[string]any{"kind": "k"})

	var first struct{ Queues []QueueInfo }
	h.must(200, "GET", "/v1/queues", nil, &first)
	h.submit(map[string]any{"kind": "k"})
	var second struct{ Queues []QueueInfo }
	h.must(200, "GET", "/v1/queues", nil, &second)
	if n := st.calls.Load(); n != 1 {
		t.Fatalf("two GET /v1/queues within the TTL read Stats %d times; want 1", n)
	}
	if second.Queues[0].Counts[core.StateAvailable] != 1 {
		t.Fatalf("the reused answer has counts %v; want the first read's (1 available)", second.Queues[0].Counts)
	}
	var paused struct{ Queue QueueInfo }
	h.must(200, "POST", "/v1/queues/default/pause", nil, &paused)
	if !paused.Queue.Paused || paused.Queue.Counts[core.StateAvailable] != 2 {
		t.Fatalf("pause answered %+v; want fresh counts (2 available) and paused", paused.Queue)
	}
	var after struct{ Queues []QueueInfo }
	h.must(200, "GET", "/v1/queues", nil, &after)
	if !after.Queues[0].Paused {
		t.Fatalf("GET /v1/queues after a pause shows the queue running: the pause must refresh the shared answer")
	}

	// Concurrent requests while a read is in flight share it.
	gated := &countingStore{Store: teststores.SQLite(t), gate: make(chan struct{})}
	g := newHarness(t, gated, core.Config{}, Config{StatsCacheTTL: -1})
	var wg sync.WaitGroup
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r := g.do("GET", "/v1/queues", nil); r.status != 200 {
				t.Errorf("GET /v1/queues: %d %s", r.status, r.body)
			}
		}()
	}
	eventually(t, "one read in flight and five requests waiting for it", func() bool {
		return gated.calls.Load() == 1 && g.srv.stats.Waiting() == 5
	})
	close(gated.gate)
	wg.Wait()
	if n := gated.calls.Load(); n != 1 {
		t.Fatalf("5 concurrent GET /v1/queues read Stats %d times; requests during a read must share it", n)
	}
}
