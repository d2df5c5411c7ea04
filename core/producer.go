package core

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

// producer is one queue's fetch loop: it claims as many due jobs as it has
// free slots, never more, and starts an execution for each.
//
// With QueueConfig.ClaimAhead (adapted to the jobs' length by default), a
// node also holds claimed jobs per queue waiting for a slot, and runs two
// claims at once: slots freed while a claim is committing are refilled
// from the waiting jobs instead of waiting for that claim. Without it a
// queue's slots turn over at most once per claim round trip (MaxWorkers /
// claim latency jobs per second).
type producer struct {
	c      *Client
	queue  string
	conf   int         // executions at once the node's configuration gives
	ahead  int         // QueueConfig.ClaimAhead: >0 fixed, AutoClaimAhead, <0 none
	more   atomic.Bool // the last claim filled its limit: the queue likely has more
	wakeCh chan struct{}
	// runMean and claimMean are running means (ns) of the queue's handler
	// run times and claim round trips on this node, for AutoClaimAhead.
	runMean, claimMean atomic.Int64

	mu       sync.Mutex
	max      int          // executions at once: conf, or QueueLimits.WorkersPerNode
	active   int          // executions started and not returned
	reserved int          // jobs asked for by claims in flight
	waiting  []*execution // claimed, waiting for a slot (oldest first)
	stopped  bool         // the loop ended: nothing more starts from waiting
}

func newProducer(c *Client, queue string, q QueueConfig) *producer {
	return &producer{c: c, queue: queue, conf: q.MaxWorkers, max: q.MaxWorkers, ahead: q.ClaimAhead, wakeCh: make(chan struct{}, 1)}
}

// wake asks the loop to claim now (coalescing: many wakes make one claim).
func (p *producer) wake() {
	select {
	case p.wakeCh <- struct{}{}:
	default:
	}
}

// jobDone frees a slot: a waiting job takes it at once; otherwise, under
// load (the last claim was full), it wakes the loop so the slot is
// refilled without waiting for a poll.
func (p *producer) jobDone() {
	p.mu.Lock()
	if len(p.waiting) > 0 && !p.stopped && p.active <= p.max {
		e := p.waiting[0]
		p.waiting[0] = nil
		p.waiting = p.waiting[1:]
		p.mu.Unlock()
		p.c.execs.Add(1)
		go p.c.execute(p, e)
		if p.more.Load() {
			p.wake()
		}
		return
	}
	p.active--
	p.mu.Unlock()
	if p.more.Load() {
		p.wake()
	}
}

// free is the number of jobs a claim may ask for now: slots and waiting
// room not taken by running, waiting or requested jobs.
func (p *producer) free() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.max + p.aheadLocked() - p.active - len(p.waiting) - p.reserved
}

// workers returns how many executions the queue runs at once now.
func (p *producer) workers() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.max
}

// setWorkers makes n executions at once the queue's bound (0: the
// configured MaxWorkers). Running executions above a lowered bound run
// to their end; a raised bound starts waiting jobs at once and lets the
// loop claim more.
func (p *producer) setWorkers(n int) {
	if n <= 0 {
		n = p.conf
	}
	p.mu.Lock()
	if n == p.max {
		p.mu.Unlock()
		return
	}
	p.max = n
	var start []*execution
	if !p.stopped {
		k := min(len(p.waiting), max(p.max-p.active, 0))
		start = append(start, p.waiting[:k]...)
		p.waiting = p.waiting[k:]
		p.active += k
	}
	p.mu.Unlock()
	p.c.log.Info("backlog: queue workers on this node changed", "queue", p.queue, "workers", n)
	for _, e := range start {
		p.c.execs.Add(1)
		go p.c.execute(p, e)
	}
	p.wake()
}

// refreshWorkers reads the queue's QueueLimits.WorkersPerNode from the
// store (a QueueLimiter) and applies it; a failed read keeps the bound.
func (p *producer) refreshWorkers(ctx context.Context) {
	ql, ok := p.c.store.(contract.QueueLimiter)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, p.c.cfg.PollInterval)
	defer cancel()
	l, err := ql.QueueLimits(ctx, p.queue)
	if err != nil {
		return
	}
	p.setWorkers(l.WorkersPerNode)
}

