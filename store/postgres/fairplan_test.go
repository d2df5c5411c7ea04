package postgres

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/internal/storebench"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/backlogq/backlog/store/internal/sqlq"
)

// TestFairClaimPlan: a fair claim stays index scans. With 100,000 pending
// jobs of one partition key ahead of 100 of another (and 100,000 finished
// ones), finding the next partition key is one seek of jobs_fair, and
// reading one partition key's due jobs an ordered range of it that stops
// after the few asked for; a handful of pages each, in the generic plans
// prepared statements settle on, on a table without statistics.
func TestFairClaimPlan(t *testing.T) {
	if testing.Short() {
		t.Skip("loads 200,000 rows")
	}
	s := newTestStore(t)
	ctx := t.Context()
	jobs := s.tables.Jobs
	for _, q := range []string{
		"INSERT INTO " + jobs + " (queue, kind, args, priority, state, max_attempts, run_at, created_at, attempted_at, finished_at, attempt, partition_key)" +
			" SELECT 'q', 'k', '{}', 5, 'completed', 20, t, t, t, t, 1, 'tenant-a' FROM (SELECT timestamptz '2030-01-01' + g * interval '1 ms' AS t FROM generate_series(1, 100000) g) x",
		"INSERT INTO " + jobs + " (queue, kind, args, priority, state, max_attempts, run_at, created_at, partition_key)" +
			" SELECT 'q', 'k', '{}', 5, 'available', 20, t, t, 'tenant-a' FROM (SELECT timestamptz '2030-01-02' + g * interval '1 ms' AS t FROM generate_series(1, 100000) g) x",
		"INSERT INTO " + jobs + " (queue, kind, args, priority, state, max_attempts, run_at, created_at, partition_key)" +
			" SELECT 'q', 'k', '{}', 5, 'available', 20, t, t, 'tenant-b' FROM (SELECT timestamptz '2030-01-03' + g * interval '1 ms' AS t FROM generate_series(1, 100) g) x",
		// No ANALYZE: a table without statistics, where the planner
		// would as soon take jobs_claim (see the claim's SET LOCAL).
	} {
		if _, err := s.pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Date(2030, 1, 4, 0, 0, 0, 0, time.UTC)
	next, nextArgs := s.FairPartitionQuery("q", "partition_key", "state IN "+pendingIn, "tenant-a")
	for _, c := range []struct {
		name string
		sql  string
		args []any
	}{
		{"next partition key", next, nextArgs},
		{"one partition key's due jobs", s.q.limitedCandidatesPart, []any{"q", now, sqlq.TagsArg(nil), []string{}, []string{}, 10, 1, 10, "tenant-b"}},
	} {
		// SET LOCAL enable_sort = off: as claimLimited does.
		pages, out := genericPlanPages(t, s, c.name, c.sql, c.args, "SET LOCAL enable_sort = off")
		if !strings.Contains(string(out), "jobs_fair") || strings.Contains(string(out), "Seq Scan") {
			t.Errorf("%s: plan does not scan jobs_fair alone: %s", c.name, out)
		}
		if pages > 50 {
			t.Errorf("%s read %d pages; want a few (index seeks, not a walk over tenant-a's 100,000 jobs)", c.name, pages)
		}
	}
	// A fair claim of 10 takes tenant-b's jobs along with tenant-a's.
	if err := s.SetQueueLimits(ctx, "q", contract.QueueLimits{Fair: true}, now); err != nil {
		t.Fatal(err)
	}
	got, err := s.Claim(ctx, contract.ClaimParams{Queue: "q", Limit: 10, WorkerID: "w", Now: now, LeaseUntil: now.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	nb := 0
	for _, j := range got {
		if j.PartitionKey == "tenant-b" {
			nb++
		}
	}
	if len(got) != 10 || nb != 5 {
		t.Fatalf("fair claim of 10 took %d jobs, %d of tenant-b; want 10, 5 of tenant-b", len(got), nb)
	}
}

// TestFairClaimWalksNoBacklog: fair claims on a table without statistics
// (20,000 jobs over 50 partition keys, inserted by the store) do not walk
// the backlog in jobs_claim for each partition key: the search for the
// next key orders by it with sorts off (the claim's SET LOCAL), so only
// jobs_fair serves it. A claim of 100 reads about 25,000 jobs_claim
// entries (the key-by-key reads of interleaved keys); with sorts on the
// planner served the search from jobs_claim with a sort and a claim read
// 665,000 (120-170 ms). Counted with pg_stat_user_indexes on a store of
// one connection, whose statistics a pg_stat_force_next_flush() sends at
// once.
func TestFairClaimWalksNoBacklog(t *testing.T) {
	if testing.Short() {
		t.Skip("loads 20,000 jobs")
	}
	ctx := t.Context()
	cfg, err := pgxpool.ParseConfig(testDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	// Migrate through the shared pool: the migration's session lock
	// needs a second connection.
	schema := freshSchema(t)
	m, err := New(ctx, testPool(t), WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	s, err := New(ctx, pool, WithSchema(schema), WithMigrate(false))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Date(2030, 1, 4, 0, 0, 0, 0, time.UTC)
	ps := storebench.Jobs(20000, now)
	for i := range ps {
		ps[i].Queue, ps[i].PartitionKey = "q", "tenant-"+strconv.Itoa(i%50)
	}
	for i := 0; i < len(ps); i += 1000 {
		if _, err := s.Insert(ctx, now, ps[i:i+1000]); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SetQueueLimits(ctx, "q", contract.QueueLimits{Fair: true}, now); err != nil {
		t.Fatal(err)
	}
	read := func() int64 {
		t.Helper()
		if _, err := pool.Exec(ctx, "SELECT pg_stat_force_next_flush()"); err != nil {
			t.Fatal(err)
		}
		var n int64
		// A statement of its own: a fresh snapshot of the statistics.
		if err := testPool(t).QueryRow(ctx, "SELECT idx_tup_read FROM pg_stat_user_indexes WHERE schemaname = $1 AND indexrelname = 'jobs_claim'", s.Schema()).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for round := range 5 {
		before := read()
		got, err := s.Claim(ctx, contract.ClaimParams{Queue: "q", Limit: 100, WorkerID: "w", Now: now, LeaseUntil: now.Add(time.Minute)})
		if err != nil || len(got) != 100 {
			t.Fatalf("fair claim: %d jobs, %v", len(got), err)
		}
		if n := read() - before; n > 100000 {
			t.Fatalf("fair claim %d of 100 read %d entries of jobs_claim; want well under 100,000 (the backlog of 20,000 is not walked for each partition key)", round+1, n)
		}
		outs := make([]contract.Outcome, len(got))
		for i, j := range got {
			outs[i] = contract.Outcome{JobID: j.ID, WorkerID: "w", ClaimSeq: j.ClaimSeq, Attempt: j.Attempt, Kind: contract.OutcomeComplete, At: now}
		}
		if _, err := s.Finish(ctx, outs); err != nil {
			t.Fatal(err)
		}
	}
}
