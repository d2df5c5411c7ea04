package cli

import (
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite"
)

// TestMigrateHintOnlyForAnOldSchema: a read command suggests backlog
// migrate when the database answers that a table is missing (a schema
// older than the binary), not when the database cannot be reached
// (it did for connection refused and for a server shutting down).
func TestMigrateHintOnlyForAnOldSchema(t *testing.T) {
	const hint = "run backlog migrate"
	r := cli(t, "postgres://root@127.0.0.1:1/test?sslmode=disable&connect_timeout=2", "jobs", "list")
	if r.code == 0 || strings.Contains(r.stderr, hint) {
		t.Fatalf("connection refused: exit %d, stderr %q; want a failure without the migrate hint", r.code, r.stderr)
	}
	path := filepath.Join(t.TempDir(), "empty.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE unrelated (x INTEGER)"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	r = cli(t, "sqlite:"+path, "jobs", "list")
	if r.code == 0 || !strings.Contains(r.stderr, hint) {
		t.Fatalf("a database without backlog's tables: exit %d, stderr %q; want the migrate hint", r.code, r.stderr)
	}
}

// TestErrorLineKeepsTabs: a multi-line database error keeps its tabs (a
// literal \t was printed) while escape sequences stay escaped.
func TestErrorLineKeepsTabs(t *testing.T) {
	got := errorLine(errors.New("ERROR: x (SQLSTATE 1)\n\tDETAIL: y \x1b[31m"))
	want := "backlog: ERROR: x (SQLSTATE 1)\n\tDETAIL: y \\x1b[31m\n"
	if got != want {
		t.Fatalf("errorLine = %q; want %q", got, want)
	}
}
