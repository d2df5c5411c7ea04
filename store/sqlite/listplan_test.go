package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

// TestListUsesAnIndex: every list order ListParams offers (id, run_at,
// each ascending and descending, with and without a cursor and filters)
// is read in the order of an index, the rowid (the table itself) or jobs_run_at
// (schema version 10), never sorted in a temporary B-tree: a page then
// reads its own rows and stops, whatever the table holds.
func TestListUsesAnIndex(t *testing.T) {
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "plan.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		p     contract.ListParams
		index string
	}{
		{contract.ListParams{Limit: 1000}, ""},                           // the table itself, in rowid order
		{contract.ListParams{Desc: true, AfterID: 500, Limit: 1000}, ""}, // the table itself, in rowid order
		{contract.ListParams{Queue: "q", States: []contract.State{contract.StateScheduled}, Limit: 10}, ""},
		{contract.ListParams{ByRunAt: true, Limit: 1000}, "jobs_run_at"},
		{contract.ListParams{ByRunAt: true, Desc: true, Limit: 1000}, "jobs_run_at"},
		{contract.ListParams{ByRunAt: true, Desc: true, AfterID: 7, AfterRunAt: at, Limit: 1000}, "jobs_run_at"},
		{contract.ListParams{ByRunAt: true, AfterID: 7, AfterRunAt: at, Kind: "k", States: []contract.State{contract.StateScheduled, contract.StateAvailable}, Limit: 1000}, "jobs_run_at"},
	} {
		q, args, err := s.ListQuery(c.p)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := s.DB().Query("EXPLAIN QUERY PLAN "+q, args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		text := strings.Join(plan, "; ")
		if strings.Contains(text, "TEMP B-TREE") || !strings.Contains(text, c.index) {
			t.Errorf("List(%+v) plan %q; want a read in the order of the index %q, no sort", c.p, text, c.index)
		}
	}
}
