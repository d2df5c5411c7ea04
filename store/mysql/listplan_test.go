package mysql

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/storetest/dbtest"
)

// TestListUsesAnIndex: on 60,000 jobs whose run_at is out of id order,
// every list order ListParams offers (id, run_at, each ascending and
// descending, with and without a cursor and filters) is read in the
// order of an index, the primary key or run_at_idx (schema version 11),
// never sorted (EXPLAIN shows no filesort): a page reads its own rows and
// stops.
func TestListUsesAnIndex(t *testing.T) {
	s, err := Open(context.Background(), dbtest.MySQLDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := t.Context()
	digits := "(SELECT 0 n UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)"
	for _, q := range []string{
		"INSERT INTO " + s.t.Jobs + " (queue, kind, args, priority, state, max_attempts, run_at, created_at)" +
			" SELECT 'q', 'k', '{}', 5, 'scheduled', 20, TIMESTAMPADD(SECOND, (g * 7919) % 60000, '2030-01-01'), '2030-01-01' FROM" +
			" (SELECT a.n + 10*b.n + 100*c.n + 1000*d.n + 10000*e.n AS g FROM " + digits + " a, " + digits + " b, " + digits + " c, " + digits + " d, " + digits + " e) x WHERE g < 60000",
		"ANALYZE TABLE " + s.t.Jobs,
	} {
		if _, err := s.DB().ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	at := time.Date(2030, 1, 1, 8, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		p     contract.ListParams
		index string
	}{
		{contract.ListParams{Limit: 50}, "PRIMARY"},
		{contract.ListParams{Desc: true, AfterID: 30000, Limit: 50}, "PRIMARY"},
		{contract.ListParams{ByRunAt: true, Limit: 50}, "run_at_idx"},
		{contract.ListParams{ByRunAt: true, Desc: true, Limit: 50}, "run_at_idx"},
		{contract.ListParams{ByRunAt: true, Desc: true, AfterID: 7, AfterRunAt: at, Limit: 50}, "run_at_idx"},
		{contract.ListParams{ByRunAt: true, AfterID: 7, AfterRunAt: at, Queue: "q", States: []contract.State{contract.StateScheduled, contract.StateAvailable}, Limit: 50}, "run_at_idx"},
	} {
		q, args, err := s.ListQuery(c.p)
		if err != nil {
			t.Fatal(err)
		}
		key, extra := explain(t, s.DB(), q, args)
		if key != c.index || strings.Contains(strings.ToLower(extra), "filesort") {
			t.Errorf("List(%+v): EXPLAIN key %q, extra %q; want a read in the order of %s, no filesort", c.p, key, extra, c.index)
		}
	}
}

// explain returns the key and Extra of the EXPLAIN of a one-table query.
func explain(t *testing.T, db *sql.DB, q string, args []any) (key, extra string) {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), "EXPLAIN "+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	if !rows.Next() {
		t.Fatalf("EXPLAIN %s: no row", q)
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		t.Fatal(err)
	}
	for i, c := range cols {
		switch strings.ToLower(c) {
		case "key":
			key = vals[i].String
		case "extra":
			extra = vals[i].String
		}
	}
	return key, extra
}
