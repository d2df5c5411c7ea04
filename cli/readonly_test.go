package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Read-only commands neither create nor migrate a database: against a
// SQLite file that does not exist they say so and leave no file behind.
func TestReadCommandsDoNotCreateTheDatabase(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "missing.db")
	db := "sqlite:" + path
	for _, args := range [][]string{{"jobs", "list"}, {"jobs", "get", "1"}, {"queues"}, {"workers"}} {
		r := cli(t, db, args...)
		if r.code != exitRuntime || !strings.Contains(r.stderr, "no database at "+db+": the file does not exist") {
			t.Errorf("%v: %s", args, r)
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Fatalf("%v created %s (stat: %v)", args, path, err)
		}
	}
	mustCLI(t, db, "migrate")
	if r := cli(t, db, "jobs", "get", "7"); r.code != exitRuntime || !strings.Contains(r.stderr, "job 7: not found") || strings.Contains(r.stderr, "migrate") {
		t.Errorf("a missing job: %s", r)
	}
	mustCLI(t, db, "jobs", "list")
}

func TestReadOnlyURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"sqlite:a.db":                "sqlite:a.db?create=false&migrate=false",
		"sqlite:a.db?migrate=true":   "sqlite:a.db?create=false&migrate=true",
		"sqlite::memory:":            "sqlite::memory:",
		"postgres://u@h/db?schema=s": "postgres://u@h/db?migrate=false&schema=s",
		"mysql://u@h:3306/db":        "mysql://u@h:3306/db?migrate=false",
		"memory:":                    "memory:",
	} {
		if got := readOnlyURL(in); got != want {
			t.Errorf("readOnlyURL(%q) = %q, want %q", in, got, want)
		}
	}
}
