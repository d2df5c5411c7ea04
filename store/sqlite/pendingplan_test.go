package sqlite

import (
	"fmt"
	"strings"
	"testing"

	"github.com/backlogq/backlog/store/internal/sqlq"
)

// TestPendingIndexesNeedNoTemporaryTables: no index of the jobs table
// tests its rows with an IN list (schema version 12). SQLite evaluates a
// partial index's WHERE for every row a statement writes, and there an
// IN list of three or more constants is a temporary B-tree built for
// each row and index: before version 12, jobs_claim, jobs_deadline and
// jobs_fair made every insert, claim and finish of a job build eight.
// The program of a claim must hold no such per-row table either: its
// only temporary tables are the rows to update, the candidates, the
// worker's tags and the RETURNING buffer (it had six more before).
func TestPendingIndexesNeedNoTemporaryTables(t *testing.T) {
	s := openTest(t)
	rows, err := s.DB().Query("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL", s.Prefix()+"jobs")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		var name, text string
		if err := rows.Scan(&name, &text); err != nil {
			t.Fatal(err)
		}
		n++
		if strings.Contains(strings.ToUpper(text), " IN (") {
			t.Errorf("index %s tests rows with an IN list: %s", name, text)
		}
	}
	rows.Close()
	if n < 5 {
		t.Fatalf("found %d indexes on the jobs table", n)
	}

	d := dialect{}
	prog, err := s.DB().Query("EXPLAIN "+s.sql.claim, "w", d.Time(t0), d.Time(t0), "q", d.Time(t0), sqlq.TagsArg(nil), "q", true, true, 10)
	if err != nil {
		t.Fatal(err)
	}
	ephemeral := 0
	for prog.Next() {
		var addr, p1, p2, p3, p5 any
		var op, p4, comment any
		if err := prog.Scan(&addr, &op, &p1, &p2, &p3, &p4, &p5, &comment); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(op) == "OpenEphemeral" {
			ephemeral++
		}
	}
	prog.Close()
	if ephemeral > 4 {
		t.Errorf("the claim's program opens %d temporary tables; want at most 4 (the rows to update, the candidates, the worker's tags, RETURNING)", ephemeral)
	}
}

// TestPendingStatementsUseTheirIndexes: every statement that reads pending
// jobs spells the pending states as the partial indexes do (pendingSQL),
// so SQLite reads the index meant for it: the claims jobs_claim, the
// claim of one partition and the walk of a fair queue's partitions
// jobs_fair, the deadline discard (of pending and waiting jobs, schema
// version 15) jobs_deadline and the due-job count of
// the queue history jobs_claim.
func TestPendingStatementsUseTheirIndexes(t *testing.T) {
	s := openTest(t)
	d := dialect{}
	now := d.Time(t0)
	tags := sqlq.TagsArg(nil)
	jobs := s.Prefix() + "jobs"
	fair, fairArgs := s.FairPartitionQuery("q", "partition_key", pendingSQL, "")
	for _, c := range []struct {
		name, q string
		args    []any
		index   string
	}{
		{"claim", s.sql.claim, []any{"w", now, now, "q", now, tags, "q", true, true, 10}, "jobs_claim"},
		{"limited candidates", s.sql.limitedCands, []any{"q", now, tags, "[]", "[]", 1, 10, 10}, "jobs_claim"},
		{"limited candidates of a partition", s.sql.limitedCandsPart, []any{"q", now, tags, "[]", "[]", 1, 10, "p", 10}, "jobs_fair"},
		{"fair partitions", fair, fairArgs, "jobs_fair"},
		{"deadline discard", "SELECT id, version, attempt, deadline FROM " + jobs + " WHERE (" + d.Pending() + " OR state = 'waiting')" +
			" AND deadline IS NOT NULL AND deadline < ? ORDER BY deadline, id LIMIT ?", []any{now, 10}, "jobs_deadline"},
		{"due jobs", "SELECT queue, COUNT(*), MIN(run_at) FROM " + jobs + " WHERE " + d.Pending() + " AND run_at <= ? GROUP BY queue", []any{now}, "jobs_claim"},
	} {
		rows, err := s.DB().Query("EXPLAIN QUERY PLAN "+c.q, c.args...)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
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
		if !strings.Contains(text, "INDEX "+s.Prefix()+c.index) || strings.Contains(text, "SCAN "+jobs+";") || strings.HasSuffix(text, "SCAN "+jobs) {
			t.Errorf("%s: plan %q; want a read of %s", c.name, text, c.index)
		}
	}
}
