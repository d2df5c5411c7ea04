package mysql

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/storetest/dbtest"
)

// TestCursor: ids above the highest read are news and leave the ids passed
// over as gaps; a gap read later is news once; gaps expire after the grace,
// are bounded, and with an auto-increment step above 1 only residues seen
// count.
func TestCursor(t *testing.T) {
	now := time.Unix(1000, 0)
	c := cursor{high: 10}
	c.setStep(1)
	for _, id := range []int64{11, 14, 15} {
		if !c.see(id, now) {
			t.Fatalf("id %d above the highest read is not news", id)
		}
	}
	if got := c.ids(); !slices.Equal(got, []int64{12, 13}) {
		t.Fatalf("gaps %v; want [12 13]", got)
	}
	if c.see(11, now) || c.see(9, now) {
		t.Fatal("an id read before is news again")
	}
	if !c.see(13, now) || c.see(13, now) {
		t.Fatal("a gap read later must be news exactly once")
	}
	if got := c.ids(); !slices.Equal(got, []int64{12}) {
		t.Fatalf("gaps %v; want [12]", got)
	}
	c.see(20, now.Add(time.Second))
	c.expire(now.Add(notifyGapGrace + time.Millisecond))
	if got := c.ids(); !slices.Equal(got, []int64{16, 17, 18, 19}) {
		t.Fatalf("gaps after the first grace ended %v; want [16 17 18 19]", got)
	}
	c.expire(now.Add(time.Second + notifyGapGrace + time.Millisecond))
	if len(c.gaps) != 0 {
		t.Fatalf("gaps %v outlived their grace", c.ids())
	}

	// A jump far above the highest id (an emptied table, a new listener
	// on a table whose newest rows were deleted) remembers the nearest
	// ids only.
	c.see(1_000_000, now)
	if len(c.gaps) != notifyGapMax || c.gaps[0].id != 1_000_000-notifyGapMax || c.gaps[len(c.gaps)-1].id != 999_999 {
		t.Fatalf("%d gaps from %d; want the %d ids below 1000000", len(c.gaps), c.gaps[0].id, notifyGapMax)
	}

	// Step 3 (Galera or Group Replication): one node's ids, 3 apart, leave
	// no gaps; ids of a second node's residue do.
	g := cursor{high: 1}
	g.setStep(3)
	g.see(4, now)
	g.see(7, now)
	if len(g.gaps) != 0 {
		t.Fatalf("one node's ids left gaps %v", g.ids())
	}
	g.see(8, now)  // a second node
	g.see(13, now) // 10 and 11, of the two nodes' residues, were passed over; 9 and 12 are no node's
	if got := g.ids(); !slices.Equal(got, []int64{10, 11}) {
		t.Fatalf("gaps %v; want [10 11]", got)
	}
}

