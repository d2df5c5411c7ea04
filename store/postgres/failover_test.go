//go:build linux

package postgres

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/internal/dbserver"
	"github.com/backlogq/backlog/storetest"
)

// TestConformanceAfterFailover starts a private primary with a
// synchronous standby and opens every store the way a user does: from the
// multi-host URL of both (target_session_attrs=read-write) through the
// store registry. A producer enqueues jobs through that URL while the
// primary is SIGKILLed and the standby promoted (a scripted failover, at
// once); every job whose insert returned must be on the promoted standby.
// Then the conformance suite runs there, both strategies, each store from
// the same URL with a schema of its own.
func TestConformanceAfterFailover(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	primary, standby := dbserver.PostgresPair(t, dbserver.Options{})
	url := dbserver.FailoverURL("test", primary, standby)
	t.Logf("primary and synchronous standby up in %s; store URL %s", time.Since(start).Round(time.Millisecond), url)

	st := openStoreURL(t, url+"&schema="+randomSchema())
	p := &failoverProducer{st: st}
	stop := make(chan struct{})
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		p.run(stop)
	}()
	var stopOnce sync.Once
	stopProducer := func() {
		stopOnce.Do(func() { close(stop) })
		<-produced
	}
	t.Cleanup(stopProducer) // before the store closes, should the test end early
	// Let the producer work against the primary, then take the primary
	// away under it.
	p.waitAcked(t, 200, 30*time.Second)
	if err := primary.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	p.markKill(killed)
	pctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := standby.Promote(pctx); err != nil {
		t.Fatal(err)
	}
	promoted := time.Since(killed)
	p.waitResumed(t, 100, time.Minute)
	stopProducer()

	acked, failed, resumed := p.result()
	if resumed == 0 {
		t.Fatal("no insert succeeded after the kill")
	}
	jobs := listAll(t, st, "failover")
	have := make(map[int64]bool, len(jobs))
	for _, j := range jobs {
		have[j.ID] = true
	}
	var lost []int64
	for _, id := range acked {
		if !have[id] {
			lost = append(lost, id)
		}
	}
	t.Logf("failover: promoted %s after the kill; first write through the multi-host URL %s after the kill; "+
		"%d jobs acknowledged, %d inserts failed around the failover (%d jobs of them on the new primary all the same), %d acknowledged jobs missing",
		promoted.Round(time.Millisecond), resumed.Round(time.Millisecond), len(acked), failed, len(jobs)-len(acked), len(lost))
	if len(lost) > 0 {
		t.Fatalf("%d acknowledged jobs missing after the failover, e.g. %v", len(lost), lost[:min(len(lost), 10)])
	}

	suite := time.Now()
	storetest.Run(t, urlFactory(url))
	t.Logf("conformance on the promoted standby, both strategies: %s", time.Since(suite).Round(time.Second))
}

// listAll lists every job of queue.
func listAll(t *testing.T, s contract.Store, queue string) []*contract.Job {
	t.Helper()
	var all []*contract.Job
	var after int64
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		page, err := s.List(ctx, contract.ListParams{Queue: queue, AfterID: after, Limit: 1000})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, page...)
		if len(page) < 1000 {
			return all
		}
		after = page[len(page)-1].ID
	}
}

// failoverProducer inserts jobs of ten into the queue "failover", one
// batch after the other, and records which inserts returned.
type failoverProducer struct {
	st contract.Store

	mu      sync.Mutex
	acked   []int64
	failed  int
	killAt  time.Time
	resumed time.Duration // kill → end of the first insert that started after it and succeeded
	after   int           // jobs acknowledged from inserts started after the kill
}

func (p *failoverProducer) run(stop <-chan struct{}) {
	batch := make([]contract.InsertParams, 10)
	for i := range batch {
		batch[i] = contract.InsertParams{Queue: "failover", Kind: "k", Args: []byte(`{}`), Priority: 5, MaxAttempts: 3}
	}
	for {
		select {
		case <-stop:
			return
		default:
		}
		began := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		res, err := p.st.Insert(ctx, began, batch)
		cancel()
		ended := time.Now()
		p.mu.Lock()
		if err != nil {
			p.failed++
		} else {
			for _, r := range res {
				p.acked = append(p.acked, r.Job.ID)
			}
			if !p.killAt.IsZero() && began.After(p.killAt) {
				if p.resumed == 0 {
					p.resumed = ended.Sub(p.killAt)
				}
				p.after += len(res)
			}
		}
		p.mu.Unlock()
		if err != nil {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func (p *failoverProducer) markKill(at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.killAt = at
}

// waitAcked waits until n jobs were acknowledged.
func (p *failoverProducer) waitAcked(t *testing.T, n int, timeout time.Duration) {
	t.Helper()
	p.wait(t, timeout, "acknowledged jobs before the kill", func() bool { return len(p.acked) >= n })
}

// waitResumed waits until n jobs were acknowledged by inserts that began
// after the kill.
func (p *failoverProducer) waitResumed(t *testing.T, n int, timeout time.Duration) {
	t.Helper()
	p.wait(t, timeout, "acknowledged jobs after the kill", func() bool { return p.after >= n })
}

func (p *failoverProducer) wait(t *testing.T, timeout time.Duration, what string, done func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		p.mu.Lock()
		ok, failed := done(), p.failed
		p.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: too few within %s (%d inserts failed)", what, timeout, failed)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (p *failoverProducer) result() (acked []int64, failed int, resumed time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]int64(nil), p.acked...), p.failed, p.resumed
}
