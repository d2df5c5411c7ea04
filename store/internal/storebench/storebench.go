// Package storebench holds what the SQL stores' benchmarks share: the jobs
// they insert, the single-worker claim+finish loop and the environment
// knobs. It is imported only by _test files.
package storebench

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

// Queue is the queue the benchmarks fill and drain.
const Queue = "bench"

// Job returns a key-less job of Queue due at runAt, with the given args.
func Job(runAt time.Time, args string) contract.InsertParams {
	return contract.InsertParams{Queue: Queue, Kind: "k", Args: []byte(args), Priority: 5, MaxAttempts: 3, RunAt: runAt}
}

// Jobs returns n jobs of Queue due at runAt with args {}.
func Jobs(n int, runAt time.Time) []contract.InsertParams {
	ps := make([]contract.InsertParams, n)
	for i := range ps {
		ps[i] = Job(runAt, `{}`)
	}
	return ps
}

// Insert inserts n copies of p at now, 1000 per call.
func Insert(b testing.TB, s contract.Store, now time.Time, n int, p contract.InsertParams) {
	b.Helper()
	ctx := context.Background()
	for done := 0; done < n; done += 1000 {
		ps := make([]contract.InsertParams, min(1000, n-done))
		for i := range ps {
			ps[i] = p
		}
		if _, err := s.Insert(ctx, now, ps); err != nil {
			b.Fatal(err)
		}
	}
}

// ClaimFinish is the timed part of the stores' BenchmarkClaimFinish: one
// worker claims batches of 100 jobs of Queue at now and completes them
// (rows kept), until b.N jobs are done; the queue must hold them. It reports
// allocations and jobs/s.
func ClaimFinish(b *testing.B, s contract.Store, now time.Time) {
	ctx := context.Background()
	const batch = 100
	outs := make([]contract.Outcome, 0, batch)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for done := 0; done < b.N; {
		jobs, err := s.Claim(ctx, contract.ClaimParams{Queue: Queue, WorkerID: "w", Limit: batch, Now: now, LeaseUntil: now.Add(time.Minute)})
		if err != nil {
			b.Fatal(err)
		}
		if len(jobs) == 0 {
			b.Fatalf("queue empty after %d of %d", done, b.N)
		}
		outs = outs[:0]
		for _, j := range jobs {
			outs = append(outs, contract.Outcome{JobID: j.ID, WorkerID: "w", ClaimSeq: j.ClaimSeq, Attempt: j.Attempt, Kind: contract.OutcomeComplete, At: now})
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
}

// InsertLoop is the timed part of the stores' BenchmarkInsert: batches of
// 1000 key-less jobs until b.N are inserted; it reports jobs/s.
func InsertLoop(b *testing.B, s contract.Store, now time.Time) {
	ctx := context.Background()
	ps := Jobs(1000, now)
	b.ResetTimer()
	start := time.Now()
	for n := 0; n < b.N; n += 1000 {
		if _, err := s.Insert(ctx, now, ps[:min(1000, b.N-n)]); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "jobs/s")
}

// EnvInt reads a tuning knob of the benchmarks from the environment, or
// def when it is unset or not an integer.
func EnvInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// BenchLimits are the concurrency limits BenchmarkClaimLimits sets on
// Queue: wide enough that every claim of 100 gets 100 jobs, so the
// benchmark measures the limited claim path (lock the queue's record,
// count the running jobs, walk the candidates) rather than waiting.
var BenchLimits = contract.QueueLimits{MaxRunning: 1000, MaxRunningPerKind: map[string]int{"k": 1000}, MaxRunningPerPartition: 100}

// BenchPolicies are the policies BenchmarkClaimLimits compares, by name:
// none (the claim path of unlimited queues), the concurrency limits of
// BenchLimits, and rate limits, fair claims and priority aging each set
// alone, all wide enough that every claim of 100 gets 100 jobs.
var BenchPolicies = []struct {
	Name   string
	Limits contract.QueueLimits
}{
	{"none", contract.QueueLimits{}},
	{"limits", BenchLimits},
	{"rate", contract.QueueLimits{Rate: contract.RateLimit{Starts: 1000000, Per: time.Second}, RatePerPartition: contract.RateLimit{Starts: 100000, Per: time.Second}}},
	{"fair", contract.QueueLimits{Fair: true}},
	{"aging", contract.QueueLimits{Aging: contract.PriorityAging{Every: time.Hour}}},
}

// ClaimLimits is the timed part of the stores' BenchmarkClaimLimits:
// b.N jobs of Queue spread over 50 partition keys are inserted, the
// queue gets limits l (zero: none), and ClaimFinish drains them.
// Compare the jobs/s of each policy with none.
func ClaimLimits(b *testing.B, s contract.Store, now time.Time, l contract.QueueLimits) {
	b.Helper()
	ctx := context.Background()
	for done := 0; done < b.N; done += 1000 {
		ps := Jobs(min(1000, b.N-done), now)
		for i := range ps {
			ps[i].PartitionKey = "tenant-" + strconv.Itoa((done+i)%50)
		}
		if _, err := s.Insert(ctx, now, ps); err != nil {
			b.Fatal(err)
		}
	}
	if !l.IsZero() {
		ql, ok := s.(contract.QueueLimiter)
		if !ok {
			b.Fatalf("%T is no contract.QueueLimiter", s)
		}
		if err := ql.SetQueueLimits(ctx, Queue, l, now); err != nil {
			b.Fatal(err)
		}
	}
	ClaimFinish(b, s, now)
}
