package core

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// heartbeatLoop re-registers the worker and extends the leases of every job
// it holds, once per HeartbeatInterval. A job whose heartbeats stop (crash,
// partition, a stall longer than the lease) is rescued by any node's
// maintenance once its lease runs out.
func (c *Client) heartbeatLoop(ctx context.Context) {
	t := time.NewTicker(c.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.heartbeat(ctx)
		}
	}
}

func (c *Client) heartbeat(ctx context.Context) {
	now := c.clock.Now()
	if err := c.store.RegisterWorker(ctx, c.workerInfo()); err != nil && ctx.Err() == nil {
		c.log.Error("backlog: heartbeat failed", "err", err)
		c.emit(Event{Kind: EventStoreError, At: now, Err: err})
	}
	held := c.handlersRunning()
	n, err := c.store.ExtendLeases(ctx, c.cfg.WorkerID, now.Add(c.cfg.LeaseDuration))
	if err != nil {
		if ctx.Err() == nil {
			c.log.Error("backlog: extending leases failed", "err", err)
			c.emit(Event{Kind: EventStoreError, At: now, Err: err})
		}
		return
	}
	// The store holds at least every job whose handler still runs here
	// (plus outcomes not yet written). Fewer means some lease was lost:
	// find which, and stop those handlers, since their outcomes cannot
	// apply and another worker may be running the job already.
	if n < len(held) {
		c.checkLeases(ctx, held)
	}
}

// handlersRunning returns the executions whose handlers have not returned.
func (c *Client) handlersRunning() []*execution {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*execution, 0, len(c.running))
	for _, e := range c.running {
		if !e.returned.Load() {
			out = append(out, e)
		}
	}
	return out
}

// checkLeases reads each execution's job and cancels, with cause
// ErrLeaseLost, the handlers of jobs this worker no longer holds at that
// attempt.
func (c *Client) checkLeases(ctx context.Context, held []*execution) {
	for _, e := range held {
		j, err := c.store.Get(ctx, e.job.ID)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return // a store problem; the next heartbeat checks again
		}
		if err == nil && j.State == StateRunning && j.WorkerID == c.cfg.WorkerID && j.Attempt == e.job.Attempt {
			continue
		}
		state := "deleted"
		if j != nil {
			state = string(j.State)
		}
		c.log.Warn("backlog: lease lost; stopping the handler", "job_id", e.job.ID, "kind", e.job.Kind, "attempt", e.job.Attempt, "state_now", state)
		e.cancel(fmt.Errorf("%w: job %d is %s", ErrLeaseLost, e.job.ID, state))
	}
}

// listenLoop turns store notifications into wake-ups and local
// cancellations, reconnecting after failures.
func (c *Client) listenLoop(ctx context.Context, n Notifier) {
	failures := 0
	for ctx.Err() == nil {
		ch, err := n.Listen(ctx)
		if errors.Is(err, ErrUnsupported) {
			c.log.Debug("backlog: store notifications are off; polling", "err", err)
			return
		}
		if err != nil {
			failures++
			c.log.Warn("backlog: listening for notifications failed; polling meanwhile", "err", err)
			if !sleepCtx(ctx, retryDelay(failures, c.cfg.PollInterval)) {
				return
			}
			continue
		}
		failures = 0
		for note := range ch {
			switch note.Kind {
			case NotifyInsert, NotifyResume:
				if p := c.producers[note.Queue]; p != nil {
					p.wake()
				}
			case NotifyCancel:
				c.cancelLocal(note.JobID)
			}
		}
		// The store closed the channel (connection lost): wake everyone in
		// case notifications were missed, then listen again.
		for _, p := range c.producers {
			p.wake()
		}
		if !sleepCtx(ctx, 100*time.Millisecond) {
			return
		}
	}
}
