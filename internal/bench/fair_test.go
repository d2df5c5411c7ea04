package bench

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/backlogq/backlog/core/contract"

	"github.com/go-sql-driver/mysql"

	"github.com/backlogq/backlog/store"
	_ "github.com/backlogq/backlog/store/mysql"
	_ "github.com/backlogq/backlog/store/postgres"
	"github.com/backlogq/backlog/storetest/dbtest"
)

// TestFairClaimsServeLateTenant is the fairness target: tenant A holds a
// backlog in one queue (100,000 jobs with BACKLOG_FAULT=1, as CI runs;
// 10,000 otherwise), 20 workers run 10 ms jobs, and tenant B enqueues 100
// jobs afterwards. With fair claims every one of B's jobs starts within 5
// s, on every store; in strict claim order they would wait for A's
// backlog (10,000 × 10 ms / 20 workers = 5 s at the least).
func TestFairClaimsServeLateTenant(t *testing.T) {
	backlog := 10000
	if os.Getenv("BACKLOG_FAULT") == "1" {
		backlog = 100000
	}
	stores := map[string]func(t *testing.T) string{
		"sqlite":   func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "fair.db") },
		"postgres": func(t *testing.T) string { return dbtest.PostgresDSN(t) },
		"mysql": func(t *testing.T) string {
			cfg, err := mysql.ParseDSN(dbtest.MySQLDSN(t))
			if err != nil {
				t.Fatal(err)
			}
			return "mysql://" + cfg.User + ":" + cfg.Passwd + "@" + cfg.Addr + "/" + cfg.DBName
		},
	}
	for _, name := range []string{"sqlite", "postgres", "mysql"} {
		t.Run(name, func(t *testing.T) {
			url := stores[name](t)
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
			defer cancel()
			st, err := store.Open(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if m, ok := st.(contract.Migrator); ok {
				if err := m.Migrate(ctx); err != nil {
					t.Fatal(err)
				}
			}
			res, err := Fair(ctx, st, FairConfig{Backlog: backlog, Fair: true}, 30*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			t.Log(res)
			if !res.FinishedAll || res.LateAll > 5*time.Second {
				t.Fatalf("%s: want all of tenant B's jobs started within 5 s", res)
			}
		})
	}
}
