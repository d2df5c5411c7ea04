package backlogtest

import (
	"sync"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
)

// Clock is a core.Clock that moves only when told: pass it as
// core.Config.Clock and the engine's every time (enqueue, due, claim,
// outcome, retry backoff) comes from it, so a scheduled or retried job
// becomes due by Advance instead of by sleeping. Its times are UTC at
// microsecond precision, as contract.UTC makes them. It is safe for concurrent
// use.
//
// The zero Clock starts at the system clock's time on first use;
// NewClock starts it where you say.
//
// Only what the engine reads from its clock moves: a started client's
// polls, heartbeats and timeouts still run on wall-clock timers, so after
// Advance its producers see a newly due job at their next poll (or use
// WorkJob, which runs it at once).
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

var _ core.Clock = (*Clock)(nil)

// NewClock returns a clock standing at start (in UTC, truncated to
// microseconds); a zero start means the system clock's time now.
func NewClock(start time.Time) *Clock {
	c := &Clock{}
	c.Set(start)
	return c
}

// Now returns the clock's time: UTC, microsecond precision.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.now.IsZero() {
		c.now = contract.UTC(time.Now())
	}
	return c.now
}

// Set moves the clock to t (in UTC, truncated to microseconds), forward or
// back; a zero t means the system clock's time now.
func (c *Clock) Set(t time.Time) {
	if t.IsZero() {
		t = time.Now()
	}
	c.mu.Lock()
	c.now = contract.UTC(t)
	c.mu.Unlock()
}

// Advance moves the clock by d (negative d moves it back) and returns the
// new time. Durations below a microsecond are lost to the truncation.
func (c *Clock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.now.IsZero() {
		c.now = contract.UTC(time.Now())
	}
	c.now = contract.UTC(c.now.Add(d))
	return c.now
}
