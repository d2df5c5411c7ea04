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

// NextRetry implements RetryPolicy.
func (e ExponentialBackoff) NextRetry(job *Job, _ error) time.Duration {
	base, maxD, jitter := e.Base, e.Max, e.Jitter
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
