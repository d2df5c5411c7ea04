package main

import (
	"testing"

	"github.com/backlogq/backlog/storetest/dbtest"
)

// TestRun runs the example on a fresh database of the server named by
// BACKLOG_TEST_MYSQL_DSN: one order shipped exactly once, with one
// follow-up job, after a failed first attempt whose writes rolled back.
func TestRun(t *testing.T) {
	if err := run(dbtest.MySQLDSN(t)); err != nil {
		t.Fatal(err)
	}
}
