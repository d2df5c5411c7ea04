package core

import (
	"context"
	"errors"
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
	if _, err := c.store.ExtendLeases(ctx, c.cfg.WorkerID, now.Add(c.cfg.LeaseDuration)); err != nil && ctx.Err() == nil {
		c.log.Error("backlog: extending leases failed", "err", err)
		c.emit(Event{Kind: EventStoreError, At: now, Err: err})
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