// notifyStore opens a store on a database of its own.
func notifyStore(t *testing.T, opts ...Option) *Store {
	t.Helper()
	s, err := Open(context.Background(), dbtest.MySQLDSN(t), append([]Option{WithMaxOpenConns(4)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func listen(t *testing.T, ctx context.Context, s *Store) <-chan contract.Notification {
	t.Helper()
	ch, err := s.Listen(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// next returns the next notification, failing after 5 s.
func next(t *testing.T, ch <-chan contract.Notification) contract.Notification {
	t.Helper()
	select {
	case n, ok := <-ch:
		if !ok {
			t.Fatal("the Listen channel closed")
		}
		return n
	case <-time.After(5 * time.Second):
		t.Fatal("no notification within 5 s")
	}
	return contract.Notification{}
}

// TestNotifyEvents: notifications arrive in order, each once, for what
// the store's contract lists and nothing else: no replay of what committed
// before Listen, none for scheduled jobs, claimed jobs or a rolled-back
// InsertTx, cancel only for a claimed job, and an insert for Retry.
func TestNotifyEvents(t *testing.T) {
	s := notifyStore(t)
	ctx := t.Context()
	// History before Listen.
	if _, err := s.Insert(ctx, t0, []contract.InsertParams{job("old", "k")}); err != nil {
		t.Fatal(err)
	}
	if err := s.PauseQueue(ctx, "old", t0); err != nil {
		t.Fatal(err)
	}
	ch := listen(t, ctx, s)

	later := job("later", "k")
	later.RunAt = t0.Add(time.Hour)
	tx, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.InsertTx(ctx, tx, t0, []contract.InsertParams{job("rolled-back", "k")}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	res, err := s.Insert(ctx, t0, []contract.InsertParams{later, job("a", "k"), job("a", "k"), job("b", "k")})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for len(got) < 2 {
		n := next(t, ch)
		if n.Kind != contract.NotifyInsert || n.Queue != "a" && n.Queue != "b" {
			t.Fatalf("got %+v; want inserts of queues a and b only", n)
		}
		got[n.Queue]++
	}

	// Every cancel notifies (with the job), of a claimed job or of one
	// never claimed; Retry notifies an insert of the job's queue.
	claimed, err := s.Claim(ctx, contract.ClaimParams{Queue: "a", WorkerID: "w", Limit: 1, Now: t0, LeaseUntil: t0.Add(time.Minute)})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	if _, err := s.Cancel(ctx, res[3].Job.ID, t0); err != nil { // b, never claimed
		t.Fatal(err)
	}
	if _, err := s.Cancel(ctx, claimed[0].ID, t0); err != nil {
		t.Fatal(err)
	}
	if n := next(t, ch); n != (contract.Notification{Kind: contract.NotifyCancel, Queue: "b", JobID: res[3].Job.ID}) {
		t.Fatalf("after cancelling never-claimed job %d: %+v", res[3].Job.ID, n)
	}
	if n := next(t, ch); n != (contract.Notification{Kind: contract.NotifyCancel, Queue: "a", JobID: claimed[0].ID}) {
		t.Fatalf("after cancelling claimed job %d: %+v", claimed[0].ID, n)
	}
	if _, err := s.Cancel(ctx, claimed[0].ID, t0); !errors.Is(err, contract.ErrInvalidState) {
		t.Fatalf("second cancel: %v", err)
	}
	if _, err := s.Retry(ctx, res[3].Job.ID, t0); err != nil {
		t.Fatal(err)
	}
	if n := next(t, ch); n != (contract.Notification{Kind: contract.NotifyInsert, Queue: "b"}) {
		t.Fatalf("after Retry of a job of queue b: %+v", n)
	}
	if err := s.ResumeQueue(ctx, "old", t0); err != nil {
		t.Fatal(err)
	}
	if n := next(t, ch); n != (contract.Notification{Kind: contract.NotifyResume, Queue: "old"}) {
		t.Fatalf("after ResumeQueue: %+v", n)
	}
	var rows int
	if err := s.DB().QueryRow("SELECT COUNT(*) FROM backlog_notifications").Scan(&rows); err != nil || rows != 5 {
		t.Fatalf("%d notification rows (%v); want 5: pause, two cancels, insert (retry), resume", rows, err)
	}
	select {
	case n := <-ch:
		t.Fatalf("unexpected %+v", n)
	case <-time.After(100 * time.Millisecond):
	}
}

// TestNotifyLateCommit: an insert whose transaction commits after a later
// insert was read still notifies; one whose transaction stays open past
// the grace does not (the engine's poll finds it).
func TestNotifyLateCommit(t *testing.T) {
	s := notifyStore(t)
	ctx := t.Context()
	ch := listen(t, ctx, s)
	tx, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := s.InsertTx(ctx, tx, t0, []contract.InsertParams{job("slow", "k")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Insert(ctx, t0, []contract.InsertParams{job("fast", "k")}); err != nil {
		t.Fatal(err)
	}
	if n := next(t, ch); n.Queue != "fast" {
		t.Fatalf("got %+v; want the insert of queue fast", n)
	}
	time.Sleep(200 * time.Millisecond) // several reads pass over the open transaction's id
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if n := next(t, ch); n.Queue != "slow" {
		t.Fatalf("got %+v; want the insert of queue slow at its commit", n)
	}
}

// TestNotifyShared: every Listen on one store gets every notification from
// one poller, which stops when the last listener leaves and starts again
// (at the present) for the next.
func TestNotifyShared(t *testing.T) {
	s := notifyStore(t)
	ctx := t.Context()
	ctx1, cancel1 := context.WithCancel(ctx)
	ch1 := listen(t, ctx1, s)
	ctx2, cancel2 := context.WithCancel(ctx)
	ch2 := listen(t, ctx2, s)
	s.hub.mu.Lock()
	p := s.hub.poll
	s.hub.mu.Unlock()
	if _, err := s.Insert(ctx, t0, []contract.InsertParams{job("q", "k")}); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []<-chan contract.Notification{ch1, ch2} {
		if n := next(t, ch); n.Queue != "q" {
			t.Fatalf("got %+v", n)
		}
	}
	cancel1()
	for range ch1 {
	}
	if err := s.PauseQueue(ctx, "q", t0); err != nil {
		t.Fatal(err)
	}
	if n := next(t, ch2); n.Kind != contract.NotifyPause {
		t.Fatalf("the remaining listener got %+v", n)
	}
	cancel2()
	for range ch2 {
	}
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the poller still runs with nobody listening")
	}
	if err := s.ResumeQueue(ctx, "q", t0); err != nil {
		t.Fatal(err)
	}
	ch3 := listen(t, ctx, s)
	if err := s.PauseQueue(ctx, "r", t0); err != nil {
		t.Fatal(err)
	}
	if n := next(t, ch3); n != (contract.Notification{Kind: contract.NotifyPause, Queue: "r"}) {
		t.Fatalf("a new listener got %+v; want the pause of r (not the resume of q before it listened)", n)
	}
	s.Close()
	select {
	case _, ok := <-ch3:
		if ok {
			t.Fatal("a notification after Close")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close left the Listen channel open")
	}
	if _, err := s.Listen(ctx); !errors.Is(err, contract.ErrClosed) {
		t.Fatalf("Listen after Close: %v", err)
	}
}

// TestNotifyOff: with notifications off Listen refuses with
// core.ErrUnsupported, and changes still write their rows for other
// processes' listeners.
func TestNotifyOff(t *testing.T) {
	s := notifyStore(t, WithNotifyInterval(0))
	ctx := t.Context()
	if _, err := s.Listen(ctx); !errors.Is(err, contract.ErrUnsupported) {
		t.Fatalf("Listen with notifications off: %v; want core.ErrUnsupported", err)
	}
	if err := s.PauseQueue(ctx, "q", t0); err != nil {
		t.Fatal(err)
	}
	var rows int
	if err := s.DB().QueryRow("SELECT COUNT(*) FROM backlog_notifications").Scan(&rows); err != nil || rows != 1 {
		t.Fatalf("%d notification rows (%v); want 1", rows, err)
	}
}

// TestNotifyPrune: rows older than notifyKeep are pruned by later writers,
// at most once per notifyPruneEvery, and the newest row stays.
func TestNotifyPrune(t *testing.T) {
	s := notifyStore(t)
	ctx := t.Context()
	count := func() (n int) {
		t.Helper()
		if err := s.DB().QueryRow("SELECT COUNT(*) FROM backlog_notifications").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for i := range 3 {
		if err := s.PauseQueue(ctx, "q", t0.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if n := count(); n != 3 {
		t.Fatalf("%d rows; want 3", n)
	}
	// Two minutes later: the three are old, but the newest stays.
	s.prunedAt.Store(0)
	later := t0.Add(2 * time.Minute)
	if err := s.ResumeQueue(ctx, "q", later); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 1 {
		t.Fatalf("%d rows after a prune two minutes later; want 1 (the newest)", n)
	}
	// The resume is old too by then, but this store pruned less than
	// notifyPruneEvery ago.
	again := later.Add(2 * notifyKeep)
	s.prunedAt.Store(again.Add(-notifyPruneEvery / 2).UnixMicro())
	if err := s.PauseQueue(ctx, "q", again); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 2 {
		t.Fatalf("%d rows; want 2 (pruned less than %s ago)", n, notifyPruneEvery)
	}
}
