package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/internal/bench"
	"github.com/backlogq/backlog/store/internal/storebench"
	"github.com/jackc/pgx/v5"
)

var benchNow = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// benchStrategies are the claim strategies the store-level benchmarks run.
var benchStrategies = []contract.ClaimStrategy{contract.StrategySkipLocked, contract.StrategyOptimistic}

// BenchmarkClaimFinish claims batches of 100 and completes them (rows kept,
// state completed), one goroutine, store methods only; b.N is jobs.
//
//	go test -run '^$' -bench ClaimFinish -benchtime 20000x ./store/postgres/
func BenchmarkClaimFinish(b *testing.B) {
	for _, strategy := range benchStrategies {
		b.Run(string(strategy), func(b *testing.B) {
			s := newTestStore(b, WithStrategy(strategy))
			storebench.Insert(b, s, benchNow, b.N, storebench.Job(benchNow, `{}`))
			storebench.ClaimFinish(b, s, benchNow)
		})
	}
}

// BenchmarkClaimLimits is BenchmarkClaimFinish on jobs spread over 50
// partition keys, without limits and under each of
// storebench.BenchPolicies (the limited claim path); b.N is jobs.
//
//	go test -run '^$' -bench ClaimLimits -benchtime 20000x ./store/postgres/
func BenchmarkClaimLimits(b *testing.B) {
	for _, strategy := range benchStrategies {
		for _, pol := range storebench.BenchPolicies {
			b.Run(string(strategy)+"/policy="+pol.Name, func(b *testing.B) {
				storebench.ClaimLimits(b, newTestStore(b, WithStrategy(strategy)), benchNow, pol.Limits)
			})
		}
	}
}

// BenchmarkInsert inserts batches of 1000 key-less jobs; b.N is jobs.
func BenchmarkInsert(b *testing.B) {
	storebench.InsertLoop(b, newTestStore(b), benchNow)
}

// BenchmarkInsertCopy is the COPY alternative to BenchmarkInsert, for
// comparison: batches of 1000 key-less jobs copied into the table with
// pgx's CopyFrom (ids from the identity column). It is not what Insert does:
// COPY returns no rows, so a COPY-based Insert would first reserve ids with
// nextval, then copy, then notify, in one transaction.
func BenchmarkInsertCopy(b *testing.B) {
	ctx := context.Background()
	s := newTestStore(b)
	cols := []string{"queue", "kind", "args", "priority", "state", "max_attempts", "run_at", "created_at"}
	rows := make([][]any, 1000)
	for i := range rows {
		rows[i] = []any{"bench", "k", "{}", int16(5), "available", int32(3), benchNow, benchNow}
	}
	b.ResetTimer()
	start := time.Now()
	for n := 0; n < b.N; n += 1000 {
		if _, err := s.Pool().CopyFrom(ctx, pgx.Identifier{s.Schema(), "jobs"}, cols, pgx.CopyFromRows(rows[:min(1000, b.N-n)])); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "jobs/s")
}

// BenchmarkBurnDown measures the whole engine (internal/bench) draining a
// backlog of no-op jobs from PostgreSQL; b.N is jobs. Knobs (environment):
// BENCH_WORKERS (default 1000), BENCH_MAX_CLAIM (default 1000),
// BENCH_COMPLETER_BATCH (default 1000), BENCH_COMPLETER_MS (default 2),
// BENCH_CONNS (pool size, default 8), BENCH_INSERT_SIZE (jobs per
// EnqueueMany, default 1000; below 256 inserts skip the COPY path).
//
//	go test -run '^$' -bench BurnDown -benchtime 100000x ./store/postgres/
func BenchmarkBurnDown(b *testing.B) {
	for _, strategy := range benchStrategies {
		b.Run(string(strategy), func(b *testing.B) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			s, err := Open(ctx, testDSN(b), WithSchema(freshSchema(b)), WithStrategy(strategy), WithMaxConns(int32(storebench.EnvInt("BENCH_CONNS", 8))))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			b.StopTimer()
			cfg := bench.Config{
				Jobs:       b.N,
				Workers:    storebench.EnvInt("BENCH_WORKERS", 1000),
				InsertSize: storebench.EnvInt("BENCH_INSERT_SIZE", 1000),
				Tune: func(c *core.Config) {
					c.MaxClaim = storebench.EnvInt("BENCH_MAX_CLAIM", 1000)
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
			b.Log(res, fmt.Sprintf("(workers %d, max claim %d)", cfg.Workers, storebench.EnvInt("BENCH_MAX_CLAIM", 1000)))
		})
	}
}

// BenchmarkBareSQL is the floor the store is measured against: the same
// schema, a minimal claim (UPDATE … WHERE id = ANY(ARRAY(SELECT … FOR UPDATE
// SKIP LOCKED)) RETURNING id) and a DELETE of the claimed ids, batches of
// 1000, one goroutine; b.N is jobs.
func BenchmarkBareSQL(b *testing.B) {
	ctx := context.Background()
	s := newTestStore(b)
	storebench.Insert(b, s, benchNow, b.N, storebench.Job(benchNow, `{}`))
	claim := "UPDATE " + s.tables.Jobs + " SET state = 'running', attempt = attempt + 1, worker_id = 'w', attempted_at = $1, lease_until = $2" +
		" WHERE id = ANY(ARRAY(SELECT id FROM " + s.tables.Jobs + " WHERE queue = 'bench' AND state IN " + pendingIn +
		" AND run_at <= $1 ORDER BY priority, run_at, id LIMIT 1000 FOR UPDATE SKIP LOCKED)) RETURNING id"
	del := "DELETE FROM " + s.tables.Jobs + " WHERE id = ANY($1)"
	b.ResetTimer()
	start := time.Now()
	for done := 0; done < b.N; {
		rows, err := s.Pool().Query(ctx, claim, benchNow, benchNow.Add(time.Minute))
		if err != nil {
			b.Fatal(err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			b.Fatal(err)
		}
		if len(ids) == 0 {
			b.Fatalf("queue empty after %d of %d", done, b.N)
		}
		if _, err := s.Pool().Exec(ctx, del, ids); err != nil {
			b.Fatal(err)
		}
		done += len(ids)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "jobs/s")
}
