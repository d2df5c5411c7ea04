package readmetest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMySQLClaimAsRun: wherever the README and the docs name MySQL 8 as
// a server the MySQL store is for, they say it has not been run: the
// tests run on MariaDB only (docs/mysql.md, "Versions run"). The stores
// table once listed "MySQL 8.0.1+" as if it were tested.
func TestMySQLClaimAsRun(t *testing.T) {
	root := repoRoot(t)
	stores := section(t, readme(t), "Stores")
	var row string
	for _, line := range strings.Split(stores, "\n") {
		if strings.Contains(line, "mysql://") {
			row = line
			break
		}
	}
	if row == "" {
		t.Fatal("README.md's Stores table has no mysql:// row")
	}
	if !strings.Contains(row, "MySQL 8") || !strings.Contains(row, "untested") || !strings.Contains(row, "MariaDB 10.11") {
		t.Errorf("README.md's MySQL row must say MySQL 8 is untested and MariaDB 10.11 is what ran:\n%s", row)
	}
	for _, doc := range []string{"docs/mysql.md", "docs/architecture.md"} {
		b, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "MySQL 8.0.1+") && !strings.Contains(line, "never run") && !strings.Contains(line, "(tested") && !strings.Contains(line, "SKIP LOCKED (default") {
				t.Errorf("%s claims MySQL 8.0.1+ without saying it was not run:\n%s", doc, line)
			}
		}
	}
}
