package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// bench without --db or BACKLOG_DB runs on a temporary SQLite file that it
// removes afterwards, not on backlog.db in the current directory.
func TestBenchWithoutDBUsesATemporaryFile(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir) // not parallel: the working directory is the process's
	r := cli(t, "", "bench", "burndown", "--jobs", "50", "--workers", "5")
	if r.code != 0 {
		t.Fatalf("bench without --db: %s", r)
	}
	if _, err := os.Stat(filepath.Join(dir, "backlog.db")); !os.IsNotExist(err) {
		t.Fatalf("bench created backlog.db in the working directory (stat: %v)", err)
	}
	m := regexp.MustCompile(`temporary SQLite database, removed afterwards \(sqlite:([^)]+)\)`).FindStringSubmatch(r.stderr)
	if m == nil {
		t.Fatalf("bench does not say where it runs: %s", r)
	}
	if _, err := os.Stat(filepath.Dir(m[1])); !os.IsNotExist(err) {
		t.Errorf("the temporary database's directory %s is still there (stat: %v)", filepath.Dir(m[1]), err)
	}
	if help := cli(t, "", "bench", "--help").stdout; !strings.Contains(help, "temporary SQLite file") {
		t.Errorf("bench --help does not say so:\n%s", help)
	}
}
