package core_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
)

// eventLog records the events a client reports.
type eventLog struct {
	mu sync.Mutex
	ev []core.Event
}

func (l *eventLog) Observe(e core.Event) {
	l.mu.Lock()
	l.ev = append(l.ev, e)
	l.mu.Unlock()
}

func (l *eventLog) of(kind core.EventKind) []core.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []core.Event
	for _, e := range l.ev {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// remoteClient is a client that runs nothing itself, with kind "remote"
// declared with opts, and the jobs its remote workers claim.
func remoteClient(t *testing.T, opts ...core.KindOption) (*core.Client, *core.RemoteWorkers, *eventLog) {
	t.Helper()
	h := core.NewHandlers()
	h.Declare("remote", opts...)
	log := &eventLog{}
	c, _ := newClient(t, h, func(cfg *core.Config) {
		cfg.Queues = nil
		cfg.Observers = []core.Observer{log}
	})
	return c, c.RemoteWorkers(), log
}

// claimOne enqueues a job of kind "remote" and claims it for worker w.
func claimOne(t *testing.T, c *core.Client, rw *core.RemoteWorkers, w core.WorkerInfo, opts *core.Options) *core.Job {
	t.Helper()
	ctx := context.Background()
	if _, err := c.EnqueueRaw(ctx, "remote", nil, opts); err != nil {
		t.Fatal(err)
	}
	jobs, err := rw.Claim(ctx, w, []string{core.DefaultQueue}, 1)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("Claim: %d jobs, err %v", len(jobs), err)
	}
	return jobs[0]
}

func TestRemoteWorkersReportDecidesByTheKindsPolicy(t *testing.T) {
	c, rw, log := remoteClient(t, core.WithRetry(core.DelayList{time.Hour}))
	ctx := context.Background()
	w := core.WorkerInfo{ID: "w1", Queues: []string{core.DefaultQueue}, StartedAt: time.Now(), HeartbeatAt: time.Now()}
	if err := rw.Register(ctx, w); err != nil {
		t.Fatal(err)
	}
	j := claimOne(t, c, rw, w, nil)
	if j.WorkerID != "w1" || !j.LeaseUntil.After(time.Now()) {
		t.Fatalf("claimed %+v: not leased to w1", j)
	}
	now := time.Now()
	res, err := rw.Report(ctx, now, []core.Report{{Job: j, Verdict: core.RemoteFailure("boom", "at line 3", core.CausePanic, contract.OutcomeRetry, nil)}})
	if err != nil || len(res) != 1 || !res[0].Applied {
		t.Fatalf("Report: %+v, err %v", res, err)
	}
	o := res[0].Decision.Outcome
	if o.Kind != contract.OutcomeRetry || o.RunAt.Sub(now.UTC()) < 59*time.Minute {
		t.Fatalf("outcome %s at %s: want a retry after the kind's hour", o.Kind, o.RunAt)
	}
	if o.Error == nil || o.Error.Error != "boom" || o.Error.Trace != "at line 3" || o.Error.Cause != core.CausePanic {
		t.Fatalf("error entry %+v: want the worker's message, trace and cause", o.Error)
	}
	got, err := c.GetJob(ctx, j.ID)
	if err != nil || got.State != core.StateRetryable || len(got.Errors) != 1 || got.Errors[0].Cause != core.CausePanic {
		t.Fatalf("job after: %+v, err %v", got, err)
	}
	ev := log.of(core.EventJobRetried)
	if len(ev) != 1 || ev[0].Cause != core.CausePanic || ev[0].Job.ID != j.ID || ev[0].Duration < 0 {
		t.Fatalf("retried events %+v: want one, with the cause", ev)
	}
	// The same report again: its fence fails, nothing changes, and
	// observers hear the lease was lost.
	res, err = rw.Report(ctx, time.Now(), []core.Report{{Job: j, Verdict: core.Verdict{Kind: contract.OutcomeComplete}}})
	if err != nil || res[0].Applied {
		t.Fatalf("stale Report: %+v, err %v", res, err)
	}
	if n := len(log.of(core.EventLeaseLost)); n != 1 {
		t.Fatalf("%d lease-lost events, want 1", n)
	}
}

