package prometheus

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/backlogq/backlog/core/contract"

	prom "github.com/prometheus/client_golang/prometheus"

	"github.com/backlogq/backlog/core"
)

// rateCache reads the rate waits of the queues Stats names (two
// primary-key reads per queue: its limits, and its rate instants when it
// has a rate limit), at most once per MaxAge.
type rateCache struct {
	ql contract.QueueLimiter

	mu    sync.Mutex
	at    time.Time
	waits map[string][]core.RateWait
}

func (c *rateCache) get(ctx context.Context, queues []string, now time.Time, maxAge time.Duration) (map[string][]core.RateWait, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.waits != nil && maxAge > 0 && now.Sub(c.at) < maxAge {
		return c.waits, nil
	}
	out := map[string][]core.RateWait{}
	for _, q := range queues {
		w, err := core.QueueRateWaits(ctx, c.ql, q, now)
		if err != nil {
			return nil, err
		}
		if w != nil { // nil: no rate limit
			out[q] = w
		}
	}
	c.at, c.waits = now, out
	return out, nil
}

// rateScopes are the scopes rate waits are reported by: the label keeps
// partition keys (unbounded) out of the metrics' label values.
var rateScopes = []string{"queue", "kind", "partition"}

// rateScope returns the scope of a rate group.
func rateScope(group string) string {
	switch {
	case group == contract.RateGroupQueue:
		return "queue"
	case strings.HasPrefix(group, "kind:"):
		return "kind"
	}
	return "partition"
}

// collectRates sends, for every queue of stats (folded: foldStats) but
// other that has a rate limit, the longest wait
// and the number of groups waiting per scope; it reports false when the
// store could not be read.
func (m *Metrics) collectRates(ctx context.Context, ch chan<- prom.Metric, stats []core.QueueStats) bool {
	queues := make([]string, 0, len(stats))
	for _, q := range stats {
		if q.Queue != otherLabel { // the folded queues' limits are not read
			queues = append(queues, q.Queue)
		}
	}
	now := m.opts.Now()
	waits, err := m.rates.get(ctx, queues, now, m.opts.MaxAge)
	if err != nil {
		m.log.Warn("backlog: metrics scrape could not read rate limits", "err", err)
		return false
	}
	for q, ws := range waits {
		longest, count := map[string]float64{}, map[string]float64{}
		for _, w := range ws {
			s := rateScope(w.Group)
			count[s]++
			if d := w.NextStart.Sub(now).Seconds(); d > longest[s] {
				longest[s] = d
			}
		}
		for _, s := range rateScopes {
			ch <- prom.MustNewConstMetric(m.rateWaitDesc, prom.GaugeValue, longest[s], q, s)
			ch <- prom.MustNewConstMetric(m.rateGroupsDesc, prom.GaugeValue, count[s], q, s)
		}
	}
	return true
}
