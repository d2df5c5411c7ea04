package bench_test

import (
	"context"
	"math"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/backlogq/backlog/internal/bench"
	"github.com/backlogq/backlog/store/mysql"
	"github.com/backlogq/backlog/store/postgres"
	"github.com/backlogq/backlog/store/sqlite"
	"github.com/backlogq/backlog/storetest/dbtest"
)

// floorDBs opens each database the floor runs on: SQLite always,
// PostgreSQL and MySQL when their test servers are configured.
var floorDBs = []struct {
	name   string
	server bench.Server // the test servers run on this machine
	open   func(t *testing.T) bench.FloorDB
}{
	{"sqlite", bench.Server{InProcess: true}, func(t *testing.T) bench.FloorDB {
		st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "floor.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return bench.FloorDB{Dialect: bench.DialectSQLite, DB: st.DB(), Prefix: st.Prefix()}
	}},
	{"postgres", bench.ServerOf("postgres://127.0.0.1/test"), func(t *testing.T) bench.FloorDB {
		st, err := postgres.Open(context.Background(), dbtest.PostgresDSN(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return bench.FloorDB{Dialect: bench.DialectPostgres, Pool: st.Pool(), Schema: st.Schema()}
	}},
	{"mysql", bench.ServerOf("mysql://root@localhost:3306/test"), func(t *testing.T) bench.FloorDB {
		st, err := mysql.Open(context.Background(), dbtest.MySQLDSN(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return bench.FloorDB{Dialect: bench.DialectMySQL, DB: st.DB(), Prefix: st.Prefix()}
	}},
}

// TestFloorCompletesEveryJobOnce runs the floor with a small backlog and
// a batch that does not divide it, keeps the scratch table, and checks
// that every job ended completed and that each was claimed once.
func TestFloorCompletesEveryJobOnce(t *testing.T) {
	for _, fc := range floorDBs {
		t.Run(fc.name, func(t *testing.T) {
			d := fc.open(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			const jobs = 2500
			res, err := bench.Floor(ctx, d, bench.FloorConfig{Jobs: jobs, Batch: 300, Keep: true, Server: fc.server})
			if err != nil {
				t.Fatal(err)
			}
			t.Log(res)
			wantClaimers := 4
			if fc.name == "sqlite" {
				wantClaimers = 1
			}
			if res.Jobs != jobs || res.Claimers != wantClaimers || res.JobsPerSec <= 0 || res.Work <= 0 || res.Insert <= 0 {
				t.Fatalf("result %+v", res)
			}
			// Every claim but the last ones took a full batch: no job
			// came back twice (Floor fails on a second claim of an id).
			if min := int64((jobs + 299) / 300); res.Claims < min {
				t.Fatalf("%d claims for %d jobs in batches of 300, want at least %d", res.Claims, jobs, min)
			}
			if runtime.GOOS == "linux" {
				// The servers of the tests run on this machine.
				checkProcCPU(t, res.ProcCPU, fc.name != "sqlite")
			}
			var total, completed int64
			q := "SELECT count(*), count(CASE WHEN state = 'completed' THEN 1 END) FROM " + d.Table()
			if d.Pool != nil {
				err = d.Pool.QueryRow(ctx, q).Scan(&total, &completed)
			} else {
				err = d.DB.QueryRowContext(ctx, q).Scan(&total, &completed)
			}
			if err != nil {
				t.Fatal(err)
			}
			if total != jobs || completed != jobs {
				t.Fatalf("table holds %d jobs, %d completed; want %d, all completed", total, completed, jobs)
			}
		})
	}
}

// TestFloorDropsItsTable checks that the scratch table is gone after a
// run that does not keep it, and that a table left by an earlier run is
// replaced.
func TestFloorDropsItsTable(t *testing.T) {
	d := floorDBs[0].open(t)
	ctx := context.Background()
	if _, err := bench.Floor(ctx, d, bench.FloorConfig{Jobs: 10, Keep: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := bench.Floor(ctx, d, bench.FloorConfig{Jobs: 20}); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := d.DB.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master WHERE name = ?", d.Table()).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d tables named %s after the run (err %v)", n, d.Table(), err)
	}
}

// checkProcCPU checks a run's CPU split: the client's CPU is some, the
// server's some exactly when it runs outside this process, and the
// per-1,000 figures add up.
func checkProcCPU(t *testing.T, p *bench.ProcCPU, server bool) {
	t.Helper()
	if p == nil {
		t.Fatal("no CPU split on Linux")
	}
	if p.ServerSeconds == nil || p.PerThousand.Server == nil || p.PerThousand.Total == nil {
		t.Fatalf("CPU split %+v without the server's", *p)
	}
	// /proc counts CPU in ticks of 10 ms: the floor's client, which does
	// next to nothing for a run of a few dozen milliseconds, may show 0.
	if p.ClientSeconds < 0 || (*p.ServerSeconds > 0) != server || *p.ServerSeconds < 0 {
		t.Fatalf("CPU split %+v, want client ≥ 0 and server > 0 = %v", *p, server)
	}
	k := p.PerThousand
	if k.Client < 0 || math.Abs(*k.Total-k.Client-*k.Server) > 1e-6 {
		t.Fatalf("per 1,000 jobs %+v", k)
	}
}
