package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/store/internal/storebench"
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
	storebench.Insert(b, s, t0, b.N, job(storebench.Queue, "k"))
	storebench.ClaimFinish(b, s, t0)
}

// BenchmarkClaimLimits is BenchmarkClaimFinish on jobs spread over 50
// partition keys, without limits and under each of
// storebench.BenchPolicies (the limited claim path); b.N is jobs.
//
//	go test -run '^$' -bench ClaimLimits -benchtime 20000x ./store/sqlite/
func BenchmarkClaimLimits(b *testing.B) {
	for _, pol := range storebench.BenchPolicies {
		b.Run("policy="+pol.Name, func(b *testing.B) {
			s, err := Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			storebench.ClaimLimits(b, s, t0, pol.Limits)
		})
	}
}

// BenchmarkBareSQL is the floor BenchmarkClaimFinish is measured against:
// the same schema and batches, but a minimal claim
// (UPDATE … WHERE id IN (SELECT … LIMIT 100) RETURNING id) and a minimal
// unfenced completion (UPDATE … SET state='completed' WHERE id IN (…)), with
// prepared statements and no decoding. Reported as jobs/s.
func BenchmarkBareSQL(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(b.TempDir(), "bare.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	storebench.Insert(b, s, t0, b.N, job(storebench.Queue, "k"))
	db := s.DB()
	claimSQL := `UPDATE backlog_jobs SET state = 'running', attempt = attempt + 1, worker_id = 'w', attempted_at = ?, lease_until = ?
		WHERE id IN (SELECT id FROM backlog_jobs WHERE queue = 'bench' AND state IN ('scheduled','available','retryable') AND run_at <= ?
		ORDER BY priority, run_at, id LIMIT 100) RETURNING id`
	claim, err := db.PrepareContext(ctx, claimSQL)
	if err != nil {
		b.Fatal(err)
	}
	finishSQL := "UPDATE backlog_jobs SET state = 'completed', finished_at = ?, lease_until = NULL WHERE id IN (?" + strings.Repeat(",?", 99) + ")"
	finish, err := db.PrepareContext(ctx, finishSQL)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	done := 0
	args := make([]any, 101)
	for done < b.N {
		rows, err := claim.QueryContext(ctx, t0.UnixMicro(), t0.Add(time.Minute).UnixMicro(), t0.UnixMicro())
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		args[0] = t0.UnixMicro()
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				b.Fatal(err)
			}
			n++
			args[n] = id
		}
		rows.Close()
		if n == 0 {
			b.Fatalf("queue empty after %d of %d", done, b.N)
		}
		for i := n + 1; i <= 100; i++ {
			args[i] = int64(-1)
		}
		if _, err := finish.ExecContext(ctx, args...); err != nil {
			b.Fatal(err)
		}
		done += n
	}
	b.StopTimer()
	b.ReportMetric(float64(done)/time.Since(start).Seconds(), "jobs/s")
}
