package postgres

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/internal/sqlq"
)

// TestClaimPlanWithoutStatistics: on a jobs table the planner has no
// statistics for (never vacuumed or analyzed, as every new table is until
// autovacuum's first visit, and every table on a server with autovacuum
// off), holding 250,000 finished jobs and 50,000 pending ones, a claim of
// ten reads a few pages: it walks the claim index in claim order and stops.
// The planner's estimates there (a handful of pending rows) made it prefer
// a bitmap scan of the whole index and a sort of every pending row, about
// thousands of pages and 20–50 ms per claim; docs/postgres.md, "The claim
// plan". Both claim strategies' reads are checked.
func TestClaimPlanWithoutStatistics(t *testing.T) {
	if testing.Short() {
		t.Skip("loads 300,000 rows")
	}
	s := newTestStore(t)
	ctx := t.Context()
	jobs := s.tables.Jobs
	for _, q := range []string{
		"ALTER TABLE " + jobs + " SET (autovacuum_enabled = false)",
		// 250,000 finished jobs with two dead row versions each, as
		// claims and finishes leave them (written as completed from the
		// start, so that the claim index holds no dead entries: what is
		// measured is the plan, not the walk over entries a vacuum would
		// remove), then 50,000 pending.
		"INSERT INTO " + jobs + " (queue, kind, args, priority, state, max_attempts, run_at, created_at, attempted_at, finished_at, attempt)" +
			" SELECT 'q', 'k', '{}', 5, 'completed', 20, t, t, t, t, 1 FROM (SELECT timestamptz '2030-01-01' + g * interval '1 ms' AS t FROM generate_series(1, 250000) g) x",
		"UPDATE " + jobs + " SET worker_id = 'w0'",
		"UPDATE " + jobs + " SET version = 2",
		"INSERT INTO " + jobs + " (queue, kind, args, priority, state, max_attempts, run_at, created_at)" +
			" SELECT 'q', 'k', '{}', 5, 'available', 20, t, t FROM (SELECT timestamptz '2030-01-02' + g * interval '1 ms' AS t FROM generate_series(1, 50000) g) x",
	} {
		if _, err := s.pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	var reltuples float64
	if err := s.pool.QueryRow(ctx, "SELECT reltuples FROM pg_class WHERE oid = $1::regclass", jobs).Scan(&reltuples); err != nil {
		t.Fatal(err)
	}
	if reltuples >= 0 {
		t.Skipf("the jobs table has statistics already (reltuples %v): autovacuum or analyze reached it", reltuples)
	}
	now := time.Date(2030, 1, 3, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name string
		sql  string
		args []any
	}{
		{"skip-locked claim", s.q.claimSkipLocked, []any{"q", now, 10, "w1", now.Add(time.Minute), sqlq.TagsArg(nil)}},
		{"optimistic candidate read", s.q.claimCandidates, []any{"q", now, 10, sqlq.TagsArg(nil)}},
	} {
		pages, _ := genericPlanPages(t, s, c.name, c.sql, c.args)
		if pages > 400 {
			t.Errorf("%s of 10 jobs read %d pages of a table without statistics; want a few (an ordered scan of the claim index stopping after 10)", c.name, pages)
		}
	}
	// The claim still claims in claim order.
	got, err := s.Claim(ctx, contract.ClaimParams{Queue: "q", Limit: 3, WorkerID: "w2", Now: now, LeaseUntil: now.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || !got[0].RunAt.Before(got[1].RunAt) {
		t.Fatalf("claimed %d jobs, want the 3 oldest in order", len(got))
	}
}

// genericPlanPages runs EXPLAIN (ANALYZE, BUFFERS) of sql with args twice
// in one transaction, with the generic plan a prepared statement keeps
// once it goes generic (plan_cache_mode = force_generic_plan) and the
// settings given (SET LOCAL statements), and returns the pages the
// second run read (the first plans and warms up) and the plan as JSON.
func genericPlanPages(t *testing.T, s *Store, name, sql string, args []any, settings ...string) (int64, []byte) {
	t.Helper()
	ctx := t.Context()
	var out []byte
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	for _, set := range append([]string{"SET LOCAL plan_cache_mode = force_generic_plan"}, settings...) {
		if _, err := tx.Exec(ctx, set); err != nil {
			t.Fatalf("%s: %s: %v", name, set, err)
		}
	}
	for range 2 {
		if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+sql, args...).Scan(&out); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	return planPages(t, out), out
}

// planPages returns the pages (shared blocks hit or read) of a plan
// given by EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON).
func planPages(t *testing.T, out []byte) int64 {
	t.Helper()
	var plan []struct {
		Plan struct {
			Hit  int64 `json:"Shared Hit Blocks"`
			Read int64 `json:"Shared Read Blocks"`
		}
	}
	if err := json.Unmarshal(out, &plan); err != nil || len(plan) != 1 {
		t.Fatalf("plan %s: %v", out, err)
	}
	return plan[0].Plan.Hit + plan[0].Plan.Read
}
