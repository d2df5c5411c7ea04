package core_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/core/storekit"
	"github.com/backlogq/backlog/store/memory"
)

// flakyHistory is a memory store whose AddQueueHistory fails while fail
// is set, and whose DueJobs fails while failDue is set.
type flakyHistory struct {
	*memory.Store
	fail, failDue atomic.Bool
	calls         atomic.Int32
}

func (f *flakyHistory) DueJobs(ctx context.Context, now time.Time) ([]contract.QueueDue, error) {
	if f.failDue.Load() {
		return nil, errors.New("due jobs unreadable")
	}
	return f.Store.DueJobs(ctx, now)
}

func (f *flakyHistory) AddQueueHistory(ctx context.Context, samples []contract.QueueSample) error {
	f.calls.Add(1)
	if f.fail.Load() {
		return errors.New("history write refused")
	}
	return f.Store.AddQueueHistory(ctx, samples)
}

// historyNode starts a client working queue "hist" on st whose
// maintenance runs only when the test calls Maintain.
func historyNode(t *testing.T, st contract.Store, id string) *core.Client {
	t.Helper()
	h := core.NewHandlers()
	h.HandleRaw("ok", func(context.Context, *core.Job) error { return nil })
	h.HandleRaw("bad", func(context.Context, *core.Job) error { return errors.New("boom") }, core.WithRetry(core.DelayList{0}))
	c, err := core.NewClient(st, core.Config{
		WorkerID:            id,
		Queues:              map[string]core.QueueConfig{"hist": {MaxWorkers: 4}},
		Handlers:            h,
		Logger:              quietLogger(),
		PollInterval:        10 * time.Millisecond,
		MaintenanceInterval: time.Hour, // rounds come from the test
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	return c
}

// sumHistory adds up the buckets of queue in the last hour.
func sumHistory(t *testing.T, h contract.QueueHistory, queue string) (completed, failed int64, buckets []contract.QueueBucket) {
	t.Helper()
	bs, err := h.QueueHistory(context.Background(), queue, time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bs {
		completed += b.Completed
		failed += b.Failed
	}
	return completed, failed, bs
}

// TestQueueHistoryCountsEveryNodeOnce runs two nodes on one store: the
// completions and failed attempts of both add up in the store's
// history, each counted once, whether a maintenance round or the stop
// writes them.
func TestQueueHistoryCountsEveryNodeOnce(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	a, b := historyNode(t, st, "node-a"), historyNode(t, st, "node-b")
	var ids []int64
	for range 10 {
		r, err := a.EnqueueRaw(ctx, "ok", nil, &core.Options{Queue: "hist"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.Job.ID)
	}
	for range 2 {
		r, err := b.EnqueueRaw(ctx, "bad", nil, &core.Options{Queue: "hist", MaxAttempts: 2})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.Job.ID)
	}
	for i, id := range ids {
		want := core.StateCompleted
		if i >= 10 {
			want = core.StateDiscarded
		}
		waitState(t, st, id, want)
	}
	a.Maintain(ctx) // node a's share goes now, node b's at its stop
	if err := b.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	completed, failed, _ := sumHistory(t, st, "hist")
	if completed != 10 || failed != 4 {
		t.Fatalf("history of queue hist: completed %d, failed %d; want 10 and 4 (2 jobs × 2 failed attempts), each counted once across both nodes", completed, failed)
	}
	tot, err := st.QueueTotals(ctx)
	if err != nil || len(tot) != 1 || tot[0].Completed != 10 || tot[0].Failed != 4 {
		t.Fatalf("QueueTotals: %+v, %v; want hist with 10 and 4", tot, err)
	}
}

// TestQueueHistoryGaugesDueJobs: a maintenance round samples the due
// jobs of every queue (count and the oldest one's age), at most once per
// HistoryGaugeEvery, and writes a zero for a queue it sampled before
// that no longer has any; buckets older than HistoryRetention are
// pruned.
func TestQueueHistoryGaugesDueJobs(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	t0 := time.Date(2030, 1, 1, 10, 0, 5, 0, time.UTC)
	clock := core.NewManualClock(t0)
	c, err := core.NewClient(st, core.Config{Logger: quietLogger(), MaintenanceInterval: time.Hour, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for range 3 {
		r, err := c.EnqueueRaw(ctx, "waiting", nil, &core.Options{Queue: "idle", RunAt: t0.Add(-90 * time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.Job.ID)
	}
	c.Maintain(ctx)
	bs, err := st.QueueHistory(ctx, "idle", t0.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) != 1 || !bs[0].Gauge || bs[0].Depth != 3 || bs[0].OldestAge != 90*time.Second || !bs[0].GaugeAt.Equal(t0) {
		t.Fatalf("history of queue idle after one round: %+v; want one bucket with a gauge of 3 due jobs, the oldest due 90 s before", bs)
	}
	for _, id := range ids {
		if err := st.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	clock.Add(core.HistoryGaugeEvery / 2)
	c.Maintain(ctx) // too soon for another sample
	if bs, _ = st.QueueHistory(ctx, "idle", t0); bs[0].Depth != 3 {
		t.Fatalf("a round %s after a sample wrote another: %+v", core.HistoryGaugeEvery/2, bs)
	}
	clock.Add(core.HistoryGaugeEvery)
	c.Maintain(ctx)
	if bs, _ = st.QueueHistory(ctx, "idle", t0); len(bs) != 1 || !bs[0].Gauge || bs[0].Depth != 0 || bs[0].OldestAge != 0 {
		t.Fatalf("history of queue idle once its jobs are gone: %+v; want the gauge back at zero", bs)
	}
	clock.Add(core.HistoryRetention + time.Minute)
	c.Maintain(ctx)
	if bs, _ = st.QueueHistory(ctx, "", t0.Add(-time.Hour)); len(bs) != 0 {
		t.Fatalf("history after HistoryRetention: %+v; want the old buckets pruned", bs)
	}
}

// TestQueueHistoryKeepsCountsAFailedWriteDidNotStore: counts a round
// could not write are written by the next one, once.
func TestQueueHistoryKeepsCountsAFailedWriteDidNotStore(t *testing.T) {
	ctx := context.Background()
	st := &flakyHistory{Store: memory.New()}
	c := historyNode(t, st, "node-f")
	st.fail.Store(true)
	var ids []int64
	for range 5 {
		r, err := c.EnqueueRaw(ctx, "ok", nil, &core.Options{Queue: "hist"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.Job.ID)
	}
	for _, id := range ids {
		waitState(t, st, id, core.StateCompleted)
	}
	c.Maintain(ctx)
	if st.calls.Load() == 0 {
		t.Fatal("the maintenance round did not write the history")
	}
	if n, _, _ := sumHistory(t, st, "hist"); n != 0 {
		t.Fatalf("history holds %d completions after a refused write", n)
	}
	st.fail.Store(false)
	c.Maintain(ctx)
	c.Maintain(ctx)
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := sumHistory(t, st, "hist"); n != 5 {
		t.Fatalf("history holds %d completions after the refused write was followed by good ones and a stop; want 5, once each", n)
	}
}

// TestFailedAttempt pins what the failed counts count.
func TestFailedAttempt(t *testing.T) {
	for _, c := range []struct {
		e    core.Event
		want bool
	}{
		{core.Event{Kind: core.EventJobRetried}, true},
		{core.Event{Kind: core.EventJobDiscarded, Reason: core.ReasonExhausted}, true},
		{core.Event{Kind: core.EventJobDiscarded, Reason: core.ReasonWorkerLost}, false},
		{core.Event{Kind: core.EventJobCompleted}, false},
		{core.Event{Kind: core.EventJobCancelled}, false},
	} {
		if got := core.FailedAttempt(c.e); got != c.want {
			t.Errorf("FailedAttempt(%s, %q) = %v; want %v", c.e.Kind, c.e.Reason, got, c.want)
		}
	}
}

// TestMergeQueueSamples pins the merge stores rely on.
func TestMergeQueueSamples(t *testing.T) {
	m := time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC)
	got := storekit.MergeQueueSamples([]contract.QueueSample{
		{Queue: "b", At: m.Add(10 * time.Second), Completed: 1},
		{Queue: "a", At: m.Add(70 * time.Second), Failed: 2},
		{Queue: "b", At: m.Add(40 * time.Second), Gauge: true, Depth: 4},
		{Queue: "b", At: m.Add(20 * time.Second), Gauge: true, Depth: 9, Completed: 2},
	})
	if len(got) != 2 || got[0].Queue != "a" || !got[0].At.Equal(m.Add(time.Minute)) || got[0].Failed != 2 ||
		got[1].Queue != "b" || got[1].Completed != 3 || !got[1].Gauge || got[1].Depth != 4 || !got[1].At.Equal(m.Add(40*time.Second)) {
		t.Fatalf("MergeQueueSamples = %+v", got)
	}
}

// TestQueueHistoryWritesCountsWhenDueJobsFails: a round whose read of the
// due jobs fails still writes the counts (without a gauge), and the
// next round samples the gauge.
func TestQueueHistoryWritesCountsWhenDueJobsFails(t *testing.T) {
	ctx := context.Background()
	st := &flakyHistory{Store: memory.New()}
	st.failDue.Store(true)
	c := historyNode(t, st, "node-d")
	r, err := c.EnqueueRaw(ctx, "ok", nil, &core.Options{Queue: "hist"})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, st, r.Job.ID, core.StateCompleted)
	c.Maintain(ctx)
	n, _, bs := sumHistory(t, st, "hist")
	if n != 1 || len(bs) != 1 || bs[0].Gauge {
		t.Fatalf("history after a round whose due-jobs read failed: %+v; want the completion without a gauge", bs)
	}
	st.failDue.Store(false)
	c.Maintain(ctx)
	if n, _, bs = sumHistory(t, st, "hist"); n != 1 || !bs[len(bs)-1].Gauge {
		t.Fatalf("history after the next round: %+v; want the same count and a gauge", bs)
	}
}
