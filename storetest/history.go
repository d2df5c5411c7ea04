package storetest

import (
	"sync"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

var historyTests = []test{
	{"history/counts-add-up", testHistoryCountsAdd},
	{"history/counts-add-across-handles", testHistoryCountsAcrossHandles},
	{"history/gauge-latest-sample-wins", testHistoryGaugeLastWriter},
	{"history/since-filters", testHistorySinceFilters},
	{"history/totals-only-grow", testHistoryTotals},
	{"history/due-jobs", testHistoryDueJobs},
	{"history/prune", testHistoryPrune},
	{"history/bad-samples-store-nothing", testHistoryBadSamples},
}

// history returns the store's contract.QueueHistory, skipping when it has
// none.
func (e *env) history(s contract.Store) contract.QueueHistory {
	e.Helper()
	h, ok := s.(contract.QueueHistory)
	if !ok {
		e.Skip("the store does not implement contract.QueueHistory")
	}
	return h
}

// addHistory calls AddQueueHistory and fails on error.
func (e *env) addHistory(h contract.QueueHistory, samples ...contract.QueueSample) {
	e.Helper()
	if err := h.AddQueueHistory(e.ctx, samples); err != nil {
		e.Fatalf("AddQueueHistory of %d sample(s): unexpected error: %v", len(samples), err)
	}
}

// buckets calls QueueHistory and checks the order of the answer.
func (e *env) buckets(h contract.QueueHistory, queue string, since time.Time) []contract.QueueBucket {
	e.Helper()
	got, err := h.QueueHistory(e.ctx, queue, since)
	if err != nil {
		e.Fatalf("QueueHistory(%q, %s): unexpected error: %v", queue, ts(since), err)
	}
	for i, b := range got {
		if queue != "" && b.Queue != queue {
			e.Fatalf("QueueHistory(%q) returned a bucket of queue %q", queue, b.Queue)
		}
		if !b.Minute.Equal(contract.HistoryMinute(b.Minute)) || b.Minute.Location() != time.UTC {
			e.Fatalf("QueueHistory returned a bucket at %s; want the start of a minute, in UTC", ts(b.Minute))
		}
		if i > 0 {
			p := got[i-1]
			if p.Queue > b.Queue || p.Queue == b.Queue && !p.Minute.Before(b.Minute) {
				e.Fatalf("QueueHistory lists bucket %s %s after %s %s; want one bucket per queue and minute, ordered by queue, then minute", b.Queue, ts(b.Minute), p.Queue, ts(p.Minute))
			}
		}
	}
	return got
}

// bucketAt returns the bucket of queue at minute, failing when there is
// none.
func (e *env) bucketAt(h contract.QueueHistory, queue string, minute time.Time) contract.QueueBucket {
	e.Helper()
	for _, b := range e.buckets(h, queue, minute) {
		if b.Minute.Equal(minute) {
			return b
		}
	}
	e.Fatalf("QueueHistory(%q) has no bucket at %s; samples were added to it", queue, ts(minute))
	return contract.QueueBucket{}
}

// minute is the suite's clock truncated to the minute.
func (e *env) minute() time.Time { return contract.HistoryMinute(e.now) }

func testHistoryCountsAdd(e *env) {
	h := e.history(e.s)
	m := e.minute()
	e.addHistory(h,
		contract.QueueSample{Queue: "hist", At: m.Add(5 * time.Second), Completed: 3, Failed: 1},
		contract.QueueSample{Queue: "hist", At: m.Add(50 * time.Second), Completed: 2},
		contract.QueueSample{Queue: "other", At: m, Failed: 7},
	)
	e.addHistory(h, contract.QueueSample{Queue: "hist", At: m.Add(59 * time.Second), Completed: 10, Failed: 4})
	e.addHistory(h, contract.QueueSample{Queue: "hist", At: m.Add(time.Minute), Completed: 1})
	b := e.bucketAt(h, "hist", m)
	if b.Completed != 15 || b.Failed != 5 {
		e.Fatalf("bucket hist %s holds completed %d, failed %d; want 15 and 5: every sample of the minute adds its counts (within a call and across calls)", ts(m), b.Completed, b.Failed)
	}
	if b.Gauge {
		e.Fatalf("bucket hist %s has a gauge (depth %d); no sample carried one", ts(m), b.Depth)
	}
	if n := e.bucketAt(h, "hist", m.Add(time.Minute)); n.Completed != 1 || n.Failed != 0 {
		e.Fatalf("bucket hist %s holds completed %d, failed %d; want 1 and 0: a sample counts in the minute containing its At", ts(n.Minute), n.Completed, n.Failed)
	}
	if o := e.bucketAt(h, "other", m); o.Completed != 0 || o.Failed != 7 {
		e.Fatalf("bucket other %s holds completed %d, failed %d; want 0 and 7: queues are counted apart", ts(m), o.Completed, o.Failed)
	}
	all := e.buckets(h, "", m)
	if len(all) != 3 {
		e.Fatalf("QueueHistory of every queue returned %d buckets; want 3 (hist twice, other once)", len(all))
	}
	// A time in another location names the same instant.
	est := time.FixedZone("UTC-5", -5*3600)
	e.addHistory(h, contract.QueueSample{Queue: "hist", At: m.Add(30 * time.Second).In(est), Completed: 1})
	if b := e.bucketAt(h, "hist", m); b.Completed != 16 {
		e.Fatalf("bucket hist %s holds completed %d after a sample whose At is in another location; want 16 (buckets are minutes in UTC)", ts(m), b.Completed)
	}
}

func testHistoryCountsAcrossHandles(e *env) {
	handles := []contract.QueueHistory{e.history(e.s)}
	if e.f.Reopen != nil {
		handles = append(handles, e.history(e.f.Reopen(e.T, e.s)))
	}
	m := e.minute()
	const writers, rounds = 8, 10
	var wg sync.WaitGroup
	errs := make(chan error, writers*rounds)
	gate := make(chan struct{})
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			h := handles[w%len(handles)]
			for r := range rounds {
				// Two queues in both orders, so writers lock buckets in
				// different orders of input.
				s := []contract.QueueSample{
					{Queue: "race-a", At: m.Add(time.Duration(r) * time.Second), Completed: 1, Failed: 2},
					{Queue: "race-b", At: m, Completed: 3},
				}
				if w%2 == 1 {
					s[0], s[1] = s[1], s[0]
				}
				if err := h.AddQueueHistory(e.ctx, s); err != nil {
					errs <- err
				}
			}
		}()
	}
	close(gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		e.Fatalf("concurrent AddQueueHistory: unexpected error: %v (transient conflicts are retried inside the store)", err)
	}
	a, b := e.bucketAt(handles[0], "race-a", m), e.bucketAt(handles[0], "race-b", m)
	if a.Completed != writers*rounds || a.Failed != 2*writers*rounds || b.Completed != 3*writers*rounds {
		e.Fatalf("after %d concurrent writers × %d rounds through %d handle(s): race-a completed %d failed %d, race-b completed %d; want %d, %d and %d: counts add up, none lost to a race (an additive upsert, not read-then-write)",
			writers, rounds, len(handles), a.Completed, a.Failed, b.Completed, writers*rounds, 2*writers*rounds, 3*writers*rounds)
	}
}

