package upgradetest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/internal/sqlq"

	"github.com/pressly/goose/v3"
)

// RepairVersion is the schema version whose migration moves stored job
// times into [core.MinTime, core.MaxTime].
const RepairVersion = 4

// inserter is what RunTimeRepair needs of the store besides Store: its
// Insert, which (unlike the client) does not validate times.
type inserter interface {
	Insert(ctx context.Context, now time.Time, jobs []contract.InsertParams) ([]contract.InsertResult, error)
}

// lentColumns are the jobs columns the store's statements use that
// RunTimeRepair's old schema lacks.
var lentColumns = []string{"partition_key", "progress", "checkpoint",
	"workflow_id", "step", "on_dependency_failure", "dep_count", "waiting_for", "deps_completed", "deps_cancelled", "deps_discarded", "has_dependants"}

// lentType is the type RunTimeRepair lends col with: the type the
// migration that adds it for good gives it, where that matters (a
// PostgreSQL connection's cached statements must not see a column change
// type).
func lentType(b Backend, col string) string {
	switch col {
	case "partition_key", "step":
		return "TEXT"
	case "progress", "checkpoint":
		if b.Dialect == goose.DialectPostgres {
			return "jsonb"
		}
		return "TEXT"
	case "workflow_id":
		return "BIGINT"
	case "on_dependency_failure":
		return "TEXT NOT NULL DEFAULT ''"
	case "has_dependants":
		return "BOOLEAN NOT NULL DEFAULT false"
	}
	return "INTEGER NOT NULL DEFAULT 0"
}

