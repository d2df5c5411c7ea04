package prometheus_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bprom "github.com/backlogq/backlog/adapters/prometheus"
	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/internal/teststores"
	prom "github.com/prometheus/client_golang/prometheus"
)

// countingStore is a real store counting its Stats and Workers reads.
type countingStore struct {
	contract.Store
	stats, workers atomic.Int32
}

func (s *countingStore) Stats(ctx context.Context) ([]core.QueueStats, error) {
	s.stats.Add(1)
	time.Sleep(20 * time.Millisecond) // a scan takes a while: scrapes overlap it
	return s.Store.Stats(ctx)
}

func (s *countingStore) Workers(ctx context.Context) ([]core.WorkerInfo, error) {
	s.workers.Add(1)
	return s.Store.Workers(ctx)
}

// TestConcurrentScrapesShareOneRead: 16 scrapers scraping in a loop read
// the store at most once per MaxAge, not once per scrape, and the shared
// cache serves the HTTP API's readers too.
func TestConcurrentScrapesShareOneRead(t *testing.T) {
	st := &countingStore{Store: teststores.SQLite(t)}
	now := contract.UTC(time.Now())
	if _, err := st.Insert(t.Context(), now, []core.InsertParams{{Queue: "q", Kind: "k", Args: []byte(`{}`), Priority: 5, MaxAttempts: 1, RunAt: now}}); err != nil {
		t.Fatal(err)
	}
	cache := core.NewStatsCache(st)
	const maxAge = 300 * time.Millisecond
	m := bprom.New(st, bprom.Options{StatsCache: cache, MaxAge: maxAge})
	reg := prom.NewRegistry()
	reg.MustRegister(m)

	const scrapers, run = 16, 900 * time.Millisecond
	var scrapes atomic.Int32
	var wg sync.WaitGroup
	start := time.Now()
	for range scrapers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(start) < run {
				if _, err := reg.Gather(); err != nil {
					t.Error(err)
					return
				}
				scrapes.Add(1)
			}
		}()
	}
	wg.Wait()
	// One read per started MaxAge window at most (plus the first).
	most := int32(run/maxAge) + 2
	if n := st.stats.Load(); n > most || n < 1 {
		t.Fatalf("%d scrapes in %s read Stats %d times; want between 1 and %d (one per MaxAge %s)", scrapes.Load(), run, n, most, maxAge)
	}
	if n := st.workers.Load(); n > most {
		t.Fatalf("%d scrapes read Workers %d times; want at most %d", scrapes.Load(), n, most)
	}
	if scrapes.Load() < scrapers*2 {
		t.Fatalf("only %d scrapes ran", scrapes.Load())
	}
	t.Logf("%d scrapes, %d Stats reads, %d Workers reads", scrapes.Load(), st.stats.Load(), st.workers.Load())

	// Another reader of the same cache (the API's queue list) accepting
	// the same age reuses the scrapes' answer.
	before := st.stats.Load()
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
	if _, err := cache.Stats(t.Context(), maxAge); err != nil {
		t.Fatal(err)
	}
	if n := st.stats.Load() - before; n > 1 {
		t.Fatalf("a scrape and an API read right after it read Stats %d times; want at most 1", n)
	}
}

// TestScrapesWithoutACacheStillShare: a Metrics given only a store keeps a
// cache of its own, so back-to-back scrapes within DefaultMaxAge read
// once.
func TestScrapesWithoutACacheStillShare(t *testing.T) {
	st := &countingStore{Store: teststores.Memory(t)}
	reg := prom.NewRegistry()
	reg.MustRegister(bprom.New(st, bprom.Options{}))
	for range 10 {
		if _, err := reg.Gather(); err != nil {
			t.Fatal(err)
		}
	}
	if n := st.stats.Load(); n != 1 {
		t.Fatalf("10 scrapes within %s read Stats %d times; want 1", bprom.DefaultMaxAge, n)
	}
}