func testHistoryGaugeLastWriter(e *env) {
	h := e.history(e.s)
	m := e.minute()
	at := m.Add(20 * time.Second)
	e.addHistory(h, contract.QueueSample{Queue: "gauge", At: at, Gauge: true, Depth: 5, OldestAge: 1500 * time.Millisecond, Completed: 1})
	b := e.bucketAt(h, "gauge", m)
	if !b.Gauge || b.Depth != 5 || b.OldestAge != 1500*time.Millisecond || !b.GaugeAt.Equal(at) {
		e.Fatalf("bucket after one gauge sample: gauge %v, depth %d, oldest age %s, at %s; want true, 5, 1.5s, %s", b.Gauge, b.Depth, b.OldestAge, ts(b.GaugeAt), ts(at))
	}
	// An earlier sample, written later, does not replace it.
	e.addHistory(h, contract.QueueSample{Queue: "gauge", At: m.Add(10 * time.Second), Gauge: true, Depth: 99, OldestAge: time.Hour})
	if b = e.bucketAt(h, "gauge", m); b.Depth != 5 || b.OldestAge != 1500*time.Millisecond {
		e.Fatalf("bucket holds depth %d, oldest age %s after a gauge sample of an earlier At; want 5 and 1.5s kept: the gauge of the latest At wins", b.Depth, b.OldestAge)
	}
	// A sample without a gauge leaves it alone.
	e.addHistory(h, contract.QueueSample{Queue: "gauge", At: m.Add(50 * time.Second), Completed: 1})
	if b = e.bucketAt(h, "gauge", m); !b.Gauge || b.Depth != 5 || b.Completed != 2 {
		e.Fatalf("bucket holds gauge %v, depth %d, completed %d after a sample without a gauge; want the gauge kept (5) and the count added (2)", b.Gauge, b.Depth, b.Completed)
	}
	// A later one (from another handle, when there is one) replaces it,
	// with zeros too.
	h2 := h
	if e.f.Reopen != nil {
		h2 = e.history(e.f.Reopen(e.T, e.s))
	}
	later := m.Add(40 * time.Second)
	e.addHistory(h2, contract.QueueSample{Queue: "gauge", At: later, Gauge: true})
	if b = e.bucketAt(h, "gauge", m); !b.Gauge || b.Depth != 0 || b.OldestAge != 0 || !b.GaugeAt.Equal(later) {
		e.Fatalf("bucket holds depth %d, oldest age %s, gauge at %s after a later gauge sample of zeros; want 0, 0 and %s", b.Depth, b.OldestAge, ts(b.GaugeAt), ts(later))
	}
	// Within one call, the latest At wins whatever the order.
	e.addHistory(h, contract.QueueSample{Queue: "gauge2", At: m.Add(30 * time.Second), Gauge: true, Depth: 7},
		contract.QueueSample{Queue: "gauge2", At: m.Add(10 * time.Second), Gauge: true, Depth: 3})
	if b = e.bucketAt(h, "gauge2", m); b.Depth != 7 {
		e.Fatalf("bucket holds depth %d after one call with gauges at +30s (7) and +10s (3); want 7", b.Depth)
	}
}

