package cli

import (
	"fmt"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/backlogq/backlog/storetest/dbtest"
)

// migrate on a new schema says which versions it went from and to and how
// many migrations it applied; run again, it says the schema was already at
// that version. On SQLite, PostgreSQL and MariaDB.
func TestMigrateSaysWhatItDid(t *testing.T) {
	t.Parallel()
	stores := map[string]func(t *testing.T) string{
		"sqlite":   tempDB,
		"postgres": func(t *testing.T) string { return dbtest.PostgresDSN(t) },
		"mysql": func(t *testing.T) string {
			cfg, err := mysql.ParseDSN(dbtest.MySQLDSN(t))
			if err != nil {
				t.Fatal(err)
			}
			return "mysql://" + cfg.User + ":" + cfg.Passwd + "@" + cfg.Addr + "/" + cfg.DBName
		},
	}
	for name, url := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := url(t)
			rep := decodeJSON[migrateReport](t, mustCLI(t, db, "migrate", "-o", "json").stdout)
			if rep.Status != "migrated" || rep.FromVersion != 0 || rep.ToVersion < 10 || rep.Applied != rep.ToVersion {
				t.Fatalf("first migrate: %+v", rep)
			}
			again := mustCLI(t, db, "migrate").stdout
			if want := fmt.Sprintf("schema is up to date: already at version %d\n", rep.ToVersion); !strings.HasSuffix(again, want) {
				t.Errorf("second migrate: %q; want it to end with %q", again, want)
			}
		})
	}
	r := mustCLI(t, tempDB(t), "migrate")
	if !strings.Contains(r.stdout, ": migrated the schema from version 0 to ") || !strings.Contains(r.stdout, " migrations applied)") {
		t.Errorf("first migrate: %q", r.stdout)
	}
}
