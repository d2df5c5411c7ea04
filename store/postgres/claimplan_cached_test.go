package postgres

import (
	"testing"
	"time"

	"github.com/backlogq/backlog/core/contract"

	"github.com/jackc/pgx/v5/pgxpool"
)

// TestPlansCachedWhileSmall: a connection keeps the plans it chose while
// the jobs table was small. The claim functions are PL/pgSQL and the
// finish a prepared statement; both keep a generic plan per connection
// until something invalidates it (an ANALYZE, a schema change), not when
// the table grows. On a new table of a few pages the planner preferred a
// sequential scan of jobs for the claim's update by id and for the
// finish's join with its outcomes, and kept it while the table grew to
// 100,000s of rows: every claim and finish then read the whole table
// (docs/postgres.md, "The claim plan"). Here one connection claims and
// finishes while the table holds 20 jobs, the table then grows to 200,000
// finished jobs, and a claim and a finish on the same connection must not
// scan it.
func TestPlansCachedWhileSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("loads 200,000 rows")
	}
	ctx := t.Context()
	cfg := testPool(t).Config().Copy()
	cfg.MaxConns = 1 // every call on one connection, as its plans are cached
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	schema := freshSchema(t)
	if _, err := New(ctx, testPool(t), WithSchema(schema)); err != nil { // migrates
		t.Fatal(err)
	}
	s, err := New(ctx, pool, WithSchema(schema), WithMigrate(false), WithNotify(false))
	if err != nil {
		t.Fatal(err)
	}
	jobs := s.tables.Jobs
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec("ALTER TABLE " + jobs + " SET (autovacuum_enabled = false)")
	insert := func(n int, state string, from string) {
		t.Helper()
		exec("INSERT INTO "+jobs+" (queue, kind, args, priority, state, max_attempts, run_at, created_at)"+
			" SELECT 'q', 'k', '{}', 5, '"+state+"', 20, t, t FROM (SELECT timestamptz '"+from+"' + g * interval '1 ms' AS t FROM generate_series(1, $1::int) g) x", n)
	}
	now := time.Date(2030, 1, 3, 0, 0, 0, 0, time.UTC)
	round := func() {
		t.Helper()
		got, err := s.Claim(ctx, contract.ClaimParams{Queue: "q", Limit: 2, WorkerID: "w1", Now: now, LeaseUntil: now.Add(time.Minute)})
		if err != nil || len(got) != 2 {
			t.Fatalf("claim: %d jobs, %v", len(got), err)
		}
		outs := make([]contract.Outcome, len(got))
		for i, j := range got {
			outs[i] = contract.Outcome{JobID: j.ID, WorkerID: "w1", ClaimSeq: j.ClaimSeq, Attempt: j.Attempt, Kind: contract.OutcomeComplete, At: now}
		}
		res, err := s.Finish(ctx, outs)
		if err != nil || len(res) != 2 || !res[0].Applied || !res[1].Applied {
			t.Fatalf("finish: %+v, %v", res, err)
		}
	}
	seqScans := func() int64 {
		t.Helper()
		var n int64
		exec("SELECT pg_stat_force_next_flush()")
		exec("SELECT pg_stat_clear_snapshot()")
		if err := pool.QueryRow(ctx, "SELECT seq_scan FROM pg_stat_user_tables WHERE relid = $1::regclass", jobs).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	insert(20, "available", "2030-01-02")
	for range 8 { // past the plan caches' five custom plans
		round()
	}
	insert(200000, "completed", "2030-01-01")
	insert(1000, "available", "2030-01-02 01:00")
	before := seqScans()
	start := time.Now()
	round()
	took := time.Since(start)
	if n := seqScans() - before; n != 0 {
		t.Fatalf("a claim and a finish of 2 jobs on a connection that planned them on a small table scanned the 200,000-row jobs table %d times (%s); want index lookups", n, took)
	}
}
