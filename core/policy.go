package core

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

// This file holds the claim policies a queue's record may carry besides
// its concurrency limits (QueueLimits): rate limits, priority aging and
// the fair claim across partition keys, and the parts of ClaimRoom that
// apply them. Stores that implement QueueLimiter take the same limited
// claim path for all of them; see QueueLimiter.

// Rate-limited groups, as stores key their GCRA instants: the queue as a
// whole, one kind, one partition key.
const (
	rateGroupKindPfx = "kind:"
)

// ParseRateLimit parses a rate written "N/PERIOD": N starts per PERIOD,
// a Go duration ("100/1m", "5/1.5s") or a bare unit ("10/s", "600/m",
// "1000/h" mean one second, minute, hour). "" and "0" mean no rate. It
// returns an error wrapping ErrInvalidJob for anything else or a rate
// RateLimit.Validate refuses.
func ParseRateLimit(s string) (RateLimit, error) {
	if s == "" || s == "0" {
		return RateLimit{}, nil
	}
	n, per, ok := strings.Cut(s, "/")
	if !ok {
		return RateLimit{}, invalid("rate %q must be N/PERIOD, like 10/s or 100/1m", s)
	}
	starts, err := strconv.Atoi(strings.TrimSpace(n))
	if err != nil {
		return RateLimit{}, invalid("rate %q: %q is not a number of starts", s, n)
	}
	per = strings.TrimSpace(per)
	var d time.Duration
	switch per {
	case "s":
		d = time.Second
	case "m":
		d = time.Minute
	case "h":
		d = time.Hour
	default:
		if d, err = time.ParseDuration(per); err != nil {
			return RateLimit{}, invalid("rate %q: period %q is not a duration like 1s, 1m or 1h", s, per)
		}
	}
	r := RateLimit{Starts: starts, Per: d}
	if starts == 0 {
		r = RateLimit{}
	}
	if err := r.Validate(); err != nil {
		return RateLimit{}, err
	}
	return r, nil
}

// RateWaits returns the rate-limited groups of queue whose next start is
// in the future, with when it is (see QueueLimits.RateWaits): what an
// operator sees of jobs waiting for their rate. It returns nil when the
// queue has no rate limit, and an error wrapping ErrUnsupported when the
// store is not a QueueLimiter, or ErrInvalidJob for an invalid queue
// name.
func (c *Client) RateWaits(ctx context.Context, queue string) ([]RateWait, error) {
	if err := contract.ValidateQueueName(queue); err != nil {
		return nil, err
	}
	ql, ok := c.store.(contract.QueueLimiter)
	if !ok {
		return nil, fmt.Errorf("backlog: queue rate limits: %w", ErrUnsupported)
	}
	return QueueRateWaits(ctx, ql, queue, c.clock.Now())
}

// QueueRateWaits reads queue's limits and, when it has a rate limit, its
// rate instants from ql, and returns the groups whose next start is after
// now (QueueLimits.RateWaits): nil for a queue without rate limits, a
// non-nil empty slice for one whose groups all may start. It is what
// Client.RateWaits and the metrics read.
func QueueRateWaits(ctx context.Context, ql contract.QueueLimiter, queue string, now time.Time) ([]RateWait, error) {
	l, err := ql.QueueLimits(ctx, queue)
	if err != nil {
		return nil, err
	}
	if !l.HasRates() {
		return nil, nil
	}
	states, err := ql.QueueRateStates(ctx, queue, now)
	if err != nil {
		return nil, err
	}
	if w := l.RateWaits(states, now); w != nil {
		return w, nil
	}
	return []RateWait{}, nil
}

// WorkersMetadataPrefix prefixes the keys of the metadata a node
// registers (WorkerInfo.Metadata) that say how many jobs of each queue it
// runs at once: "backlog.workers.<queue>" → a decimal count, its
// configured MaxWorkers or QueueLimits.WorkersPerNode when set, as of the
// node's last heartbeat.
const WorkersMetadataPrefix = "backlog.workers."