func TestRemoteWorkersReportDeadlineCause(t *testing.T) {
	// A worker that says its attempt ended by the job's deadline gets the
	// job discarded for its deadline, whatever this node's clock says.
	c, rw, log := remoteClient(t)
	ctx := context.Background()
	w := core.WorkerInfo{ID: "w1", Queues: []string{core.DefaultQueue}}
	j := claimOne(t, c, rw, w, &core.Options{Deadline: time.Now().Add(time.Hour)})
	res, err := rw.Report(ctx, time.Now(), []core.Report{{Job: j, Verdict: core.RemoteFailure("too late", "", core.CauseDeadline, contract.OutcomeRetry, nil)}})
	if err != nil || !res[0].Applied {
		t.Fatalf("Report: %+v, err %v", res, err)
	}
	d := res[0].Decision
	if d.Outcome.Kind != contract.OutcomeDiscard || d.Reason != core.ReasonDeadline || d.Outcome.Error.Cause != core.CauseDeadline {
		t.Fatalf("decision %s/%s cause %q: want a deadline discard", d.Outcome.Kind, d.Reason, d.Outcome.Error.Cause)
	}
	if ev := log.of(core.EventJobDiscarded); len(ev) != 1 || ev[0].Reason != core.ReasonDeadline {
		t.Fatalf("discarded events %+v", ev)
	}
}

func TestRemoteWorkersHandBack(t *testing.T) {
	c, rw, log := remoteClient(t)
	ctx := context.Background()
	w := core.WorkerInfo{ID: "w1", Queues: []string{core.DefaultQueue}}

	// With a cause: no attempt used, an entry, an event, due after the delay.
	j := claimOne(t, c, rw, w, nil)
	now := time.Now()
	applied, err := rw.HandBack(ctx, []*core.Job{j}, core.CauseUndeliverable, time.Minute, now)
	if err != nil || len(applied) != 1 || !applied[0] {
		t.Fatalf("HandBack: %v, err %v", applied, err)
	}
	got, _ := c.GetJob(ctx, j.ID)
	if got.State != core.StateScheduled || got.Attempt != 0 || len(got.Errors) != 1 || got.Errors[0].Cause != core.CauseUndeliverable || got.RunAt.Before(now.Add(59*time.Second)) {
		t.Fatalf("job after a hand-back: %+v", got)
	}
	if ev := log.of(core.EventJobSnoozed); len(ev) != 1 || ev[0].Cause != core.CauseUndeliverable {
		t.Fatalf("snoozed events %+v", ev)
	}

	// Without a cause: due now, no entry, no event.
	j2 := claimOne(t, c, rw, w, nil)
	if applied, err := rw.HandBack(ctx, []*core.Job{j2}, "", 0, time.Now()); err != nil || !applied[0] {
		t.Fatalf("HandBack without cause: %v, err %v", applied, err)
	}
	got, _ = c.GetJob(ctx, j2.ID)
	if got.State != core.StateAvailable || got.Attempt != 0 || len(got.Errors) != 0 {
		t.Fatalf("job after a plain hand-back: %+v", got)
	}
	if n := len(log.of(core.EventJobSnoozed)); n != 1 {
		t.Fatalf("%d snoozed events, want still 1", n)
	}

	// Report with a hand-back cause.
	j3 := claimOne(t, c, rw, w, nil)
	res, err := rw.Report(ctx, time.Now(), []core.Report{{Job: j3, HandBack: core.CauseLeaseUnrenewed}})
	if err != nil || !res[0].Applied || res[0].Decision.Outcome.Error.Cause != core.CauseLeaseUnrenewed {
		t.Fatalf("Report hand-back: %+v, err %v", res, err)
	}
}

func TestRemoteWorkersExtendAndPausedQueue(t *testing.T) {
	c, rw, _ := remoteClient(t)
	ctx := context.Background()
	w := core.WorkerInfo{ID: "w1", Queues: []string{"paused", core.DefaultQueue}}
	if err := c.PauseQueue(ctx, "paused"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.EnqueueRaw(ctx, "remote", nil, &core.Options{Queue: "paused"}); err != nil {
		t.Fatal(err)
	}
	j := claimOne(t, c, rw, w, nil)
	if j.Queue != core.DefaultQueue {
		t.Fatalf("claimed from %q: a paused queue is skipped", j.Queue)
	}
	until := time.Now().Add(time.Hour)
	n, err := rw.Extend(ctx, "w1", []contract.Lease{{JobID: j.ID, ClaimSeq: j.ClaimSeq}}, until)
	if err != nil || n != 1 {
		t.Fatalf("Extend: %d, err %v", n, err)
	}
	if n, err := rw.Extend(ctx, "w2", []contract.Lease{{JobID: j.ID, ClaimSeq: j.ClaimSeq}}, until); err != nil || n != 0 {
		t.Fatalf("Extend for another worker: %d, err %v", n, err)
	}
}
