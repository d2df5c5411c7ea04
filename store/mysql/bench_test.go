package mysql

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/internal/bench"
	"github.com/backlogq/backlog/storetest/dbtest"
)

var benchNow = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// benchStrategies are the claim strategies the benchmarks run.
var benchStrategies = []core.ClaimStrategy{core.StrategySkipLocked, core.StrategyOptimistic}

func benchJobs(n int) []core.InsertParams {
	ps := make([]core.InsertParams, n)
	for i := range ps {
		ps[i] = core.InsertParams{Queue: "bench", Kind: "k", Args: json.RawMessage(`{}`), Priority: 5, MaxAttempts: 3, RunAt: benchNow}
	}
	return ps
}

// envInt reads a tuning knob of the benchmarks from the environment.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// benchStore opens a store on a fresh database.
func benchStore(b *testing.B, strategy core.ClaimStrategy) *Store {
	s, err := Open(context.Background(), dbtest.MySQLDSN(b), WithStrategy(strategy), WithMaxOpenConns(envInt("BENCH_CONNS", 8)))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// BenchmarkClaimFinish claims batches of 100 and completes them (rows kept,
// state completed), one goroutine, store methods only; b.N is jobs.
//
//	go test -run '^$' -bench ClaimFinish -benchtime 20000x ./store/mysql/
func BenchmarkClaimFinish(b *testing.B) {
	for _, strategy := range benchStrategies {
		b.Run(string(strategy), func(b *testing.B) {
			ctx := context.Background()
			s := benchStore(b, strategy)
			for n := 0; n < b.N; n += 1000 {
				if _, err := s.Insert(ctx, benchNow, benchJobs(min(1000, b.N-n))); err != nil {
					b.Fatal(err)
				}
			}
			const batch = 100
			outs := make([]core.Outcome, 0, batch)
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for done := 0; done < b.N; {
				jobs, err := s.Claim(ctx, core.ClaimParams{Queue: "bench", WorkerID: "w", Limit: batch, Now: benchNow, LeaseUntil: benchNow.Add(time.Minute)})
				if err != nil {
					b.Fatal(err)
				}
				if len(jobs) == 0 {
					b.Fatalf("queue empty after %d of %d", done, b.N)
				}
				outs = outs[:0]
				for _, j := range jobs {
					outs = append(outs, core.Outcome{JobID: j.ID, WorkerID: "w", Attempt: j.Attempt, Kind: core.OutcomeComplete, At: benchNow})
				}
				res, err := s.Finish(ctx, outs)
				if err != nil {
					b.Fatal(err)
				}
				for _, r := range res {
					if !r.Applied {
						b.Fatalf("job %d not finished", r.JobID)
					}
				}
				done += len(jobs)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "jobs/s")
		})
	}
}

// BenchmarkInsert inserts batches of 1000 key-less jobs; b.N is jobs.
//
//	go test -run '^$' -bench Insert -benchtime 100000x ./store/mysql/
func BenchmarkInsert(b *testing.B) {
	ctx := context.Background()
	s := benchStore(b, core.StrategySkipLocked)
	ps := benchJobs(1000)
	b.ResetTimer()
	start := time.Now()
	for n := 0; n < b.N; n += 1000 {
		if _, err := s.Insert(ctx, benchNow, ps[:min(1000, b.N-n)]); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "jobs/s")
}

// BenchmarkBurnDown measures the whole engine (internal/bench) draining a
// backlog of no-op jobs; b.N is jobs. Knobs (environment): BENCH_WORKERS
// (default 200), BENCH_MAX_CLAIM (default 500), BENCH_COMPLETER_BATCH
// (default 1000), BENCH_COMPLETER_MS (default 2), BENCH_CONNS (pool size,
// default 8).
//
//	go test -run '^$' -bench BurnDown -benchtime 100000x ./store/mysql/
func BenchmarkBurnDown(b *testing.B) {
	for _, strategy := range benchStrategies {
		b.Run(string(strategy), func(b *testing.B) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			s := benchStore(b, strategy)
			b.StopTimer()
			cfg := bench.Config{
				Jobs:    b.N,
				Workers: envInt("BENCH_WORKERS", 200),
				Tune: func(c *core.Config) {
					c.MaxClaim = envInt("BENCH_MAX_CLAIM", 500)
					c.CompleterMaxBatch = envInt("BENCH_COMPLETER_BATCH", 1000)
					c.CompleterInterval = time.Duration(envInt("BENCH_COMPLETER_MS", 2)) * time.Millisecond
				},
			}
			res, err := bench.BurnDown(ctx, s, cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(res.JobsPerSec, "jobs/s")
			b.ReportMetric(0, "ns/op")
			b.Log(res, fmt.Sprintf("(workers %d, max claim %d)", cfg.Workers, envInt("BENCH_MAX_CLAIM", 500)))
		})
	}
}
