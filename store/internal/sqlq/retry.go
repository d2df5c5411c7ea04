package sqlq

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

// Retrier is the one loop the SQL stores run around a call that may fail
// with a transient error (a deadlock, a lock wait timeout, SQLITE_BUSY, a
// serialization failure): it runs the call again after a jittered backoff
// while the error is transient, the retries last and ctx lives. Each store
// passes its own classification of transient errors.
type Retrier struct {
	// Transient reports whether err is worth retrying: the statement or
	// transaction that failed must have taken no effect.
	Transient func(err error) bool
	// Max bounds the retries of one call (0 means 12).
	Max int
	// Base is the first backoff (0 means 2 ms); it doubles per retry up to
	// 500 ms, with jitter over its upper half.
	Base time.Duration
	// Closed, when set, ends the call with core.ErrClosed before any try
	// once it is true (the store's Close).
	Closed *atomic.Bool
	// Retried, when set, counts the retries.
	Retried *atomic.Int64
}

// Do runs fn until it succeeds, fails with an error that is not transient,
// the retries run out or ctx ends, and returns fn's last error (joined with
// ctx's error when ctx ended during a backoff).
func (r Retrier) Do(ctx context.Context, fn func() error) error {
	limit, base := r.Max, r.Base
	if limit <= 0 {
		limit = 12
	}
	if base <= 0 {
		base = 2 * time.Millisecond
	}
	for i := 0; ; i++ {
		if r.Closed != nil && r.Closed.Load() {
			return contract.ErrClosed
		}
		err := fn()
		if err == nil || !r.Transient(err) || i >= limit {
			return err
		}
		if r.Retried != nil {
			r.Retried.Add(1)
		}
		if err := backoff(ctx, i, base, err); err != nil {
			return err
		}
	}
}

// backoff waits before retry i (0-based) of an operation that failed with
// the transient error err: base doubled per retry up to 500 ms, with
// jitter over its upper half. It returns nil after the wait, or err joined
// with ctx's error when ctx ends first.
func backoff(ctx context.Context, i int, base time.Duration, err error) error {
	d := min(base<<min(i, 16), 500*time.Millisecond)
	d = d/2 + rand.N(d/2+1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return errors.Join(err, ctx.Err())
	case <-t.C:
		return nil
	}
}
