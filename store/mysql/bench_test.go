package mysql

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/internal/bench"
	"github.com/backlogq/backlog/store/internal/storebench"
	"github.com/backlogq/backlog/storetest/dbtest"
)

var benchNow = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// benchStrategies are the claim strategies the benchmarks run.
var benchStrategies = []contract.ClaimStrategy{contract.StrategySkipLocked, contract.StrategyOptimistic}

// benchStore opens a store on a fresh database.
func benchStore(b *testing.B, strategy contract.ClaimStrategy) *Store {
	s, err := Open(context.Background(), dbtest.MySQLDSN(b), WithStrategy(strategy), WithMaxOpenConns(storebench.EnvInt("BENCH_CONNS", 8)))
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
			s := benchStore(b, strategy)
			storebench.Insert(b, s, benchNow, b.N, storebench.Job(benchNow, `{}`))
			storebench.ClaimFinish(b, s, benchNow)
		})
	}
}

// BenchmarkClaimLimits is BenchmarkClaimFinish on jobs spread over 50
// partition keys, without limits and under each of
// storebench.BenchPolicies (the limited claim path); b.N is jobs.
//
//	go test -run '^$' -bench ClaimLimits -benchtime 20000x ./store/mysql/
func BenchmarkClaimLimits(b *testing.B) {
	for _, strategy := range benchStrategies {
		for _, pol := range storebench.BenchPolicies {
			b.Run(string(strategy)+"/policy="+pol.Name, func(b *testing.B) {
				storebench.ClaimLimits(b, benchStore(b, strategy), benchNow, pol.Limits)
			})
		}
	}
}

// BenchmarkInsert inserts batches of 1000 key-less jobs; b.N is jobs.
//
//	go test -run '^$' -bench Insert -benchtime 100000x ./store/mysql/
func BenchmarkInsert(b *testing.B) {
	storebench.InsertLoop(b, benchStore(b, contract.StrategySkipLocked), benchNow)
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
				Workers: storebench.EnvInt("BENCH_WORKERS", 200),
				Tune: func(c *core.Config) {
					c.MaxClaim = storebench.EnvInt("BENCH_MAX_CLAIM", 500)
					c.CompleterMaxBatch = storebench.EnvInt("BENCH_COMPLETER_BATCH", 1000)
					c.CompleterInterval = time.Duration(storebench.EnvInt("BENCH_COMPLETER_MS", 2)) * time.Millisecond
				},
			}
			res, err := bench.BurnDown(ctx, s, cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(res.JobsPerSec, "jobs/s")
			b.ReportMetric(0, "ns/op")
			b.Log(res, fmt.Sprintf("(workers %d, max claim %d)", cfg.Workers, storebench.EnvInt("BENCH_MAX_CLAIM", 500)))
		})
	}
}
