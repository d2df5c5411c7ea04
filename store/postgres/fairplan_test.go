package postgres

import (
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
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
	if err := s.SetQueueLimits(ctx, "q", core.QueueLimits{Fair: true}, now); err != nil {
		t.Fatal(err)
	}
	got, err := s.Claim(ctx, core.ClaimParams{Queue: "q", Limit: 10, WorkerID: "w", Now: now, LeaseUntil: now.Add(time.Minute)})
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
