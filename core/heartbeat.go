package core

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

// heartbeatLoop re-registers the worker and renews the leases of the jobs
// it holds, once per HeartbeatInterval, or every second while the store is
// unreachable (so leases are renewed as soon as it answers again). A job
// whose heartbeats stop (crash, partition, a stall longer than the lease)
// is rescued by any node's maintenance once its lease runs out; before
// that happens, a node that could not renew stops the job's handler
// itself, so no handler runs on past its lease.
func (c *Client) heartbeatLoop(ctx context.Context) {
	for {
		wait := c.cfg.HeartbeatInterval
		if !c.heartbeat(ctx) {
			wait = min(wait, time.Second)
		}
		if !sleepCtx(ctx, wait) {
			return
		}
	}
}

// heartbeat runs one round and reports whether the store answered.
func (c *Client) heartbeat(ctx context.Context) bool {
	now := c.clock.Now()
	// Every store call of a round is bounded, so a hung connection never
	// keeps the round from checking leases again.
	cctx, cancel := context.WithTimeout(ctx, c.cfg.HeartbeatInterval)
	defer cancel()
	err := c.store.RegisterWorker(cctx, c.workerInfo())
	held := c.held()
	leases := make([]contract.Lease, len(held))
	for i, e := range held {
		leases[i] = contract.Lease{JobID: e.job.ID, ClaimSeq: e.job.ClaimSeq}
	}
	until := now.Add(c.cfg.LeaseDuration)
	n := 0
	if err == nil && len(leases) > 0 {
		n, err = c.store.ExtendLeases(cctx, c.cfg.WorkerID, leases, until)
	}
	if err != nil {
		if ctx.Err() == nil {
			c.stopUnrenewed(c.clock.Now())
			if c.reach.observe(c, err) {
				c.emit(Event{Kind: EventStoreError, At: now, Err: err})
			} else {
				c.log.Debug("backlog: heartbeat failed", "err", err)
			}
		}
		return false
	}
	c.reach.observe(c, nil)
	if n == len(leases) {
		for _, e := range held {
			e.leaseUntil.Store(until.UnixNano())
		}
	} else {
		// Fewer renewed than held: find which lease was lost and stop
		// those handlers, since their outcomes cannot apply and another
		// worker may be running the job already.
		c.checkLeases(cctx, held, until)
	}
	c.handBackOrphans(cctx)
	return true
}

// held returns every execution this node holds: handlers running, and
// handlers returned whose outcome is not written yet (their leases must
// last until it is, or an outage would let them be rescued and run again).
func (c *Client) held() []*execution {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*execution, 0, len(c.running))
	for _, e := range c.running {
		out = append(out, e)
	}
	return out
}

// stopUnrenewed runs after a round that could not renew leases. It stops,
// with cause errLeaseUnrenewed, the handlers whose lease would run out
// before the next round could renew it: that round starts within a second
// and its calls are bounded by one HeartbeatInterval. Their jobs are
// handed back; another node may rescue them once the lease has run out,
// and by then no handler of this node runs them. Executions whose handler
// has returned and whose outcome waits for the store are warned about
// once each: their lease may run out before the outcome is written.
func (c *Client) stopUnrenewed(now time.Time) {
	limit := now.Add(c.cfg.HeartbeatInterval + time.Second).UnixNano()
	for _, e := range c.held() {
		if e.leaseUntil.Load() > limit {
			continue
		}
		until := time.Unix(0, e.leaseUntil.Load()).UTC()
		if !e.returned.Load() {
			c.log.Warn("backlog: lease could not be renewed; stopping the handler before it runs out",
				"job_id", e.job.ID, "kind", e.job.Kind, "attempt", e.job.Attempt, "lease_until", until)
			e.cancel(errLeaseUnrenewed)
		} else if !e.warnedOutcome.Swap(true) {
			// The handler has returned; its outcome waits for the store.
			// Nothing is left to stop: if the store stays out of reach
			// past the lease, another node may rescue the job and run it
			// again (docs/guarantees.md, promise 6), and this outcome
			// will be refused as the lease's loss.
			c.log.Warn("backlog: lease could not be renewed while the outcome waits to be written; it may run out first",
				"job_id", e.job.ID, "kind", e.job.Kind, "attempt", e.job.Attempt, "lease_until", until)
		}
	}
}

// checkLeases reads each execution's job and cancels, with cause
// ErrLeaseLost, the handlers of jobs this worker no longer holds at that
// claim. Executions still held get until as their lease when the store
// says so.
func (c *Client) checkLeases(ctx context.Context, held []*execution, until time.Time) {
	for _, e := range held {
		j, err := c.store.Get(ctx, e.job.ID)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return // a store problem; the next heartbeat checks again
		}
		if err == nil && j.State == StateRunning && j.WorkerID == c.cfg.WorkerID && j.ClaimSeq == e.job.ClaimSeq {
			if !j.LeaseUntil.IsZero() {
				e.leaseUntil.Store(j.LeaseUntil.UnixNano())
			}
			continue
		}
		if e.returned.Load() {
			continue // its outcome is on its way; the completer reports it
		}
		state := "deleted"
		if j != nil {
			state = string(j.State)
		}
		c.log.Warn("backlog: lease lost; stopping the handler", "job_id", e.job.ID, "kind", e.job.Kind, "attempt", e.job.Attempt, "state_now", state)
		e.cancel(fmt.Errorf("%w: job %d is %s", ErrLeaseLost, e.job.ID, state))
	}
}

