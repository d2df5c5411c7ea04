package core

import (
	"time"

	"github.com/backlogq/backlog/core/contract"
)

// Clock is the engine's single time source. Every time the engine hands to a
// store comes from it, truncated to microseconds in UTC. Tests substitute a
// controllable clock; production uses SystemClock.
type Clock interface {
	Now() time.Time
}

// SystemClock reads the operating system's wall clock.
type SystemClock struct{}

// Now returns time.Now in UTC at microsecond precision.
func (SystemClock) Now() time.Time { return contract.UTC(time.Now()) }
