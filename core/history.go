package core

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

// HistoryRetention is how long queue history is kept: every maintenance
// round deletes the buckets (see QueueHistory) whose minute is older.
const HistoryRetention = 24 * time.Hour

// HistoryGaugeEvery is the least time between two gauge samples (due jobs
// and the oldest one's age per queue, read with QueueHistory.DueJobs) of
// one node. Every node samples at this pace, so a bucket's gauge is the
// latest sample of its minute, from whichever node took it.
const HistoryGaugeEvery = 15 * time.Second

// historyFlushTimeout bounds the last write of queue history when a
// client stops.
const historyFlushTimeout = 5 * time.Second

// FailedAttempt reports whether e reports an attempt that failed: a
// retry (EventJobRetried) or a discard other than of a job whose worker
// was lost (EventJobDiscarded with a Reason other than ReasonWorkerLost:
// no attempt reported a failure then). It is what the failed counts of
// the queue history and of backlog_jobs_failed_total count.
func FailedAttempt(e Event) bool {
	switch e.Kind {
	case EventJobRetried:
		return true
	case EventJobDiscarded:
		return e.Reason != ReasonWorkerLost
	}
	return false
}

// historyKey is one queue's minute (Unix seconds of its start).
type historyKey struct {
	queue  string
	minute int64
}

// historyCounts are the completions and failed attempts counted in one
// bucket and not yet written.
type historyCounts struct{ completed, failed int64 }

// history is a node's part of the queue history (QueueHistory): the
// counts of the events its client reported since the last write, per
// queue and minute, and when it last sampled the gauges. It is safe for
// concurrent use.
type history struct {
	st     contract.QueueHistory
	queues []string // the queues this node works: sampled even when empty

	mu      sync.Mutex
	pending map[historyKey]historyCounts
	// seen holds the queues counted since the last gauge sample, which
	// that sample covers even when they have no due job.
	seen map[string]bool

	// write serialises writes (maintenance rounds, the last write at
	// Stop), so counts handed back by a failed write are never written
	// twice.
	write sync.Mutex
	// gaugedAt is when this node last wrote gauges; gauged the queues it
	// wrote a non-zero depth for then, which get a zero once they have
	// no due job. Both are guarded by write.
	gaugedAt time.Time
	gauged   map[string]bool
}

func newHistory(st contract.QueueHistory, queues []string) *history {
	return &history{st: st, queues: queues, pending: map[historyKey]historyCounts{}, seen: map[string]bool{}, gauged: map[string]bool{}}
}

// observe counts e when it is a completion or a failed attempt, in the
// minute of e.At (now when e.At is zero).
func (h *history) observe(e Event, now time.Time) {
	failed := FailedAttempt(e)
	if e.Kind != EventJobCompleted && !failed {
		return
	}
	queue := e.Queue
	if e.Job != nil {
		queue = e.Job.Queue
	}
	if queue == "" {
		return
	}
	at := e.At
	if at.IsZero() {
		at = now
	}
	k := historyKey{queue, contract.HistoryMinute(at).Unix()}
	h.mu.Lock()
	c := h.pending[k]
	if failed {
		c.failed++
	} else {
		c.completed++
	}
	h.pending[k] = c
	h.seen[queue] = true
	h.mu.Unlock()
}

// take empties the pending counts and returns them, and with gauge the
// queues counted since the last gauge sample.
func (h *history) take(gauge bool) (map[historyKey]historyCounts, map[string]bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var seen map[string]bool
	if gauge {
		seen, h.seen = h.seen, map[string]bool{}
	}
	if len(h.pending) == 0 {
		return nil, seen
	}
	out := h.pending
	h.pending = map[historyKey]historyCounts{}
	return out, seen
}

// giveBack returns counts a failed write did not store, to be written
// with the next ones, and the queues seen that its gauge sample covered.
func (h *history) giveBack(counts map[historyKey]historyCounts, seen map[string]bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for q := range seen {
		h.seen[q] = true
	}
	for k, c := range counts {
		p := h.pending[k]
		p.completed += c.completed
		p.failed += c.failed
		h.pending[k] = p
	}
}