// handBackOrphans finds running jobs the store says this worker holds but
// this worker does not know about (a claim that committed while its reply
// was lost: connection reset, server killed) and hands them back at once,
// without using an attempt and keeping their place in the queue. Without
// it they would sit in running until their lease ran out. It holds the
// claim gate exclusively, so no claim is between the store and tracking;
// when a claim holds the gate (it may hang on a dead connection) the check
// waits for the next round.
func (c *Client) handBackOrphans(ctx context.Context) {
	if !c.claimGate.TryLock() {
		return
	}
	defer c.claimGate.Unlock()
	jobs, err := c.store.List(ctx, ListParams{WorkerID: c.cfg.WorkerID, States: []State{StateRunning}, Limit: 1000})
	if err != nil {
		if ctx.Err() == nil {
			c.log.Debug("backlog: listing held jobs failed", "err", err)
		}
		return
	}
	now := c.clock.Now()
	var outs []contract.Outcome
	var orphans []*Job
	c.mu.Lock()
	for _, j := range jobs {
		if e := c.running[j.ID]; e != nil && e.job.ClaimSeq == j.ClaimSeq {
			continue
		}
		orphans = append(orphans, j)
		outs = append(outs, HandBack(j, CauseClaimLost, now))
	}
	c.mu.Unlock()
	if len(outs) == 0 {
		return
	}
	res, err := c.store.Finish(ctx, outs)
	if err != nil {
		c.log.Debug("backlog: handing back unknown claims failed; next round retries", "err", err)
		return
	}
	for i, r := range res {
		if !r.Applied {
			continue
		}
		j := orphans[i]
		c.log.Warn("backlog: handed back a job this worker never received (its claim's reply was lost)", "job_id", j.ID, "kind", j.Kind, "attempt", j.Attempt)
		c.emit(Event{Kind: EventJobSnoozed, At: now, Queue: j.Queue, Job: j, Cause: CauseClaimLost})
		c.wakeAt(j.Queue, j.RunAt)
	}
}

// listenLoop turns store notifications into wake-ups and local
// cancellations, reconnecting after failures (FollowNotifications).
func (c *Client) listenLoop(ctx context.Context, n contract.Notifier) {
	wakeAll := func() {
		// Notifications may have been missed: wake everyone.
		for _, p := range c.producers {
			p.wake()
		}
	}
	err := FollowNotifications(ctx, n, c.log, "backlog: ", c.cfg.PollInterval, nil, func(note contract.Notification) {
		switch note.Kind {
		case contract.NotifyInsert, contract.NotifyResume:
			if p := c.producers[note.Queue]; p != nil {
				p.wake()
			}
		case contract.NotifyCancel:
			c.cancelNotified(ctx, note.JobID)
		}
	}, wakeAll)
	if err != nil {
		// Said once, at Info: a store that cannot notify here (poll-only
		// mode, a transaction pooler) makes every wake-up wait for the
		// poll interval, which an operator should be able to see.
		c.log.Info("backlog: store notifications unavailable; waking on the poll interval", "poll_interval", c.cfg.PollInterval, "err", err)
	}
}

// cancelNotified stops the handler of job id on this node for a
// NotifyCancel, once the store confirms the cancel of that very execution:
// a notification may arrive after the job was retried and claimed again
// (MySQL's poller delivers up to its interval late, PostgreSQL's after the
// commit), and stopping that new execution would throw its work away and
// leave the job running until its lease ran out. The check reads the job
// on a goroutine of its own, so the listener never waits on the store;
// when the read fails (a deleted job included) the handler is stopped, as
// the notification asked.
func (c *Client) cancelNotified(ctx context.Context, id int64) {
	c.mu.Lock()
	e := c.running[id]
	c.mu.Unlock()
	if e == nil {
		return
	}
	go func() {
		rctx, cancel := context.WithTimeout(ctx, c.cfg.HeartbeatInterval)
		defer cancel()
		j, err := c.store.Get(rctx, id)
		if err == nil && (j.State != StateCancelled || j.ClaimSeq != e.job.ClaimSeq) {
			c.log.Debug("backlog: cancel notification for a job not cancelled at this claim; ignored",
				"job_id", id, "state", j.State, "claim_seq", e.job.ClaimSeq, "stored_claim_seq", j.ClaimSeq)
			return
		}
		e.cancel(errJobCancelled)
	}()
}
