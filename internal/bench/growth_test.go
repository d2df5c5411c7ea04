package bench_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/internal/bench"
	"github.com/backlogq/backlog/store/sqlite"
)

// Completed jobs stay (the default retention), so each round adds its jobs
// to the table; the generic probe counts them.
func TestGrowthKeepsCompletedJobs(t *testing.T) {
	for _, sc := range benchStores {
		t.Run(sc.name, func(t *testing.T) {
			st := sc.open(t)
			defer st.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var seen []int
			var tuned atomic.Int32
			res, err := bench.Growth(ctx, st, bench.GrowthConfig{
				Config: bench.Config{Jobs: 300, Workers: 20, Tune: func(c *core.Config) {
					// The caller's Tune runs after Growth's settings.
					if c.Retention == nil || c.Retention.Completed != core.DefaultRetention.Completed {
						t.Errorf("Tune sees retention %+v, want the default", c.Retention)
					}
					tuned.Add(1)
				}},
				Rounds:              3,
				MaintenanceInterval: -1,
			}, func(r bench.GrowthRound) { seen = append(seen, r.Round) })
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Rounds) != 3 || len(seen) != 3 || tuned.Load() != 3 {
				t.Fatalf("rounds %d, callbacks %v, tuned %d: want 3 each", len(res.Rounds), seen, tuned.Load())
			}
			if res.Before.Rows != 0 {
				t.Fatalf("before: %d rows", res.Before.Rows)
			}
			for i, r := range res.Rounds {
				if r.Round != i+1 || r.Jobs != 300 || r.JobsPerSec <= 0 {
					t.Fatalf("round %d: %+v", i+1, r)
				}
				if want := int64(300 * (i + 1)); r.Table.Rows != want {
					t.Fatalf("round %d: %d rows in the table, want %d", i+1, r.Table.Rows, want)
				}
				// The generic probe knows no PostgreSQL counters.
				if r.Table.DeadTuples != -1 || r.Autovacuums != -1 || r.HotPercent != -1 || r.ClaimIndexReadsPerScan != -1 {
					t.Fatalf("round %d: unknown counters not marked: %+v", i+1, r)
				}
				if f := strings.Split(r.Line(), "\t"); len(f) != len(strings.Split(bench.GrowthHeader, "\t")) {
					t.Fatalf("line %q does not match the header", r.Line())
				}
			}
			completed, err := st.List(ctx, core.ListParams{States: []core.State{core.StateCompleted}, Limit: 1000})
			if err != nil || len(completed) != 900 {
				t.Fatalf("%d completed jobs kept (err %v), want 900", len(completed), err)
			}
			t.Log("\n" + res.String())
		})
	}
}

// With Reopen, each round runs on a store of its own, closed after it; the
// rows still land in the one database.
func TestGrowthReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "growth.db")
	open := func(ctx context.Context) (contract.Store, error) { return sqlite.Open(ctx, path) }
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var opened atomic.Int32
	res, err := bench.Growth(ctx, st, bench.GrowthConfig{
		Config:              bench.Config{Jobs: 100, Workers: 10},
		Rounds:              2,
		MaintenanceInterval: -1,
		Reopen: func(ctx context.Context) (contract.Store, error) {
			opened.Add(1)
			return open(ctx)
		},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if opened.Load() != 2 || res.Rounds[1].Table.Rows != 200 {
		t.Fatalf("opened %d stores, %d rows after round 2: want 2 and 200", opened.Load(), res.Rounds[1].Table.Rows)
	}
}

// Retention 0 deletes jobs as they complete: the table stays empty.
func TestGrowthRetentionZero(t *testing.T) {
	st := benchStores[1].open(t)
	defer st.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := bench.Growth(ctx, st, bench.GrowthConfig{
		Config:    bench.Config{Jobs: 200, Workers: 10},
		Rounds:    2,
		Retention: &core.Retention{Completed: 0, Cancelled: -1, Discarded: -1},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Rounds {
		if r.Table.Rows != 0 {
			t.Fatalf("round %d: %d rows left with retention 0", r.Round, r.Table.Rows)
		}
	}
}

// Per-round changes are computed from consecutive samples of the probe.
func TestGrowthDeltas(t *testing.T) {
	st := benchStores[0].open(t)
	defer st.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	last := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	samples := []bench.TableStats{
		{Rows: 0, LiveTuples: 0, DeadTuples: 0, Updates: 0, HotUpdates: 0, Autovacuums: 2, Autoanalyzes: 1, ClaimIndexScans: 10, ClaimIndexReads: 10, TableBytes: 1 << 20, IndexBytes: 1 << 20, ClaimIndexBytes: 1 << 19},
		{Rows: 100, LiveTuples: 75, DeadTuples: 25, Updates: 200, HotUpdates: 50, Autovacuums: 3, Autoanalyzes: 1, LastAutovacuum: &last, ClaimIndexScans: 20, ClaimIndexReads: 510, TableBytes: 1 << 20, IndexBytes: 2 << 20, ClaimIndexBytes: 1 << 20},
		{Rows: 200, LiveTuples: -1, DeadTuples: -1, Updates: -1, HotUpdates: -1, Autovacuums: -1, Autoanalyzes: -1, ClaimIndexScans: -1, ClaimIndexReads: -1, TableBytes: -1, IndexBytes: -1, ClaimIndexBytes: -1},
	}
	n := 0
	probe := bench.ProbeFunc(func(context.Context) (bench.TableStats, error) {
		s := samples[n]
		n++
		return s, nil
	})
	res, err := bench.Growth(ctx, st, bench.GrowthConfig{Config: bench.Config{Jobs: 100, Workers: 10}, Rounds: 2, Probe: probe, MaintenanceInterval: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r1, r2 := res.Rounds[0], res.Rounds[1]
	if r1.Autovacuums != 1 || r1.Autoanalyzes != 0 || r1.HotPercent != 25 || r1.ClaimIndexReadsPerScan != 50 {
		t.Fatalf("round 1 deltas: %+v", r1)
	}
	f := strings.Split(r1.Line(), "\t")
	if f[3] != "100" || f[4] != "75" || f[5] != "25" || f[6] != "25" || f[7] != "25" || f[8] != "50.0" || f[9] != "3.0" || f[10] != "1.0" ||
		!strings.HasPrefix(f[11], "+1 ") || f[12] != "+0" {
		t.Fatalf("round 1 line: %q", f)
	}
	if r2.Autovacuums != -1 || r2.HotPercent != -1 || r2.ClaimIndexReadsPerScan != -1 {
		t.Fatalf("round 2 with unknown counters: %+v", r2)
	}
	f = strings.Split(r2.Line(), "\t")
	if f[3] != "200" || f[5] != "-" || f[6] != "-" || f[9] != "-" || f[11] != "-" {
		t.Fatalf("round 2 line: %q", f)
	}
}