func testHistorySinceFilters(e *env) {
	h := e.history(e.s)
	m := e.minute()
	for i := range 5 {
		e.addHistory(h, contract.QueueSample{Queue: "since", At: m.Add(time.Duration(i) * time.Minute), Completed: int64(i + 1)})
	}
	got := e.buckets(h, "since", m.Add(2*time.Minute+30*time.Second))
	if len(got) != 3 || !got[0].Minute.Equal(m.Add(2*time.Minute)) || got[0].Completed != 3 {
		e.Fatalf("QueueHistory since %s returned %d buckets (first %+v); want the 3 buckets from %s on: since is truncated to its minute", ts(m.Add(150*time.Second)), len(got), got, ts(m.Add(2*time.Minute)))
	}
	if got := e.buckets(h, "since", m.Add(10*time.Minute)); len(got) != 0 {
		e.Fatalf("QueueHistory since after the last bucket returned %d buckets; want none", len(got))
	}
	if got := e.buckets(h, "nothing-here", m); len(got) != 0 {
		e.Fatalf("QueueHistory of a queue without samples returned %d buckets; want none", len(got))
	}
}

func testHistoryTotals(e *env) {
	h := e.history(e.s)
	m := e.minute()
	e.addHistory(h, contract.QueueSample{Queue: "tot-b", At: m, Completed: 2, Failed: 1},
		contract.QueueSample{Queue: "tot-a", At: m.Add(-time.Hour), Completed: 5})
	e.addHistory(h, contract.QueueSample{Queue: "tot-b", At: m.Add(time.Minute), Completed: 3, Gauge: true, Depth: 100})
	if _, err := h.PruneQueueHistory(e.ctx, m.Add(time.Hour), 1000); err != nil {
		e.Fatalf("PruneQueueHistory: %v", err)
	}
	got, err := h.QueueTotals(e.ctx)
	if err != nil {
		e.Fatalf("QueueTotals: unexpected error: %v", err)
	}
	want := []contract.QueueTotals{{Queue: "tot-a", Completed: 5}, {Queue: "tot-b", Completed: 5, Failed: 1}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		e.Fatalf("QueueTotals after pruning every bucket returned %+v; want %+v: totals sum every sample ever added, ordered by queue, and pruning does not touch them", got, want)
	}
}

