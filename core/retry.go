package core

import (
	"math"
	"math/rand/v2"
	"time"
)

// RetryPolicy decides how long a job waits before its next attempt after
// attempt job.Attempt failed with err. The engine discards the job instead
// when its attempts are used up, so a policy never has to.
type RetryPolicy interface {
	NextRetry(job *Job, err error) time.Duration
}

// RetryFunc adapts a function to RetryPolicy.
type RetryFunc func(job *Job, err error) time.Duration

// NextRetry calls f.
func (f RetryFunc) NextRetry(job *Job, err error) time.Duration { return f(job, err) }

// ExponentialBackoff waits Base·2^(attempt−1), capped at Max, then spreads
// the wait by ±Jitter (a fraction, 0..1) so failed jobs don't retry in
// lockstep. The zero value means Base 1 s, Max 24 h, Jitter 0.25: attempt 1
// waits about 1 s, attempt 10 about 8.5 min, attempt 17 and later 24 h.
// A negative Jitter means none: the waits are exact.
type ExponentialBackoff struct {
	Base   time.Duration // wait after attempt 1; 0 means 1 s
	Max    time.Duration // cap of the wait before jitter; 0 means 24 h
	Jitter float64       // ± fraction of the wait, 0..1; 0 means 0.25, negative none
}

// settings returns e's Base, Max and Jitter with the zero values'
// defaults filled in (1 s, 24 h, 0.25; a negative Jitter is 0).
func (e ExponentialBackoff) settings() (base, maxD time.Duration, jitter float64) {
	base, maxD, jitter = e.Base, e.Max, e.Jitter
	if base <= 0 {
		base = time.Second
	}
	if maxD <= 0 {
		maxD = 24 * time.Hour
	}
	switch {
	case jitter < 0:
		jitter = 0
	case jitter == 0 || jitter > 1:
		jitter = 0.25
	}
	return base, maxD, jitter
}

// NextRetry implements RetryPolicy.
func (e ExponentialBackoff) NextRetry(job *Job, _ error) time.Duration {
	base, maxD, jitter := e.settings()
	n := max(job.Attempt, 1)
	d := float64(base) * math.Pow(2, float64(n-1))
	d = min(d, float64(maxD))
	d *= 1 + jitter*(2*rand.Float64()-1)
	return time.Duration(d)
}

// DelayList is an explicit retry schedule: the wait after attempt n is
// DelayList[n−1], and the last entry repeats for later attempts (so
// DelayList{10s, 20s, 30s} waits 10 s, 20 s, then 30 s every time after).
// An empty list retries at once.
type DelayList []time.Duration

// NextRetry implements RetryPolicy.
func (l DelayList) NextRetry(job *Job, _ error) time.Duration {
	if len(l) == 0 {
		return 0
	}
	i := min(max(job.Attempt-1, 0), len(l)-1)
	return l[i]
}

// WithMaxAttempts sets how many attempts a job of the kind gets when it
// is enqueued without Options.MaxAttempts (or with an InsertParams whose
// MaxAttempts is 0), in place of DefaultMaxAttempts: given to a handler
// or to Handlers.Declare, it holds for every client that knows the kind
// (Enqueue, EnqueueMany, EnqueueTx, periodic jobs, the HTTP API's
// submissions). A job enqueued with its own MaxAttempts keeps it. n below
// 1 is ignored. With WithRetries, the later option wins.
func WithMaxAttempts(n int) KindOption {
	return func(c *kindConfig) {
		if n >= 1 {
			c.maxAttempts = n
		}
	}
}

// WithRetries declares a kind's whole retry schedule: a failed attempt is
// retried exactly len(delays) times, retry i after delays[i-1] (a
// DelayList), so a job of the kind gets len(delays)+1 attempts when it is
// enqueued without its own MaxAttempts (as WithMaxAttempts sets). No
// delays means no retry: one attempt. It replaces WithRetry and
// WithMaxAttempts given before it; a later one of either replaces its
// half. Negative delays count as 0. A job enqueued with more attempts
// than len(delays)+1 waits the last delay before each later retry.
func WithRetries(delays ...time.Duration) KindOption {
	dl := make(DelayList, len(delays))
	for i, d := range delays {
		dl[i] = max(d, 0)
	}
	return func(c *kindConfig) {
		c.retry = dl
		c.maxAttempts = len(dl) + 1
	}
}

// MaxAttempts returns how many attempts a job of kind gets when it is
// enqueued without its own: the kind's WithMaxAttempts or WithRetries
// (given to its handler or to Handlers.Declare), else
// DefaultMaxAttempts. Enqueue applies it; transports that build
// InsertParams themselves (core.NewInsertRaw fills DefaultMaxAttempts)
// pass it as Options.MaxAttempts.
func (c *Client) MaxAttempts(kind string) int { return c.cfg.Handlers.maxAttempts(kind) }

// maxAttempts returns kind's default attempts (see Client.MaxAttempts);
// DefaultMaxAttempts for a nil registry.
func (h *Handlers) maxAttempts(kind string) int {
	if e := h.lookup(kind); e != nil && e.maxAttempts > 0 {
		return e.maxAttempts
	}
	return DefaultMaxAttempts
}
