package postgres

import (
	"context"
	"fmt"
	"sync"
)

// Defaults of WithVacuumThreshold: a vacuum starts once the jobs table has
// DefaultVacuumMinDeadRows dead rows plus DefaultVacuumScaleFactor times
// its live rows (by pg_stat_user_tables).
const (
	DefaultVacuumMinDeadRows = 50_000
	DefaultVacuumScaleFactor = 0.05
)

// WithVacuumThreshold sets when the store vacuums its jobs table itself
// (contract.Vacuumer, called by every node's maintenance round): once
// n_dead_tup of pg_stat_user_tables reaches minDeadRows + scaleFactor ×
// n_live_tup. Defaults: DefaultVacuumMinDeadRows and
// DefaultVacuumScaleFactor. A negative minDeadRows turns it off, leaving
// the table to autovacuum alone; a negative scaleFactor counts as 0.
//
// Why: every job claimed leaves a dead entry in the claim index until a
// VACUUM removes it, and each claim steps over the entries of every job
// claimed since the last one; with autovacuum's default naptime (one
// visit a minute) a queue working tens of thousands of jobs a second slows
// down between visits (docs/postgres.md, "The claim plan").
func WithVacuumThreshold(minDeadRows int64, scaleFactor float64) Option {
	return func(c *config) { c.vacuumMinDead, c.vacuumScale = minDeadRows, max(scaleFactor, 0) }
}

// vacuumer holds the state of Store.Vacuum.
type vacuumer struct {
	mu      sync.Mutex // held while one call runs; others return at once
	checked bool       // ownership looked up
	owner   bool       // the session's role may vacuum the jobs table
}

// Vacuum implements contract.Vacuumer. It reads the jobs table's dead and live
// row counts from pg_stat_user_tables and, when the dead rows reach the
// threshold of WithVacuumThreshold, runs
//
//	VACUUM (SKIP_LOCKED, INDEX_CLEANUP ON) <schema>.jobs
//
// INDEX_CLEANUP ON because the point is the claim index: PostgreSQL skips
// index cleanup when fewer than 2 % of the table's pages hold dead rows,
// which is the case for the recent jobs of a table with a long history.
// SKIP_LOCKED makes a node whose vacuum would wait for another's (or for
// autovacuum) do nothing. VACUUM takes a SHARE UPDATE EXCLUSIVE lock, which
// claims, inserts, finishes and prunes do not conflict with; it holds one
// pooled connection while it runs.
//
// It returns the dead rows counted before a vacuum that ran, and 0 when
// none ran (below the threshold, turned off, another vacuum under way, or
// already running in this process). The role must own the table (or be a
// member of its owner, or a superuser); when it does not, the first call
// returns an error saying so and later calls do nothing.
func (s *Store) Vacuum(ctx context.Context) (int64, error) {
	if s.vacuumMinDead < 0 || !s.vac.mu.TryLock() {
		return 0, nil
	}
	defer s.vac.mu.Unlock()
	if !s.vac.checked {
		err := s.pool.QueryRow(ctx, `SELECT pg_has_role(current_user, relowner, 'USAGE') FROM pg_class WHERE oid = $1::regclass`, s.tables.Jobs).Scan(&s.vac.owner)
		if err != nil {
			return 0, fmt.Errorf("postgres: vacuum: %w", err)
		}
		s.vac.checked = true
		if !s.vac.owner {
			return 0, fmt.Errorf("postgres: vacuum: the role does not own %s, so the store cannot vacuum it; leave it to autovacuum and make autovacuum eager on it (docs/postgres.md), or open the store with WithVacuumThreshold(-1, 0)", s.tables.Jobs)
		}
	}
	if !s.vac.owner {
		return 0, nil
	}
	var dead, live, vacuums int64
	stats := `SELECT n_dead_tup, n_live_tup, vacuum_count FROM pg_stat_user_tables WHERE relid = $1::regclass`
	if err := s.pool.QueryRow(ctx, stats, s.tables.Jobs).Scan(&dead, &live, &vacuums); err != nil {
		return 0, fmt.Errorf("postgres: vacuum: %w", err)
	}
	if float64(dead) < float64(s.vacuumMinDead)+s.vacuumScale*float64(live) {
		return 0, nil
	}
	if _, err := s.pool.Exec(ctx, "VACUUM (SKIP_LOCKED, INDEX_CLEANUP ON) "+s.tables.Jobs); err != nil {
		return 0, fmt.Errorf("postgres: vacuum: %w", err)
	}
	// A vacuum skipped for a lock reports nothing but a warning: it ran
	// only if the table's vacuum count went up.
	var after int64
	if err := s.pool.QueryRow(ctx, `SELECT vacuum_count FROM pg_stat_user_tables WHERE relid = $1::regclass`, s.tables.Jobs).Scan(&after); err != nil {
		return 0, fmt.Errorf("postgres: vacuum: %w", err)
	}
	if after == vacuums {
		return 0, nil
	}
	return dead, nil
}
