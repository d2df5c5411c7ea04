//go:build race

package sqlite

// raceEnabled: the test binary has the race detector, which makes the
// transpiled SQLite many times slower; the largest tests shrink.
const raceEnabled = true
