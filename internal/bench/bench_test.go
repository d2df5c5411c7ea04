package bench_test

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/internal/bench"
	"github.com/backlogq/backlog/store/memory"
	"github.com/backlogq/backlog/store/sqlite"
)

// stores lists the stores the engine benchmarks run on; each opens a fresh
// store for one run.
type storeCase struct {
	name string
	open func(b testing.TB) contract.Store
}

var benchStores = []storeCase{
	{"memory", func(testing.TB) contract.Store { return memory.New() }},
	{"sqlite", func(tb testing.TB) contract.Store {
		st, err := sqlite.Open(context.Background(), filepath.Join(tb.TempDir(), "bench.db"))
		if err != nil {
			tb.Fatal(err)
		}
		return st
	}},
}

// BenchmarkBurnDown measures the whole engine draining a backlog of no-op
// jobs; b.N is the number of jobs. Run it with e.g.
//
//	go test -run '^$' -bench BurnDown -benchtime 100000x ./internal/bench/
func BenchmarkBurnDown(b *testing.B) {
	for _, sc := range benchStores {
		b.Run(sc.name, func(b *testing.B) {
			st := sc.open(b)
			defer st.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			b.StopTimer()
			res, err := bench.BurnDown(ctx, st, bench.Config{Jobs: b.N})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(res.JobsPerSec, "jobs/s")
			b.ReportMetric(0, "ns/op")
			b.Log(res)
		})
	}
}

func TestBurnDownDrains(t *testing.T) {
	for _, sc := range benchStores {
		t.Run(sc.name, func(t *testing.T) {
			st := sc.open(t)
			defer st.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			res, err := bench.BurnDown(ctx, st, bench.Config{Jobs: 2000, Workers: 20, Server: bench.Server{InProcess: true}})
			if err != nil {
				t.Fatal(err)
			}
			left, err := st.List(ctx, core.ListParams{})
			if err != nil || len(left) != 0 {
				t.Fatalf("%d jobs left after burn-down (err %v)", len(left), err)
			}
			if runtime.GOOS == "linux" {
				checkProcCPU(t, res.ProcCPU, false) // in-process stores
			}
			t.Log(res)
		})
	}
}

func TestSteadyAndLatencyRun(t *testing.T) {
	for _, sc := range benchStores {
		t.Run(sc.name, func(t *testing.T) {
			st := sc.open(t)
			defer st.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			sr, err := bench.Steady(ctx, st, bench.SteadyConfig{Duration: 300 * time.Millisecond, Workers: 20, Server: bench.Server{InProcess: true}})
			if err != nil {
				t.Fatal(err)
			}
			// Completions within so short a run depend on the machine's
			// load; the burn-down test checks that jobs drain.
			if sr.Inserted == 0 {
				t.Fatalf("steady run inserted nothing: %v", sr)
			}
			if p := sr.ProcCPU; runtime.GOOS == "linux" && (p == nil || p.ClientSeconds <= 0 || p.ServerSeconds == nil || *p.ServerSeconds != 0) {
				t.Fatalf("steady CPU split %+v, want client > 0, server 0", p)
			}
			lr, err := bench.Latency(ctx, st, st, bench.LatencyConfig{Jobs: 20, Interval: 5 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if lr.Jobs != 20 || lr.P50 <= 0 {
				t.Fatalf("latency: %v", lr)
			}
			t.Log(sr, "; ", lr)
		})
	}
}

// BenchmarkWakeLatency reports the p50 and p99 time from enqueue to handler
// start with idle workers, through the store's notifications.
func BenchmarkWakeLatency(b *testing.B) {
	for _, sc := range benchStores {
		b.Run(sc.name, func(b *testing.B) {
			st := sc.open(b)
			defer st.Close()
			res, err := bench.Latency(context.Background(), st, st, bench.LatencyConfig{Jobs: max(b.N, 50)})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(res.P50.Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(res.P99.Microseconds())/1000, "p99-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}
