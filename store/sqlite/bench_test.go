package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
)

// BenchmarkClaimFinish measures the store's claim+finish throughput on a
// file database: b.N jobs are inserted up front (not timed), then claimed
// in batches of 100 and completed in batches of 100 by one worker.
// Reported as jobs/s.
func BenchmarkClaimFinish(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const batch = 100
	for n := 0; n < b.N; n += 1000 {
		ps := make([]core.InsertParams, min(1000, b.N-n))
		for i := range ps {
			ps[i] = job("bench", "k")
		}
		if _, err := s.Insert(ctx, t0, ps); err != nil {
			b.Fatal(err)
		}
	}
	outs := make([]core.Outcome, 0, batch)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	done := 0
	for done < b.N {
		jobs, err := s.Claim(ctx, core.ClaimParams{Queue: "bench", WorkerID: "w", Limit: batch, Now: t0, LeaseUntil: t0.Add(time.Minute)})
		if err != nil {
			b.Fatal(err)
		}
		if len(jobs) == 0 {
			b.Fatalf("queue empty after %d of %d", done, b.N)
		}
		outs = outs[:0]
		for _, j := range jobs {
			outs = append(outs, core.Outcome{JobID: j.ID, WorkerID: "w", Attempt: j.Attempt, Kind: core.OutcomeComplete, At: t0})
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
	b.ReportMetric(float64(done)/time.Since(start).Seconds(), "jobs/s")
}
