package main

import (
	"path/filepath"
	"testing"
)

// TestRun runs the example: one order shipped exactly once, after a
// failed first attempt whose write rolled back.
func TestRun(t *testing.T) {
	if err := run(filepath.Join(t.TempDir(), "shop.db")); err != nil {
		t.Fatal(err)
	}
}