func testHistoryDueJobs(e *env) {
	h := e.history(e.s)
	oldest := e.now
	e.insert(e.job("due-a", "k"))
	e.advance(10 * time.Second)
	e.insert(e.job("due-a", "k"), e.job("due-b", "k"))
	fut := e.job("due-a", "k")
	fut.RunAt = e.now.Add(time.Hour)
	e.insert(fut)
	e.claimJob(e.job("due-c", "k"), "w1") // running: not due
	done := e.claimJob(e.job("due-d", "k"), "w1")
	e.apply(e.outcome(done, contract.OutcomeComplete))
	got, err := h.DueJobs(e.ctx, e.now)
	if err != nil {
		e.Fatalf("DueJobs: unexpected error: %v", err)
	}
	if len(got) != 2 || got[0].Queue != "due-a" || got[0].Count != 2 || !got[0].OldestRunAt.Equal(oldest) ||
		got[1].Queue != "due-b" || got[1].Count != 1 || !got[1].OldestRunAt.Equal(e.now) {
		e.Fatalf("DueJobs returned %+v; want due-a with 2 due jobs (the future one not counted) oldest at %s, and due-b with 1 at %s, in queue order; running and finished jobs are not due", got, ts(oldest), ts(e.now))
	}
	if got[0].OldestRunAt.Location() != time.UTC {
		e.Fatalf("DueJobs returned OldestRunAt in %s; want UTC", got[0].OldestRunAt.Location())
	}
	later, err := h.DueJobs(e.ctx, e.now.Add(2*time.Hour))
	if err != nil || len(later) != 2 || later[0].Count != 3 {
		e.Fatalf("DueJobs two hours later returned %+v, %v; want due-a with 3 due jobs (the scheduled one is due by then)", later, err)
	}
}

func testHistoryPrune(e *env) {
	h := e.history(e.s)
	m := e.minute()
	for i := range 5 {
		e.addHistory(h, contract.QueueSample{Queue: "prune-a", At: m.Add(time.Duration(i) * time.Minute), Completed: 1},
			contract.QueueSample{Queue: "prune-b", At: m.Add(time.Duration(i) * time.Minute), Failed: 1})
	}
	n, err := h.PruneQueueHistory(e.ctx, m.Add(3*time.Minute), 4)
	if err != nil || n != 4 {
		e.Fatalf("PruneQueueHistory(before +3m, limit 4) returned %d, %v; want 4 (6 buckets are older, at most limit go)", n, err)
	}
	n, err = h.PruneQueueHistory(e.ctx, m.Add(3*time.Minute), 4)
	if err != nil || n != 2 {
		e.Fatalf("second PruneQueueHistory(before +3m, limit 4) returned %d, %v; want the 2 older buckets left", n, err)
	}
	got := e.buckets(h, "", m)
	if len(got) != 4 || !got[0].Minute.Equal(m.Add(3*time.Minute)) {
		e.Fatalf("after pruning before %s, QueueHistory returned %d buckets (first at %v); want the 4 buckets from that minute on, kept", ts(m.Add(3*time.Minute)), len(got), got)
	}
	if _, err := h.PruneQueueHistory(e.ctx, m, 0); err == nil {
		e.Fatal("PruneQueueHistory with limit 0: no error; want an invalid-argument error")
	}
}

func testHistoryBadSamples(e *env) {
	h := e.history(e.s)
	m := e.minute()
	for _, bad := range []contract.QueueSample{
		{Queue: "", At: m, Completed: 1},
		{Queue: "bad queue!", At: m, Completed: 1},
		{Queue: "bad", Completed: 1},
		{Queue: "bad", At: m, Completed: -1},
		{Queue: "bad", At: m, Gauge: true, Depth: -1},
	} {
		err := h.AddQueueHistory(e.ctx, []contract.QueueSample{{Queue: "good", At: m, Completed: 1}, bad})
		if err == nil {
			e.Fatalf("AddQueueHistory with sample %+v: no error; want one naming the bad sample", bad)
		}
	}
	if got := e.buckets(h, "", m.Add(-time.Hour)); len(got) != 0 {
		e.Fatalf("after refused calls QueueHistory returned %+v; want nothing stored (a call is all or nothing)", got)
	}
}
