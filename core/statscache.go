package core

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

// StatsReadTimeout bounds one shared read of a StatsCache. The read is not
// tied to the context of the caller that started it (others may be
// waiting for it), so it has a deadline of its own.
const StatsReadTimeout = 30 * time.Second

// StatsCache shares Store.Stats and Store.Workers between the readers of
// one process: the HTTP API's queue list, the Prometheus gauges, dashboards.
// Stats counts every job (a full scan on the SQL stores: about a second at
// a million jobs), so without sharing the database's load grows with the
// number of open dashboards and scrapers, and concurrent scans slow down
// everything else the database does.
//
// Each caller says how old an answer it accepts (maxAge, measured from the
// start of the read that produced it). A read in flight is always joined
// instead of starting a second one, so however many callers there are, at
// most one read of each kind runs at a time (FreshStats aside), and at most
// one starts per maxAge of the most demanding caller. Failed reads are not
// kept: the next caller reads again.
//
// The slices returned are shared between callers and must not be
// modified. A StatsCache is safe for concurrent use; create it with
// NewStatsCache.
type StatsCache struct {
	stats   sharedRead[[]QueueStats]
	workers sharedRead[[]WorkerInfo]
}

// NewStatsCache returns a cache over st.
func NewStatsCache(st contract.Store) *StatsCache {
	c := &StatsCache{}
	c.stats.read, c.stats.now = st.Stats, time.Now
	c.workers.read, c.workers.now = st.Workers, time.Now
	return c
}

// Stats returns Store.Stats from a read that started at most maxAge ago,
// or joins the read in flight, or starts a read. maxAge ≤ 0 reuses no
// finished read (a read in flight is still joined). ctx bounds only the
// caller's wait: the read itself goes on to its end (at most
// StatsReadTimeout) for the callers that come after.
func (c *StatsCache) Stats(ctx context.Context, maxAge time.Duration) ([]QueueStats, error) {
	return c.stats.get(ctx, maxAge, false)
}

// FreshStats reads Store.Stats anew, without joining a read that started
// before the call: for answers that must show a change the caller just
// made (a queue paused or resumed). Its result replaces the cached one,
// and callers of Stats arriving during it join it.
func (c *StatsCache) FreshStats(ctx context.Context) ([]QueueStats, error) {
	return c.stats.get(ctx, 0, true)
}

// Workers returns Store.Workers under the rules of Stats.
func (c *StatsCache) Workers(ctx context.Context, maxAge time.Duration) ([]WorkerInfo, error) {
	return c.workers.get(ctx, maxAge, false)
}

// Waiting returns how many callers wait for a read in flight, of either
// kind, the caller that started it included (for tests and diagnostics).
func (c *StatsCache) Waiting() int {
	return int(c.stats.waiters.Load() + c.workers.waiters.Load())
}

// sharedRead is one cached, shared read.
type sharedRead[T any] struct {
	read func(context.Context) (T, error)
	now  func() time.Time

	mu      sync.Mutex
	have    bool
	at      time.Time // start of the read that produced val
	val     T
	flight  *flight[T] // the read in flight, if any
	waiters atomic.Int32
}

// flight is a read in progress; done closes when val and err are set.
type flight[T any] struct {
	done chan struct{}
	val  T
	err  error
}

func (s *sharedRead[T]) get(ctx context.Context, maxAge time.Duration, fresh bool) (T, error) {
	s.mu.Lock()
	start := s.now()
	if !fresh && s.have && maxAge > 0 && start.Sub(s.at) < maxAge {
		v := s.val
		s.mu.Unlock()
		return v, nil
	}
	f := s.flight
	if f == nil || fresh {
		f = &flight[T]{done: make(chan struct{})}
		s.flight = f
		go s.run(ctx, f, start)
	}
	s.mu.Unlock()
	s.waiters.Add(1)
	defer s.waiters.Add(-1)
	select {
	case <-f.done:
		return f.val, f.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// run performs the read of f, started at start, and publishes it. The read
// is shared: it does not end with the context of the caller that started
// it, only at StatsReadTimeout.
func (s *sharedRead[T]) run(ctx context.Context, f *flight[T], start time.Time) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), StatsReadTimeout)
	f.val, f.err = s.read(rctx)
	cancel()

	s.mu.Lock()
	if s.flight == f {
		s.flight = nil
	}
	// A slower read that started earlier must not replace a newer answer.
	if f.err == nil && (!s.have || !start.Before(s.at)) {
		s.have, s.at, s.val = true, start, f.val
	}
	s.mu.Unlock()
	close(f.done)
}
