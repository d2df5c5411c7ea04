//go:build race

package cli

// raceEnabled: the test binary has the race detector, so binaries that
// tests build use it too (and reuse the compiled packages).
const raceEnabled = true