// claimResult is what one claim in flight reports back to the loop.
type claimResult struct {
	limit, n int
	took     time.Duration // the store's Claim call
	err      error
}

// claimCostWeight is the weight of the newest claim in the loop's running
// mean of claim durations (1/claimCostWeight).
const claimCostWeight = 8

func (p *producer) run(ctx context.Context) {
	c := p.c
	poll := time.NewTicker(c.cfg.PollInterval)
	defer poll.Stop()
	results := make(chan claimResult, 2) // at most two claims at once
	var claims sync.WaitGroup
	// Claims in flight when the loop stops still track their jobs; wait
	// for them, then hand back the jobs that never started.
	defer p.handBackWaiting()
	defer claims.Wait()
	p.refreshWorkers(ctx)
	// lastStart is when the loop last started a claim, lastClaim when it
	// last started one or had one's result; claimCost is the running mean
	// of claim durations.
	var lastStart, lastClaim, notBefore time.Time
	var claimCost time.Duration
	inFlight, failures := 0, 0
	drained := false // the last claim found fewer jobs than it asked for
	for {
		var timer *time.Timer
		var timeout <-chan time.Time
		if free := p.free(); free > 0 && inFlight < p.claimsAtOnce() && !drained {
			now := time.Now()
			// Under load, slots free one by one. Claim at once when a full
			// claim's worth is free; otherwise wait out the cooldown since
			// the last claim started. While the queue holds more due jobs
			// than the slots (the last claim took all it asked for),
			// gather freed slots instead for the cooldown or for as long
			// as a claim takes, whichever is longer, counted from the last
			// claim's start or result: a claim costs the store about as
			// much for one job as for a hundred (on PostgreSQL the scan
			// past the claim index's dead entries dominates), and short
			// jobs a claim has just started free their slots moments after
			// it returns. Claiming the slots free at that instant would
			// split the slots between two claims in turn, each leaving the
			// other's slots empty while it runs. After a failed claim,
			// wait out its retry delay.
			wait := c.cfg.FetchCooldown - now.Sub(lastStart)
			if p.more.Load() {
				wait = max(c.cfg.FetchCooldown, min(claimCost, c.cfg.PollInterval)) - now.Sub(lastClaim)
			}
			if free >= p.batchThreshold() {
				wait = 0
			}
			wait = max(wait, notBefore.Sub(now))
			if wait <= 0 {
				lastStart, lastClaim = now, now
				limit := min(free, c.cfg.MaxClaim)
				p.mu.Lock()
				p.reserved += limit
				p.mu.Unlock()
				inFlight++
				claims.Add(1)
				go func() {
					defer claims.Done()
					t0 := time.Now()
					n, err := p.claim(ctx, limit)
					results <- claimResult{limit: limit, n: n, took: time.Since(t0), err: err}
				}()
				continue
			}
			timer = time.NewTimer(wait)
			timeout = timer.C
		}
		select {
		case <-ctx.Done():
			stopTimer(timer)
			return
		case r := <-results:
			inFlight--
			if ctx.Err() != nil {
				stopTimer(timer)
				return
			}
			lastClaim = time.Now()
			if r.err == nil {
				if claimCost == 0 {
					claimCost = r.took
				} else {
					claimCost += (r.took - claimCost) / claimCostWeight
				}
				p.claimMean.Store(max(int64(claimCost), 1))
			}
			switch {
			case r.err != nil:
				failures++
				p.claimFailed(r.err, failures)
				notBefore = time.Now().Add(retryDelay(failures, c.cfg.PollInterval))
			case r.n < r.limit:
				// The queue had no more due jobs (or is paused): wait for
				// a wake-up or the poll. A full claim goes round again at
				// once while slots are free.
				failures = 0
				drained = true
			default:
				failures = 0
			}
		case <-p.wakeCh:
			drained = false
		case <-poll.C:
			drained = false
			p.refreshWorkers(ctx)
		case <-timeout:
		}
		stopTimer(timer)
	}
}

// stopTimer stops t if there is one.
func stopTimer(t *time.Timer) {
	if t != nil {
		t.Stop()
	}
}

