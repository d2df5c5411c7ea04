package main

import (
	"testing"

	"github.com/backlogq/backlog/storetest/dbtest"
)

// TestRun runs the example on a fresh database of the server named by
// BACKLOG_TEST_POSTGRES_DSN.
func TestRun(t *testing.T) {
	if err := run(dbtest.PostgresDSN(t)); err != nil {
		t.Fatal(err)
	}
}
