package postgres

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
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
		var plan []struct {
			Plan struct {
				Hit  int64 `json:"Shared Hit Blocks"`
				Read int64 `json:"Shared Read Blocks"`
			}
		}
		var out []byte
		conn, err := s.pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// The plan a prepared statement keeps once it goes generic; the
		// second run is measured (the first one plans and warms up).
		_, err = conn.Exec(ctx, "SET plan_cache_mode = force_generic_plan")
		for range 2 {
			if err == nil {
				err = conn.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+c.sql, c.args...).Scan(&out)
			}
		}
		_, _ = conn.Exec(ctx, "RESET plan_cache_mode")
		conn.Release()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if err := json.Unmarshal(out, &plan); err != nil || len(plan) != 1 {
			t.Fatalf("%s: plan %s: %v", c.name, out, err)
		}
		if pages := plan[0].Plan.Hit + plan[0].Plan.Read; pages > 400 {
			t.Errorf("%s of 10 jobs read %d pages of a table without statistics; want a few (an ordered scan of the claim index stopping after 10)", c.name, pages)
		}
	}
	// The claim still claims in claim order.
	got, err := s.Claim(ctx, core.ClaimParams{Queue: "q", Limit: 3, WorkerID: "w2", Now: now, LeaseUntil: now.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || !got[0].RunAt.Before(got[1].RunAt) {
		t.Fatalf("claimed %d jobs, want the 3 oldest in order", len(got))
	}
}
