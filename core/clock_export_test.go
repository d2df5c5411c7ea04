package core

import (
	"sync"
	"time"
)

// ManualClock is a Clock the tests of this package (internal and
// external) set by hand. It exists only in test builds.
type ManualClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewManualClock returns a clock standing at now.
func NewManualClock(now time.Time) *ManualClock { return &ManualClock{now: now} }

// Now returns the clock's time.
func (m *ManualClock) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

// Add moves the clock by d.
func (m *ManualClock) Add(d time.Duration) {
	m.mu.Lock()
	m.now = m.now.Add(d)
	m.mu.Unlock()
}