// record writes the pending counts and, when gauge is set, a gauge
// sample of every queue with due jobs at now, and a zero for the other
// queues this node knows of (those it works, those it counted since its
// last sample, and those it last sampled as non-zero), in one
// AddQueueHistory. Counts it could not write are kept for the next
// call: none is lost or written twice. It reports what failed, or else
// the store call it made, and "" when it made none (no counts, no gauge
// due).
func (h *history) record(ctx context.Context, now time.Time, gauge bool) (string, error) {
	h.write.Lock()
	defer h.write.Unlock()
	counts, seen := h.take(gauge)
	var samples []contract.QueueSample
	for _, k := range slices.SortedFunc(maps.Keys(counts), func(a, b historyKey) int {
		if a.queue != b.queue {
			if a.queue < b.queue {
				return -1
			}
			return 1
		}
		return int(a.minute - b.minute)
	}) {
		c := counts[k]
		samples = append(samples, contract.QueueSample{Queue: k.queue, At: time.Unix(k.minute, 0).UTC(), Completed: c.completed, Failed: c.failed})
	}
	var (
		gauged map[string]bool
		due    []contract.QueueDue
		dueErr error
	)
	if gauge {
		// Without the gauge the counts still go: a slow or failing read
		// of the due jobs must not hold them back.
		if due, dueErr = h.st.DueJobs(ctx, now); dueErr != nil {
			h.giveBack(nil, seen)
			gauge = false
		}
	}
	if gauge {
		gauged = map[string]bool{}
		sampled := map[string]bool{}
		for _, d := range due {
			age := max(now.Sub(d.OldestRunAt), 0)
			samples = append(samples, contract.QueueSample{Queue: d.Queue, At: now, Gauge: true, Depth: d.Count, OldestAge: age})
			sampled[d.Queue] = true
			gauged[d.Queue] = d.Count > 0
		}
		zero := func(q string) {
			if !sampled[q] {
				sampled[q] = true
				samples = append(samples, contract.QueueSample{Queue: q, At: now, Gauge: true})
			}
		}
		for _, q := range h.queues {
			zero(q)
		}
		for _, q := range slices.Sorted(maps.Keys(seen)) {
			zero(q)
		}
		for _, q := range slices.Sorted(maps.Keys(h.gauged)) {
			zero(q)
		}
	}
	what := ""
	if dueErr != nil || gauge {
		what = "read due jobs for the queue history"
	}
	if len(samples) > 0 {
		if err := h.st.AddQueueHistory(ctx, samples); err != nil {
			if !gauge {
				seen = nil // already given back, or not taken
			}
			h.giveBack(counts, seen)
			return "write the queue history", err
		}
		what = "write the queue history"
	}
	if gauge {
		h.gaugedAt, h.gauged = now, gauged
	}
	if dueErr != nil {
		return "read due jobs for the queue history", dueErr
	}
	return what, nil
}

// gaugeDue reports whether the node's last gauge sample is
// HistoryGaugeEvery old (or there was none).
func (h *history) gaugeDue(now time.Time) bool {
	h.write.Lock()
	defer h.write.Unlock()
	return h.gaugedAt.IsZero() || now.Sub(h.gaugedAt) >= HistoryGaugeEvery || now.Before(h.gaugedAt)
}

// maintainHistory is the queue history's part of a maintenance round:
// write this node's counts (and a gauge sample every HistoryGaugeEvery),
// then delete buckets older than HistoryRetention. It does nothing on a
// store that is not a QueueHistory.
func (c *Client) maintainHistory(ctx context.Context, now time.Time) {
	h := c.history
	if h == nil {
		return
	}
	// A round with nothing to write and no gauge due makes no store call:
	// it says nothing about whether the store is reachable.
	if what, err := h.record(ctx, now, h.gaugeDue(now)); what != "" {
		c.maintErr(ctx, what, err)
	}
	before := now.Add(-HistoryRetention)
	c.repeat(ctx, "prune queue history", func() (int, error) {
		return h.st.PruneQueueHistory(ctx, before, maintenanceBatch)
	})
}

// flushHistory writes the counts left when the client stops (after every
// outcome was written and reported), without a gauge sample. A failure
// is logged: those counts are lost with the process.
func (c *Client) flushHistory(ctx context.Context) {
	h := c.history
	if h == nil {
		return
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), historyFlushTimeout)
	defer cancel()
	if what, err := h.record(fctx, c.clock.Now(), false); err != nil {
		c.log.Warn("backlog: "+what+" at stop", "err", err)
	}
}
