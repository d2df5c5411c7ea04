package bench_test

import (
	"context"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/internal/bench"
	"github.com/backlogq/backlog/store/memory"
)

// stores lists the stores the engine benchmarks run on; each opens a fresh
// store for one run.
type storeCase struct {
	name string
	open func(b testing.TB) core.Store
}

var benchStores = []storeCase{
	{"memory", func(testing.TB) core.Store { return memory.New() }},
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
			res, err := bench.BurnDown(ctx, st, bench.Config{Jobs: 2000, Workers: 20})
			if err != nil {
				t.Fatal(err)
			}
			left, err := st.List(ctx, core.ListParams{})
			if err != nil || len(left) != 0 {
				t.Fatalf("%d jobs left after burn-down (err %v)", len(left), err)
			}
			t.Log(res)
		})
	}
}
