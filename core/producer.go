package core

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// producer is one queue's fetch loop: it claims as many due jobs as it has
// free slots, never more, and starts an execution for each.
type producer struct {
	c      *Client
	queue  string
	max    int
	active atomic.Int64
	more   atomic.Bool // the last claim filled its limit: the queue likely has more
	wakeCh chan struct{}
}

func newProducer(c *Client, queue string, maxWorkers int) *producer {
	return &producer{c: c, queue: queue, max: maxWorkers, wakeCh: make(chan struct{}, 1)}
}

// wake asks the loop to claim now (coalescing: many wakes make one claim).
func (p *producer) wake() {
	select {
	case p.wakeCh <- struct{}{}:
	default:
	}
}

// jobDone frees a slot; under load (the last claim was full) it wakes the
// loop so the slot is refilled without waiting for a poll.
func (p *producer) jobDone() {
	p.active.Add(-1)
	if p.more.Load() {
		p.wake()
	}
}

func (p *producer) run(ctx context.Context) {
	c := p.c
	poll := time.NewTicker(c.cfg.PollInterval)
	defer poll.Stop()
	var lastClaim time.Time
	failures := 0
	for {
		free := p.max - int(p.active.Load())
		if free > 0 {
			// Under load, slots free one by one. Claim at once when a good
			// share of them is free; otherwise wait out the cooldown (or
			// more freed slots) so one claim gathers many jobs.
			if wait := c.cfg.FetchCooldown - time.Since(lastClaim); wait > 0 && free < p.batchThreshold() {
				t := time.NewTimer(wait)
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-p.wakeCh:
				case <-t.C:
				}
				t.Stop()
				continue
			}
			lastClaim = time.Now()
			n, err := p.claim(ctx, min(free, c.cfg.MaxClaim))
			switch {
			case ctx.Err() != nil:
				return
			case err != nil:
				failures++
				if unreachable(err) {
					// The outage is logged once, by the reachability tracker.
					c.log.Debug("backlog: claim failed", "queue", p.queue, "err", err, "failures", failures)
				} else {
					c.log.Error("backlog: claim failed", "queue", p.queue, "err", err, "failures", failures)
				}
				c.emit(Event{Kind: EventStoreError, At: c.clock.Now(), Queue: p.queue, Err: err})
				if !sleepCtx(ctx, retryDelay(failures, c.cfg.PollInterval)) {
					return
				}
				continue
			default:
				failures = 0
			}
			// A full claim that still left slots free (MaxClaim < free)
			// goes round again at once.
			if n == c.cfg.MaxClaim && n < free {
				continue
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-p.wakeCh:
		case <-poll.C:
		}
	}
}

// batchThreshold is the number of free slots worth a claim before the
// cooldown has passed: half the queue's workers, at most MaxClaim.
func (p *producer) batchThreshold() int {
	return max(1, min(p.max/2, p.c.cfg.MaxClaim))
}

// claim takes up to limit jobs and starts them, returning how many.
// Claims hold the claim gate shared until their jobs are tracked, so the
// heartbeat's orphan check (which holds it exclusively) sees every job a
// finished claim returned.
func (p *producer) claim(ctx context.Context, limit int) (int, error) {
	c := p.c
	c.claimGate.RLock()
	defer c.claimGate.RUnlock()
	now := c.clock.Now()
	lease := now.Add(c.cfg.LeaseDuration)
	jobs, err := c.store.Claim(ctx, ClaimParams{
		Queue: p.queue, WorkerID: c.cfg.WorkerID, Limit: limit,
		Now: now, LeaseUntil: lease, Tags: c.cfg.WorkerTags,
	})
	c.reach.observe(c, err)
	if errors.Is(err, ErrQueuePaused) {
		p.more.Store(false)
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	p.more.Store(len(jobs) == limit)
	for _, j := range jobs {
		p.active.Add(1)
		c.execs.Add(1)
		go c.execute(p, c.track(j, lease))
	}
	return len(jobs), nil
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
