package cli

import (
	"os"
	"sort"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/storetest/dbtest"
)

// Three backlog serve processes on one database run a schedule of
// "@every 1s": exactly one job per occurrence, none missing in between,
// on SQLite, PostgreSQL and MariaDB. It runs 6 s, or 60 s with
// BACKLOG_FAULT=1 (CI).
func TestServePeriodicExactlyOncePerOccurrence(t *testing.T) {
	t.Parallel()
	run := 6 * time.Second
	if os.Getenv("BACKLOG_FAULT") == "1" {
		run = 60 * time.Second
	}
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
			mustCLI(t, db, "migrate")
			cfg := writeFile(t, t.TempDir(), "c.json", `{
			  "handlers": {"tick": {"command": "true"}},
			  "periodic": {"tick": {"schedule": "@every 1s", "kind": "tick"}}
			}`)
			var nodes []*worker
			for range 3 {
				w, _ := startServe(t, db, nil, "--config", cfg)
				nodes = append(nodes, w)
			}
			time.Sleep(run)
			for _, w := range nodes {
				if code := w.stop(t); code != 0 {
					t.Fatalf("serve exited with %d\nstdout:\n%s\nstderr:\n%s", code, w.stdout, w.stderr)
				}
			}
			st := openStore(t, db)
			byAt := map[int64]int{}
			for _, j := range allJobs(t, st) {
				at, err := time.Parse(time.RFC3339, j.Metadata[core.PeriodicMetadataAt])
				if err != nil || j.Kind != "tick" || !j.RunAt.Equal(at) {
					t.Fatalf("job %d: kind %s run_at %s metadata %v", j.ID, j.Kind, j.RunAt, j.Metadata)
				}
				byAt[at.Unix()]++
			}
			var ats []int64
			for at, n := range byAt {
				if n != 1 {
					t.Errorf("occurrence %s has %d jobs", time.Unix(at, 0).UTC(), n)
				}
				ats = append(ats, at)
			}
			sort.Slice(ats, func(i, j int) bool { return ats[i] < ats[j] })
			if len(ats) < int(run/time.Second)-3 {
				t.Fatalf("%d occurrences in %s", len(ats), run)
			}
			for i := 1; i < len(ats); i++ {
				if ats[i] != ats[i-1]+1 {
					t.Errorf("no job for the occurrences between %s and %s", time.Unix(ats[i-1], 0).UTC(), time.Unix(ats[i], 0).UTC())
				}
			}
		})
	}
}
