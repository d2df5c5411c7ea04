package prometheus

import (
	"context"
	"sync"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	prom "github.com/prometheus/client_golang/prometheus"
)

// gaugeFreshness is how old the latest gauge of a queue's history may be
// for a scrape to report it: a few sampling periods (core.HistoryGaugeEvery)
// and a maintenance round. Older gauges mean no node samples the store
// any more, and are left out rather than reported stale.
const gaugeFreshness = 4 * core.HistoryGaugeEvery

// historyCache shares the reads of the queue history between scrapes:
// one read of the totals and of the recent buckets serves every scrape
// for MaxAge (scrapes that come meanwhile wait for the read in flight).
type historyCache struct {
	h contract.QueueHistory

	mu      sync.Mutex
	at      time.Time
	have    bool
	totals  []contract.QueueTotals
	buckets []contract.QueueBucket
}

// read returns the totals and the buckets of every queue since
// now − gaugeFreshness, from a read at most maxAge old.
func (c *historyCache) read(ctx context.Context, now time.Time, maxAge time.Duration) ([]contract.QueueTotals, []contract.QueueBucket, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.have && maxAge > 0 && now.Sub(c.at) < maxAge && !now.Before(c.at) {
		return c.totals, c.buckets, nil
	}
	totals, err := c.h.QueueTotals(ctx)
	if err != nil {
		return nil, nil, err
	}
	buckets, err := c.h.QueueHistory(ctx, "", now.Add(-gaugeFreshness))
	if err != nil {
		return nil, nil, err
	}
	c.have, c.at, c.totals, c.buckets = true, now, totals, buckets
	return totals, buckets, nil
}

// collectHistory reports the cluster counters (the queue history's
// totals) and, per queue, the latest gauge of its history when it is
// at most gaugeFreshness old. The queues without a label of their own
// are reported as one, other: counters and due jobs summed, the oldest
// age the largest. It reports false when the store could not
// be read (the metrics are then left out of the scrape).
func (m *Metrics) collectHistory(ctx context.Context, ch chan<- prom.Metric) bool {
	now := m.opts.Now()
	totals, buckets, err := m.hist.read(ctx, now, m.opts.MaxAge)
	if err != nil {
		m.log.Warn("backlog: metrics scrape could not read the queue history", "err", err)
		return false
	}
	var other *contract.QueueTotals // the queues without a label of their own, summed
	for _, t := range totals {
		if m.queue(t.Queue) == otherLabel {
			if other == nil {
				other = &contract.QueueTotals{Queue: otherLabel}
			}
			other.Completed += t.Completed
			other.Failed += t.Failed
			continue
		}
		ch <- prom.MustNewConstMetric(m.clusterCompletedDesc, prom.CounterValue, float64(t.Completed), t.Queue)
		ch <- prom.MustNewConstMetric(m.clusterFailedDesc, prom.CounterValue, float64(t.Failed), t.Queue)
	}
	if other != nil {
		ch <- prom.MustNewConstMetric(m.clusterCompletedDesc, prom.CounterValue, float64(other.Completed), otherLabel)
		ch <- prom.MustNewConstMetric(m.clusterFailedDesc, prom.CounterValue, float64(other.Failed), otherLabel)
	}
	latest := map[string]contract.QueueBucket{}
	var order []string
	for _, b := range buckets {
		if !b.Gauge || now.Sub(b.GaugeAt) > gaugeFreshness {
			continue
		}
		prev, ok := latest[b.Queue]
		if !ok {
			order = append(order, b.Queue)
		}
		if !ok || b.GaugeAt.After(prev.GaugeAt) {
			latest[b.Queue] = b
		}
	}
	var (
		otherDepth  int64
		otherOldest time.Duration
		folded      bool
	)
	for _, q := range order {
		b := latest[q]
		if m.queue(q) == otherLabel {
			folded = true
			otherDepth += b.Depth
			otherOldest = max(otherOldest, b.OldestAge)
			continue
		}
		ch <- prom.MustNewConstMetric(m.dueDesc, prom.GaugeValue, float64(b.Depth), q)
		ch <- prom.MustNewConstMetric(m.oldestDesc, prom.GaugeValue, b.OldestAge.Seconds(), q)
	}
	if folded {
		ch <- prom.MustNewConstMetric(m.dueDesc, prom.GaugeValue, float64(otherDepth), otherLabel)
		ch <- prom.MustNewConstMetric(m.oldestDesc, prom.GaugeValue, otherOldest.Seconds(), otherLabel)
	}
	return true
}
