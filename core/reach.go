package core

import (
	"context"
	"errors"
	"sync"
	"time"
)

// reachability follows whether this node can reach its store, from the
// results of its own store calls (claims, heartbeats, finishes,
// maintenance). It serves two purposes:
//
//   - Logs: an outage is reported once when it starts and once when it
//     ends, not by every failing call.
//   - Rescue grace: after an outage the node's maintenance waits
//     RescueGrace before rescuing expired leases, so live workers, which
//     were cut off just as long, write their outcomes and renew their
//     leases first. (The time this node could not reach the store is not
//     held against other workers' leases.)
type reachability struct {
	mu        sync.Mutex
	down      bool
	downSince time.Time
	upSince   time.Time // when the store last became reachable (zero: from the start)
}

// observe records the result of one store call made at now and reports
// whether err is the first failure of an outage (worth an ERROR line);
// later failures of the same outage are worth a debug line only. Errors
// of the call's own context and the contract's sentinels (paused, not
// found, invalid state, lease lost, unsupported) say nothing about
// reachability.
func (r *reachability) observe(c *Client, err error) (first bool) {
	if err != nil && !unreachable(err) {
		return true
	}
	now := c.clock.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		if r.down {
			r.down = false
			r.upSince = now
			c.log.Info("backlog: store reachable again", "unreachable_for", now.Sub(r.downSince).Round(time.Millisecond).String())
		}
		return false
	}
	if r.down {
		return false
	}
	r.down, r.downSince = true, now
	c.log.Error("backlog: store unreachable; retrying until it answers (further failures are logged at debug level)", "err", err)
	return true
}

// settled reports whether the store has been reachable, without a failure
// seen by this node, since at least grace before now.
func (r *reachability) settled(now time.Time, grace time.Duration) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.down && !now.Before(r.upSince.Add(grace))
}

// unreachable reports whether err looks like the store being out of reach
// rather than a refusal of this particular call.
func unreachable(err error) bool {
	switch {
	case errors.Is(err, context.Canceled),
		errors.Is(err, ErrQueuePaused), errors.Is(err, ErrNotFound), errors.Is(err, ErrInvalidState),
		errors.Is(err, ErrLeaseLost), errors.Is(err, ErrUnsupported), errors.Is(err, ErrClosed):
		return false
	}
	return true
}
