package cli

import (
	"os"
	"testing"
)

// TestMain lets the test binary stand in for the backlog binary as the
// process group watchdog of the shell commands that tests run.
func TestMain(m *testing.M) {
	if parent, ok := watchdogParent(os.Getenv); ok {
		os.Exit(runWatchdog(parent))
	}
	os.Exit(m.Run())
}
