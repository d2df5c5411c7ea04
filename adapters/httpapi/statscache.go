package httpapi

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backlogq/backlog/core"
)

// statsCache shares Store.Stats between the requests of one server: an
// answer younger than ttl is reused, and requests arriving while a read is
// in flight wait for it instead of starting their own. Stats counts every
// job (a full scan on the SQL stores: ~170 ms at a million rows on
// PostgreSQL here), and every open dashboard polls it, so without sharing
// the database's load would grow with the number of browser tabs.
type statsCache struct {
	st  core.Store
	ttl time.Duration // ≤ 0: no reuse (in-flight reads are still shared)
	now func() time.Time

	mu      sync.Mutex
	at      time.Time
	stats   []core.QueueStats
	flight  chan struct{} // closed when the read in flight ends
	flightR []core.QueueStats
	flightE error
	waiters atomic.Int32 // requests waiting for a read in flight (for tests)
}

func newStatsCache(st core.Store, ttl time.Duration, now func() time.Time) *statsCache {
	return &statsCache{st: st, ttl: ttl, now: now}
}

// get returns queue stats at most ttl old (fresh ones when fresh is set,
// after a pause or resume). The caller must not modify the result.
func (c *statsCache) get(ctx context.Context, fresh bool) ([]core.QueueStats, error) {
	c.mu.Lock()
	if !fresh && c.stats != nil && c.ttl > 0 && c.now().Sub(c.at) < c.ttl {
		s := c.stats
		c.mu.Unlock()
		return s, nil
	}
	if fresh {
		c.stats = nil
	}
	if ch := c.flight; ch != nil && !fresh {
		c.mu.Unlock()
		c.waiters.Add(1)
		defer c.waiters.Add(-1)
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.flightR, c.flightE
	}
	ch := make(chan struct{})
	c.flight = ch
	c.mu.Unlock()

	// The read is shared: it must not end with the first caller's request.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	stats, err := c.st.Stats(rctx)
	cancel()

	c.mu.Lock()
	c.flightR, c.flightE = stats, err
	if c.flight == ch {
		c.flight = nil
	}
	if err == nil {
		c.stats, c.at = stats, c.now()
	}
	c.mu.Unlock()
	close(ch)
	return stats, err
}
