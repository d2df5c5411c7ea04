package postgres

import (
	"testing"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

// TestListUsesAnIndex: on 60,000 jobs whose run_at is out of id order, a
// page of 50 in every order ListParams offers (id, run_at, each ascending
// and descending, with and without a cursor and filters) reads a few
// dozen pages: a range of the primary key or of jobs_run_at_idle (schema
// version 14; running jobs, which it leaves out, read apart through
// jobs_running) in the page's order, stopping after its rows, never a
// scan and sort of the table (hundreds of pages).
func TestListUsesAnIndex(t *testing.T) {
	s := newTestStore(t)
	ctx := t.Context()
	jobs := s.tables.Jobs
	for _, q := range []string{
		"INSERT INTO " + jobs + " (queue, kind, args, priority, state, max_attempts, run_at, created_at)" +
			" SELECT 'q', 'k', '{}', 5, 'scheduled', 20, timestamptz '2030-01-01' + ((g * 7919) % 60000) * interval '1 s', timestamptz '2030-01-01' FROM generate_series(1, 60000) g",
		"ANALYZE " + jobs,
	} {
		if _, err := s.pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	at := time.Date(2030, 1, 1, 8, 0, 0, 0, time.UTC)
	for _, p := range []contract.ListParams{
		{Limit: 50},
		{Desc: true, AfterID: 30000, Limit: 50},
		{ByRunAt: true, Limit: 50},
		{ByRunAt: true, Desc: true, Limit: 50},
		{ByRunAt: true, Desc: true, AfterID: 7, AfterRunAt: at, Limit: 50},
		{ByRunAt: true, AfterID: 7, AfterRunAt: at, Queue: "q", States: []contract.State{contract.StateScheduled, contract.StateAvailable}, Limit: 50},
		{ByRunAt: true, AfterID: 7, AfterRunAt: at, States: []contract.State{contract.StateScheduled, contract.StateRunning}, Limit: 50},
		{ByRunAt: true, Desc: true, States: []contract.State{contract.StateRunning}, Limit: 50},
	} {
		q, args, err := s.ListQuery(p)
		if err != nil {
			t.Fatal(err)
		}
		pages, plan := genericPlanPages(t, s, "list", q, args)
		if pages > 150 {
			t.Errorf("List(%+v) read %d pages; want a few dozen (an index range in the page's order). Plan: %s", p, pages, plan)
		}
	}
}