// claimFailed logs and reports a failed claim: the n-th in a row.
func (p *producer) claimFailed(err error, n int) {
	c := p.c
	if unreachable(err) {
		// The outage is logged once, by the reachability tracker.
		c.log.Debug("backlog: claim failed", "queue", p.queue, "err", err, "failures", n)
	} else {
		c.log.Error("backlog: claim failed", "queue", p.queue, "err", err, "failures", n)
	}
	c.emit(Event{Kind: EventStoreError, At: c.clock.Now(), Queue: p.queue, Err: err})
}

// batchThreshold is the number of free slots worth a claim at once: the
// queue's workers, at most MaxClaim.
func (p *producer) batchThreshold() int {
	return max(1, min(p.workers(), p.c.cfg.MaxClaim))
}

// claim takes up to limit jobs, starts as many as there are free slots
// and keeps the rest waiting, returning how many it took. The caller
// reserved limit jobs; the reservation ends here, as the jobs are
// counted. Claims hold the claim gate shared until their jobs are
// tracked, so the heartbeat's orphan check (which holds it exclusively)
// sees every job a finished claim returned.
func (p *producer) claim(ctx context.Context, limit int) (int, error) {
	c := p.c
	c.claimGate.RLock()
	defer c.claimGate.RUnlock()
	now := c.clock.Now()
	lease := now.Add(c.cfg.LeaseDuration)
	jobs, err := c.store.Claim(ctx, contract.ClaimParams{
		Queue: p.queue, WorkerID: c.cfg.WorkerID, Limit: limit,
		Now: now, LeaseUntil: lease, Tags: c.cfg.WorkerTags,
	})
	c.reach.observe(c, err)
	if errors.Is(err, ErrQueuePaused) {
		err = nil
	}
	if err != nil || len(jobs) == 0 {
		p.mu.Lock()
		p.reserved -= limit
		p.mu.Unlock()
		p.more.Store(false)
		return 0, err
	}
	p.more.Store(len(jobs) == limit)
	execs := make([]*execution, len(jobs))
	for i, j := range jobs {
		execs[i] = c.track(j, lease)
	}
	p.mu.Lock()
	p.reserved -= limit
	start := min(len(execs), max(p.max-p.active, 0))
	p.active += start
	p.waiting = append(p.waiting, execs[start:]...)
	c.execs.Add(start)
	p.mu.Unlock()
	for _, e := range execs[:start] {
		go c.execute(p, e)
	}
	return len(jobs), nil
}

// handBackWaiting runs when the loop has ended: claimed jobs still waiting
// for a slot are handed back unrun (available again, no attempt used, no
// error entry) through the completer, so a stopping node keeps none.
func (p *producer) handBackWaiting() {
	p.mu.Lock()
	p.stopped = true
	waiting := p.waiting
	p.waiting = nil
	p.mu.Unlock()
	c := p.c
	now := c.clock.Now()
	for _, e := range waiting {
		o := HandBack(e.job, CauseShutdown, now)
		o.Error = nil
		c.completer.add(pendingOutcome{job: e.job, exec: e, ev: EventJobSnoozed, cause: CauseShutdown, o: o})
	}
}

// wakeAt wakes queue's producer on this node when runAt comes, if that is
// sooner than its next poll: a job this node retried, snoozed or continued
// runs on time without waiting for the poll.
func (c *Client) wakeAt(queue string, runAt time.Time) {
	p := c.producers[queue]
	if p == nil {
		return
	}
	d := runAt.Sub(c.clock.Now())
	switch {
	case d <= 0:
		p.wake()
	case d < c.cfg.PollInterval:
		time.AfterFunc(d, p.wake)
	}
}

// retryDelay is the wait after the n-th consecutive store failure: 50 ms
// doubling, capped at ceiling (at least 1 s).
func retryDelay(n int, ceiling time.Duration) time.Duration {
	ceiling = max(ceiling, time.Second)
	d := 50 * time.Millisecond << min(n, 10)
	return min(d, ceiling)
}

// sleepCtx sleeps d or until ctx ends; it reports whether ctx is still live.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
