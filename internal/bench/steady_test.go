package bench

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/memory"
	"github.com/backlogq/backlog/store/sqlite"
)

func TestPercentiles(t *testing.T) {
	if r := percentiles(nil); r != (LatencyResult{}) {
		t.Fatalf("empty: %+v", r)
	}
	lat := make([]time.Duration, 100)
	for i := range lat {
		lat[i] = time.Duration(100-i) * time.Millisecond // reversed: percentiles sorts
	}
	r := percentiles(lat)
	if r.Jobs != 100 || r.P50 != 51*time.Millisecond || r.P90 != 91*time.Millisecond || r.P99 != 100*time.Millisecond || r.Max != 100*time.Millisecond {
		t.Fatalf("percentiles: %+v", r)
	}
}

func TestBatchStamps(t *testing.T) {
	var s batchStamps
	t0 := time.Now()
	a, b, c := s.batch(), s.batch(), s.batch()
	if a != 0 || b != 1 || c != 2 {
		t.Fatalf("batch numbers %d %d %d", a, b, c)
	}
	s.committed(b, t0.Add(10*time.Millisecond))
	s.committed(a, t0)
	// c never returned: its jobs are left out.
	s.started(a, t0.Add(5*time.Millisecond))
	s.started(a, t0.Add(7*time.Millisecond))
	s.started(b, t0.Add(9*time.Millisecond)) // before its commit returned: early, 0
	s.started(c, t0.Add(time.Second))
	r, early := s.result()
	if r.Jobs != 3 || early != 1 || r.P50 != 5*time.Millisecond || r.Max != 7*time.Millisecond {
		t.Fatalf("result %+v, early %d", r, early)
	}
}

func TestBottleneck(t *testing.T) {
	for _, c := range []struct {
		wait, pending       float64
		inserted, completed int64
		want                string
	}{
		{30, 20000, 100000, 80000, BottleneckWorkers},
		{0, 150, 100000, 99850, BottleneckProducers},
		{1, 12000, 100000, 88000, BottleneckUnclear},
	} {
		if got := bottleneck(c.wait, c.pending, c.inserted, c.completed, 20000); got != c.want {
			t.Errorf("bottleneck(%+v) = %s", c, got)
		}
	}
}

// TestSteadyLatencyAndCap runs a short steady load with a small backlog
// cap, so the producers must wait for the workers, on each store.
func TestSteadyLatencyAndCap(t *testing.T) {
	for _, sc := range []struct {
		name string
		open func(t *testing.T) contract.Store
	}{
		{"memory", func(*testing.T) contract.Store { return memory.New() }},
		{"sqlite", func(t *testing.T) contract.Store {
			st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "steady.db"))
			if err != nil {
				t.Fatal(err)
			}
			return st
		}},
	} {
		t.Run(sc.name, func(t *testing.T) {
			st := sc.open(t)
			defer st.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cfg := SteadyConfig{Duration: time.Second, Workers: 4, Batch: 50, MaxBacklog: 100}
			r, err := Steady(ctx, st, cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Log(r)
			if r.BacklogCap != 100 || r.Producers != 2 || r.Batch != 50 || r.Workers != 4 || r.Leftover != 0 {
				t.Fatalf("settings not reported: %+v", r)
			}
			// Completions within so short a run depend on the machine's
			// load (SQLite under -race is slow); some jobs must start.
			if r.Inserted == 0 || r.Latency.Jobs == 0 {
				t.Fatalf("nothing inserted or started: %+v", r)
			}
			// Producers can overshoot the cap by one batch each.
			if r.PendingMean > float64(cfg.MaxBacklog+r.Producers*cfg.Batch) {
				t.Fatalf("pending mean %.0f above the cap + a batch per producer", r.PendingMean)
			}
			l := r.Latency
			if l.Jobs == 0 || l.Jobs > int(r.Inserted) || l.P50 > l.P90 || l.P90 > l.P99 || l.P99 > l.Max || r.Early > l.Jobs {
				t.Fatalf("latency: %+v (early %d)", l, r.Early)
			}
			if r.Bottleneck == "" || !strings.Contains(r.String(), "commit→start p50") || !strings.Contains(r.String(), "backlog cap 100") {
				t.Fatalf("String: %s", r)
			}
			b, err := json.Marshal(r)
			if err != nil || !strings.Contains(string(b), `"latency":{"jobs":`) || !strings.Contains(string(b), `"backlog_cap":100`) {
				t.Fatalf("JSON %s (%v)", b, err)
			}
			// Jobs the run left unfinished show in the next run's report.
			left, err := unfinished(ctx, st, "steady")
			if err != nil {
				t.Fatal(err)
			}
			if left > 0 {
				r2, err := Steady(ctx, st, SteadyConfig{Duration: 50 * time.Millisecond, Workers: 4, MaxBacklog: 100})
				if err != nil {
					t.Fatal(err)
				}
				if r2.Leftover != left || !strings.Contains(r2.String(), "WARNING") {
					t.Fatalf("leftover %d, want %d: %s", r2.Leftover, left, r2)
				}
			}
		})
	}
}
