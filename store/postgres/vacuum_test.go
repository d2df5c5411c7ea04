package postgres

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/internal/sqlq"
)

// claimPages returns the shared buffers (hit + read) one skip-locked claim
// of limit jobs touches, from EXPLAIN (ANALYZE, BUFFERS) of the claim
// statement, on one connection: the second of two claims is measured (the
// first plans the statement, reading the catalogs). It claims the jobs it
// reads.
func claimPages(t *testing.T, s *Store, now time.Time, limit int) int64 {
	t.Helper()
	conn, err := s.pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	var out []byte
	for range 2 {
		err := conn.QueryRow(t.Context(), "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+s.q.claimSkipLocked,
			"q", now, limit, "w-measure", now.Add(time.Minute), sqlq.TagsArg(nil)).Scan(&out)
		if err != nil {
			t.Fatal(err)
		}
	}
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

// flushStats makes every idle pooled connection report its table
// statistics now rather than within the next 10 s.
func flushStats(t *testing.T, s *Store) {
	t.Helper()
	for _, c := range s.pool.AcquireAllIdle(t.Context()) {
		_, err := c.Exec(t.Context(), "SELECT pg_stat_force_next_flush()")
		c.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestMaintenanceVacuumsClaimedEntries: every job claimed leaves a dead
// entry in the claim index, and each later claim steps over all of them
// until a VACUUM removes them (docs/postgres.md, "The claim plan"); with
// autovacuum visiting once a minute, or off, burn-downs slowed from 58k to
// 31k jobs/s within a few rounds. The store vacuums its jobs table itself
// from the engine's maintenance round once enough dead rows pile up: after
// one round a claim reads a few pages again instead of the index pages of
// every job claimed before (here about 300 pages before, 120 after).
func TestMaintenanceVacuumsClaimedEntries(t *testing.T) {
	if testing.Short() {
		t.Skip("claims 40,000 jobs")
	}
	s := newTestStore(t, WithVacuumThreshold(10_000, 0))
	ctx := t.Context()
	jobs := s.tables.Jobs
	if _, err := s.pool.Exec(ctx, "ALTER TABLE "+jobs+" SET (autovacuum_enabled = false)"); err != nil {
		t.Fatal(err)
	}
	// Below the threshold nothing happens.
	if n, err := s.Vacuum(ctx); err != nil || n != 0 {
		t.Fatalf("Vacuum on an empty table = %d, %v; want 0, nil", n, err)
	}
	if _, err := s.pool.Exec(ctx, "INSERT INTO "+jobs+" (queue, kind, args, priority, state, max_attempts, run_at, created_at)"+
		" SELECT 'q', 'k', '{}', 5, 'available', 20, t, t FROM (SELECT timestamptz '2030-01-01' + g * interval '1 ms' AS t FROM generate_series(1, 41000) g) x"); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC)
	for range 40 {
		got, err := s.Claim(ctx, contract.ClaimParams{Queue: "q", Limit: 1000, WorkerID: "w1", Now: now, LeaseUntil: now.Add(time.Hour)})
		if err != nil || len(got) != 1000 {
			t.Fatalf("claim: %d jobs, %v", len(got), err)
		}
	}
	claimPages(t, s, now, 10) // marks the dead entries, as any claim would
	before := claimPages(t, s, now, 10)

	var mu sync.Mutex
	var vacuumed []core.Event
	c, err := core.NewClient(s, core.Config{Observers: []core.Observer{core.ObserverFunc(func(e core.Event) {
		if e.Kind == core.EventStoreVacuumed {
			mu.Lock()
			vacuumed = append(vacuumed, e)
			mu.Unlock()
		}
	})}})
	if err != nil {
		t.Fatal(err)
	}
	flushStats(t, s)
	c.Maintain(ctx)
	mu.Lock()
	if len(vacuumed) != 1 || vacuumed[0].Count < 40_000 {
		t.Fatalf("maintenance reported vacuums %+v; want one of at least 40,000 dead rows", vacuumed)
	}
	mu.Unlock()
	after := claimPages(t, s, now, 10)
	t.Logf("a claim of 10 read %d pages before the vacuum, %d after", before, after)
	// 40,000 claim-index entries fill at least 130 leaf pages (at most
	// about 300 entries of this key fit in one).
	if before-after < 100 {
		t.Errorf("a claim of 10 read %d pages before the vacuum and %d after; want the index pages of 40,000 claimed jobs no longer read", before, after)
	}
	// The running jobs are untouched, and the next claim goes on in order.
	var running int
	if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM "+jobs+" WHERE state = 'running' AND worker_id = 'w1'").Scan(&running); err != nil || running != 40_000 {
		t.Fatalf("running jobs after the vacuum: %d, %v", running, err)
	}
	got, err := s.Claim(ctx, contract.ClaimParams{Queue: "q", Limit: 2, WorkerID: "w2", Now: now, LeaseUntil: now.Add(time.Hour)})
	if err != nil || len(got) != 2 || !got[0].RunAt.Before(got[1].RunAt) {
		t.Fatalf("claim after the vacuum: %v, %v", got, err)
	}
	// Right after, the dead rows are gone: below the threshold again.
	flushStats(t, s)
	if n, err := s.Vacuum(ctx); err != nil || n != 0 {
		t.Fatalf("second Vacuum = %d, %v; want 0, nil", n, err)
	}
}

// TestVacuumOff: WithVacuumThreshold(-1, …) and the URL's vacuum=false
// leave the table to autovacuum.
func TestVacuumOff(t *testing.T) {
	s := newTestStore(t, WithVacuumThreshold(-1, 0))
	if n, err := s.Vacuum(t.Context()); err != nil || n != 0 {
		t.Fatalf("Vacuum turned off = %d, %v", n, err)
	}
	_, opts, err := ParseURL("postgres://h/db?vacuum=false&sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	c, err := newConfig(opts)
	if err != nil || c.vacuumMinDead >= 0 {
		t.Fatalf("vacuum=false: threshold %d, %v", c.vacuumMinDead, err)
	}
	if _, _, err := ParseURL("postgres://h/db?vacuum=sometimes"); err == nil || !strings.Contains(err.Error(), "vacuum") {
		t.Fatalf("vacuum=sometimes: %v; want an error naming the parameter", err)
	}
}