// RunTimeRepair migrates b's store to the version before RepairVersion,
// inserts through the store (as producers could before the range was
// enforced) a job due and with its deadline in year 10000 (UTC; given as
// 9999-12-31T23:59:59-14:00), one with both in 1969 and one with both in
// range, runs Migrate, and checks that every stored time reads back within
// the range, that each job encodes as JSON, and that nothing else moved.
//
// zeroDates is how the store kept a time it cannot hold: false when it
// stores the year-10000 instant as given (SQLite, PostgreSQL; the job
// then does not encode as JSON until the repair makes it core.MaxTime),
// true when it stored the zero date instead and reads it back as unset
// (MySQL and MariaDB through INSERT IGNORE; the repair then keeps what the
// engine did with it: run_at core.MinTime, due at once, and no deadline).
func RunTimeRepair(t *testing.T, b Backend, zeroDates bool) {
	ctx := context.Background()
	ins, ok := b.Store.(inserter)
	if !ok {
		t.Fatalf("%T has no Insert", b.Store)
	}
	full, newest, err := sqlq.RenderMigrations(b.Migrations, b.Data)
	if err != nil {
		t.Fatal(err)
	}
	if newest < RepairVersion {
		t.Fatalf("newest migration is %d; want at least %d (the time repair)", newest, RepairVersion)
	}
	if err := sqlq.Migrate(ctx, b.DB, b.Dialect, upTo(t, full, RepairVersion-1), b.Versions); err != nil {
		t.Fatalf("migrate to version %d: %v", RepairVersion-1, err)
	}

	y10k := time.Date(9999, 12, 31, 23, 59, 59, 0, time.FixedZone("-14:00", -14*3600))
	past := time.Date(1969, 6, 1, 0, 0, 0, 0, time.UTC)
	fine := time.Date(2030, 1, 2, 3, 4, 5, 123456000, time.UTC)
	now := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	params := []contract.InsertParams{
		{Queue: "repair", Kind: "far", Args: json.RawMessage(`{"n":1}`), Priority: 5, MaxAttempts: 3, RunAt: y10k, Deadline: y10k, Tags: []string{"t"}},
		{Queue: "repair", Kind: "past", Args: json.RawMessage(`{"n":2}`), Priority: 5, MaxAttempts: 3, RunAt: past, Deadline: past.Add(24 * time.Hour)},
		{Queue: "repair", Kind: "fine", Args: json.RawMessage(`{"n":3}`), Priority: 5, MaxAttempts: 3, RunAt: fine, Deadline: fine.Add(time.Hour)},
	}
	// The store's statements read and write jobs.partition_key, progress
	// and checkpoint, which came later (the queue limits and progress
	// migrations): the old schema borrows the columns for the inserts and
	// reads through the store, and gives them back before the upgrade
	// adds them for good.
	for _, col := range lentColumns {
		if _, err := b.DB.ExecContext(ctx, "ALTER TABLE "+b.Jobs+" ADD COLUMN "+col+" "+lentType(b, col)); err != nil {
			t.Fatalf("lend %s to version %d: %v", col, RepairVersion-1, err)
		}
	}
	res, err := ins.Insert(ctx, now, params)
	if err != nil {
		t.Fatalf("insert at version %d: %v", RepairVersion-1, err)
	}
	before := make([]*contract.Job, len(res))
	for i, r := range res {
		if before[i], err = b.Store.Get(ctx, r.Job.ID); err != nil {
			t.Fatal(err)
		}
	}
	for _, col := range lentColumns {
		if _, err := b.DB.ExecContext(ctx, "ALTER TABLE "+b.Jobs+" DROP COLUMN "+col); err != nil {
			t.Fatalf("take %s back from version %d: %v", col, RepairVersion-1, err)
		}
	}
	// What the store kept of year 10000 before the repair.
	far := before[0]
	if zeroDates {
		if !far.RunAt.IsZero() || !far.Deadline.IsZero() {
			t.Fatalf("before the repair the year-10000 job reads run_at %s, deadline %s; want both unset (the zero date)", far.RunAt, far.Deadline)
		}
	} else {
		if far.RunAt.Year() != 10000 || far.Deadline.Year() != 10000 {
			t.Fatalf("before the repair the year-10000 job reads run_at %s, deadline %s; want year 10000 as stored", far.RunAt, far.Deadline)
		}
		if _, err := json.Marshal(far); err == nil {
			t.Fatal("the year-10000 job encodes as JSON before the repair; the repair is not what this test exercises")
		}
	}

	if err := b.Store.Migrate(ctx); err != nil {
		t.Fatalf("migrate from version %d: %v", RepairVersion-1, err)
	}
	if v := schemaVersion(t, b); v != newest {
		t.Fatalf("schema at version %d after Migrate; want %d", v, newest)
	}

	want := make([]contract.Job, len(before))
	for i, j := range before {
		want[i] = *j
	}
	if zeroDates {
		want[0].RunAt, want[0].Deadline = core.MinTime, time.Time{}
	} else {
		want[0].RunAt, want[0].Deadline = core.MaxTime, core.MaxTime
	}
	want[1].RunAt, want[1].Deadline = core.MinTime, core.MinTime
	check := func(what string) {
		t.Helper()
		for i := range want {
			got, err := b.Store.Get(ctx, want[i].ID)
			if err != nil {
				t.Fatal(err)
			}
			for _, tm := range []time.Time{got.RunAt, got.Deadline, got.CreatedAt, got.AttemptedAt, got.FinishedAt, got.LeaseUntil} {
				if !tm.IsZero() && !core.InTimeRange(tm) {
					t.Errorf("%s: job %s holds %s, outside the range", what, got.Kind, tm)
				}
			}
			if _, err := json.Marshal(got); err != nil {
				t.Errorf("%s: job %s does not encode as JSON: %v", what, got.Kind, err)
			}
			if g, w := canon(t, got), canon(t, &want[i]); g != w {
				t.Errorf("%s: job %s reads back as\n%s\nwant\n%s", what, got.Kind, g, w)
			}
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	check("after the repair")

	// A second Migrate finds nothing to do.
	applied := versionRows(t, b)
	if err := b.Store.Migrate(ctx); err != nil {
		t.Fatalf("second migrate: %v", err)
	}
	if again := versionRows(t, b); again != applied {
		t.Fatalf("second migrate wrote versions: %d rows, then %d", applied, again)
	}
	check("after a second migrate")
}
