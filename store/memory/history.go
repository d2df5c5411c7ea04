package memory

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/core/storekit"
)

var _ contract.QueueHistory = (*Store)(nil)

// queueHistory is the in-memory queue history: buckets keyed by queue
// and minute (a SQL store's table with that primary key) and totals per
// queue (a second table keyed by queue). The zero value is empty.
type queueHistory struct {
	buckets map[bucketKey]*contract.QueueBucket
	totals  map[string]*contract.QueueTotals
}

// bucketKey is one queue's minute, in Unix seconds.
type bucketKey struct {
	queue  string
	minute int64
}

// AddQueueHistory implements contract.QueueHistory: under the store's mutex,
// each merged sample adds its counts to its bucket and its queue's
// totals, and replaces the bucket's gauge unless that one came from a
// later sample.
func (s *Store) AddQueueHistory(ctx context.Context, samples []contract.QueueSample) error {
	if err := storekit.CheckQueueSamples(samples); err != nil {
		return err
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	h := &s.history
	if h.buckets == nil {
		h.buckets, h.totals = map[bucketKey]*contract.QueueBucket{}, map[string]*contract.QueueTotals{}
	}
	for _, x := range storekit.MergeQueueSamples(samples) {
		minute := contract.HistoryMinute(x.At)
		k := bucketKey{x.Queue, minute.Unix()}
		b := h.buckets[k]
		if b == nil {
			b = &contract.QueueBucket{Queue: x.Queue, Minute: minute}
			h.buckets[k] = b
		}
		b.Completed += x.Completed
		b.Failed += x.Failed
		if x.Gauge && (!b.Gauge || !x.At.Before(b.GaugeAt)) {
			b.Gauge, b.GaugeAt, b.Depth, b.OldestAge = true, x.At, x.Depth, x.OldestAge
		}
		t := h.totals[x.Queue]
		if t == nil {
			t = &contract.QueueTotals{Queue: x.Queue}
			h.totals[x.Queue] = t
		}
		t.Completed += x.Completed
		t.Failed += x.Failed
	}
	return nil
}

// QueueHistory implements contract.QueueHistory.
func (s *Store) QueueHistory(ctx context.Context, queue string, since time.Time) ([]contract.QueueBucket, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	from := contract.HistoryMinute(since)
	var out []contract.QueueBucket
	for _, b := range s.history.buckets {
		if (queue == "" || b.Queue == queue) && !b.Minute.Before(from) {
			out = append(out, *b)
		}
	}
	slices.SortFunc(out, func(a, b contract.QueueBucket) int {
		return cmp.Or(cmp.Compare(a.Queue, b.Queue), a.Minute.Compare(b.Minute))
	})
	return out, nil
}

// QueueTotals implements contract.QueueHistory.
func (s *Store) QueueTotals(ctx context.Context) ([]contract.QueueTotals, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	out := make([]contract.QueueTotals, 0, len(s.history.totals))
	for _, q := range slices.Sorted(maps.Keys(s.history.totals)) {
		out = append(out, *s.history.totals[q])
	}
	return out, nil
}

// DueJobs implements contract.QueueHistory from the per-queue pending index
// (pending jobs only, never the finished ones).
func (s *Store) DueJobs(ctx context.Context, now time.Time) ([]contract.QueueDue, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []contract.QueueDue
	for _, q := range slices.Sorted(maps.Keys(s.pending)) {
		d := contract.QueueDue{Queue: q}
		for _, e := range s.pending[q].entries {
			j := e.job
			if j.RunAt.After(now) {
				continue
			}
			if d.Count == 0 || j.RunAt.Before(d.OldestRunAt) {
				d.OldestRunAt = j.RunAt
			}
			d.Count++
		}
		if d.Count > 0 {
			out = append(out, d)
		}
	}
	return out, nil
}

// PruneQueueHistory implements contract.QueueHistory: up to limit buckets
// before `before`, oldest first.
func (s *Store) PruneQueueHistory(ctx context.Context, before time.Time, limit int) (int, error) {
	if limit < 1 {
		return 0, errors.New("memory: PruneQueueHistory needs a limit of at least 1")
	}
	if err := s.lock(ctx); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	var old []bucketKey
	for k, b := range s.history.buckets {
		if b.Minute.Before(before) {
			old = append(old, k)
		}
	}
	slices.SortFunc(old, func(a, b bucketKey) int {
		return cmp.Or(cmp.Compare(a.minute, b.minute), cmp.Compare(a.queue, b.queue))
	})
	if len(old) > limit {
		old = old[:limit]
	}
	for _, k := range old {
		delete(s.history.buckets, k)
	}
	return len(old), nil
}
