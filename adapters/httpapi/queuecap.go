package httpapi

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/backlogq/backlog/core"
)

// DefaultMaxQueues is the default of Config.MaxQueues: how many queues the
// store may hold before submissions may no longer create new ones.
const DefaultMaxQueues = 1000

// queueGateMaxAge is how old a read of the store's queues may be for the
// queue cap to decide on a submission naming a queue it does not know.
const queueGateMaxAge = time.Second

// queueAdmitKeep is how long a queue admitted by a submission counts as
// existing without a read of the store showing it (its jobs may have been
// deleted, or the insert failed).
const queueAdmitKeep = time.Minute

// queueGate is what Config.MaxQueues checks submissions against: the
// queues of the store's last Stats read, plus those this server admitted
// since, so that a burst of submissions within one read cannot overshoot
// the cap.
type queueGate struct {
	once    sync.Once
	allowed map[string]bool // Config.AllowedQueues as a set; nil: any

	mu       sync.Mutex
	cache    *core.StatsCache     // the gate's own: its reads precede inserts, so they must not answer GET /v1/queues
	stored   map[string]bool      // queues of the last Stats read
	admitted map[string]time.Time // queues admitted since, and when
}

// allowedSet returns Config.AllowedQueues as a set (nil when unset).
func (s *Server) allowedSet() map[string]bool {
	g := &s.queueGate
	g.once.Do(func() {
		if s.cfg.AllowedQueues == nil {
			return
		}
		g.allowed = make(map[string]bool, len(s.cfg.AllowedQueues))
		for _, q := range s.cfg.AllowedQueues {
			g.allowed[q] = true
		}
	})
	return g.allowed
}

// checkQueues refuses a submission (all of ps; item, when not nil, names
// the i-th item in messages) that names a queue outside Config.AllowedQueues (422
// queue-not-allowed), or that would create a queue while the store
// already holds Config.MaxQueues queues (422 too-many-queues). Nothing of
// a refused submission is inserted. The store's queues are read through
// a StatsCache of the gate's own (at most queueGateMaxAge old), only when
// a submission names a queue this server does not know.
func (s *Server) checkQueues(ctx context.Context, ps []core.InsertParams, name func(int) string) error {
	item := func(i int) string {
		if name != nil {
			return name(i)
		}
		return ""
	}
	if allowed := s.allowedSet(); allowed != nil {
		for i, p := range ps {
			if !allowed[p.Queue] {
				return newProblem(SlugQueueNotAllowed, fmt.Sprintf("%squeue %q is not among the queues this server accepts jobs for (%d configured); nothing was inserted", item(i), p.Queue, len(allowed)))
			}
		}
	}
	limit := s.cfg.MaxQueues
	if limit == 0 {
		limit = DefaultMaxQueues
	}
	if limit < 0 {
		return nil
	}
	g := &s.queueGate
	now := time.Now()
	fresh := func() []int { // items naming a queue not known here; g.mu held
		var out []int
		for i, p := range ps {
			if g.stored[p.Queue] {
				continue
			}
			if at, ok := g.admitted[p.Queue]; ok && now.Sub(at) < queueAdmitKeep {
				continue
			}
			out = append(out, i)
		}
		return out
	}
	g.mu.Lock()
	news := fresh()
	if g.cache == nil {
		g.cache = core.NewStatsCache(s.st)
	}
	cache := g.cache
	g.mu.Unlock()
	if len(news) == 0 {
		return nil
	}
	// Read without holding g.mu (a scan of every job on the SQL stores):
	// submissions to known queues go on meanwhile, and concurrent
	// readers share one read through the cache.
	stats, err := cache.Stats(ctx, queueGateMaxAge)
	if err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stored = make(map[string]bool, len(stats))
	for _, q := range stats {
		g.stored[q.Queue] = true
	}
	for q, at := range g.admitted {
		if g.stored[q] || now.Sub(at) >= queueAdmitKeep {
			delete(g.admitted, q)
		}
	}
	news = fresh()
	names := map[string]bool{}
	for _, i := range news {
		names[ps[i].Queue] = true
	}
	if have := len(g.stored) + len(g.admitted); have+len(names) > limit {
		i := news[0]
		return newProblem(SlugTooManyQueues, fmt.Sprintf("%squeue %q does not exist, and the store holds %d queues: submissions may create queues up to %d in all; nothing was inserted", item(i), ps[i].Queue, have, limit))
	}
	if g.admitted == nil {
		g.admitted = map[string]time.Time{}
	}
	for q := range names {
		g.admitted[q] = now
	}
	return nil
}
