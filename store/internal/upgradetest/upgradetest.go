// Package upgradetest holds the tests the SQL stores share of upgrading a
// schema from an older version: from version 1, as the stores before
// claim_seq left it (Run), and from version 2, before the settings table
// (RunFromVersion2). Each writes jobs, checks that they survive Migrate
// unchanged, that what the new version adds works across the upgrade, and
// that Migrate is then a no-op.
// Each store supplies a Backend with what differs between databases: how
// to reach the database, how to write a version-1 row with raw SQL and
// how to read raw rows back. It is imported only by _test files.
package upgradetest

import (
	"context"
	"database/sql"
	"encoding/json"
	"io/fs"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/backlogq/backlog/core/contract"

	"github.com/pressly/goose/v3"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/store/internal/sqlq"
)

// V1InsertColumns are the jobs columns of schema version 1 a row is
// inserted with: all but id.
const V1InsertColumns = "queue, kind, args, priority, state, attempt, max_attempts, run_at, deadline, unique_key, tags, metadata, errors, result, created_at, attempted_at, finished_at, worker_id, lease_until, version"

// V1Columns are the jobs columns of schema version 1.
const V1Columns = "id, " + V1InsertColumns

// Store is what Run uses of the store under test.
type Store interface {
	Get(ctx context.Context, id int64) (*contract.Job, error)
	Claim(ctx context.Context, p contract.ClaimParams) ([]*contract.Job, error)
	Finish(ctx context.Context, outcomes []contract.Outcome) ([]contract.FinishResult, error)
	ExtendLeases(ctx context.Context, workerID string, leases []contract.Lease, until time.Time) (int, error)
	Migrate(ctx context.Context) error
}

// Backend is what one SQL store supplies to Run.
type Backend struct {
	// Store is the store under test, opened without migrating, on a
	// database (or schema, or prefix) of its own. Its Migrate is the
	// upgrade under test.
	Store Store

	// DB reaches the store's database through database/sql. Run applies
	// migrations with goose through it and reads the goose version table.
	DB *sql.DB

	// Dialect is goose's dialect for DB.
	Dialect goose.Dialect

	// Migrations are the store's migration templates, rendered for this
	// store with Data as sqlq.RenderMigrations renders them.
	Migrations fs.FS
	Data       any

	// Jobs and Versions are the qualified names of the jobs table and of
	// goose's version table.
	Jobs, Versions string

	// ClaimSeqQuery, run on DB with ClaimSeqArgs, counts the jobs table's
	// columns named claim_seq.
	ClaimSeqQuery string
	ClaimSeqArgs  []any

	// InsertV1 writes j into the jobs table with V1InsertColumns only,
	// version as its version column, encoded as the store at schema
	// version 1 encoded them, and sets j.ID.
	InsertV1 func(t testing.TB, j *contract.Job, version int64)

	// Rows runs query and returns every row's values as the driver reads
	// them, in a form reflect.DeepEqual compares faithfully.
	Rows func(t testing.TB, query string) [][]any
}

// Run migrates b's store to schema version 1 only, writes a pending, a
// running and a completed job there with raw SQL, runs Migrate, and checks
// that every version-1 column stays as stored and the jobs read back
// unchanged with ClaimSeq 0, that Migrate and goose then find nothing to
// do, that a new claim counts from ClaimSeq 1 and fences out claim 0, and
// that the execution running across the upgrade can still extend its
// lease and be finished at ClaimSeq 0, once.
func Run(t *testing.T, b Backend) {
	ctx := context.Background()
	s := b.Store

	full, newest, err := sqlq.RenderMigrations(b.Migrations, b.Data)
	if err != nil {
		t.Fatal(err)
	}
	if newest < 2 {
		t.Fatalf("newest migration is %d; want at least 2", newest)
	}
	if err := sqlq.Migrate(ctx, b.DB, b.Dialect, onlyV1(t, full), b.Versions); err != nil {
		t.Fatalf("migrate to version 1: %v", err)
	}
	if v := schemaVersion(t, b); v != 1 {
		t.Fatalf("schema at version %d; want 1", v)
	}
	if hasClaimSeq(t, b) {
		t.Fatal("version 1 already has jobs.claim_seq")
	}

	pending, running, completed := Jobs()
	b.InsertV1(t, pending, 4)
	b.InsertV1(t, running, 5)
	b.InsertV1(t, completed, 7)
	before := snapshot(t, b)

	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("migrate from version 1: %v", err)
	}
	if v := schemaVersion(t, b); v != newest {
		t.Fatalf("schema at version %d after Migrate; want %d", v, newest)
	}
	if !hasClaimSeq(t, b) {
		t.Fatal("no jobs.claim_seq after Migrate")
	}
	sameRows(t, "the migration", before, snapshot(t, b))
	for _, want := range []*contract.Job{pending, running, completed} {
		checkGet(t, s, want)
	}

	// A second Migrate, and goose itself with every migration, find
	// nothing to do.
	applied := versionRows(t, b)
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("second migrate: %v", err)
	}
	if err := sqlq.Migrate(ctx, b.DB, b.Dialect, full, b.Versions); err != nil {
		t.Fatalf("goose up on the migrated schema: %v", err)
	}
	if again := versionRows(t, b); again != applied || schemaVersion(t, b) != newest {
		t.Fatalf("second migrate wrote versions: %d rows, then %d", applied, again)
	}
	sameRows(t, "the second migrate", before, snapshot(t, b))

	// The first claim after the upgrade is claim 1.
	now := pending.RunAt.Add(time.Minute)
	got, err := s.Claim(ctx, contract.ClaimParams{Queue: pending.Queue, WorkerID: "w-new", Limit: 10, Now: now, LeaseUntil: now.Add(time.Minute), Tags: pending.Tags})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != pending.ID {
		t.Fatalf("claimed %d jobs (%v); want only the pending job %d", len(got), got, pending.ID)
	}
	if c := got[0]; c.ClaimSeq != 1 || c.Attempt != pending.Attempt+1 || c.State != contract.StateRunning || c.WorkerID != "w-new" {
		t.Fatalf("claimed %+v; want claim_seq 1, attempt %d, running under w-new", c, pending.Attempt+1)
	}
	stale := contract.Outcome{JobID: pending.ID, WorkerID: "w-new", ClaimSeq: 0, Attempt: pending.Attempt + 1, Kind: contract.OutcomeComplete, At: now}
	if res := finish(t, s, stale); res.Applied {
		t.Fatal("an outcome at claim_seq 0 applied to the claim made after the upgrade")
	}

	// The execution that was running across the upgrade is claim 0.
	if n, err := s.ExtendLeases(ctx, running.WorkerID, []contract.Lease{{JobID: running.ID, ClaimSeq: 0}}, now.Add(10*time.Minute)); err != nil || n != 1 {
		t.Fatalf("extend the lease of the job running across the upgrade: %d, %v; want 1", n, err)
	}
	done := contract.Outcome{JobID: running.ID, WorkerID: running.WorkerID, ClaimSeq: 0, Attempt: running.Attempt, Kind: contract.OutcomeComplete, At: now, Result: []byte(`{"rows":3}`)}
	if res := finish(t, s, done); !res.Applied {
		t.Fatal("the job running across the upgrade could not be finished at claim_seq 0")
	}
	want := *running
	want.State, want.FinishedAt, want.LeaseUntil, want.Result = contract.StateCompleted, now, time.Time{}, done.Result
	checkGet(t, s, &want)
	if res := finish(t, s, done); res.Applied {
		t.Fatal("a second finish with the same fence applied")
	}
	checkGet(t, s, &want)
	checkGet(t, s, completed)
}

// Jobs returns a pending (retryable, due) job, a running one and a
// completed one as the store at schema version 1 would have left them.
func Jobs() (pending, running, completed *contract.Job) {
	base := time.Date(2030, 1, 2, 3, 4, 5, 123456000, time.UTC)
	pending = &contract.Job{
		Queue: "upgrade", Kind: "email.send", Args: json.RawMessage(`{"to":"ü@example.com","n":[1,2.5,null],"nested":{"q":"\"quoted\"\n","e":{}}}`),
		Priority: 2, State: contract.StateRetryable, Attempt: 1, MaxAttempts: 5,
		RunAt: base.Add(-time.Minute), Deadline: base.Add(24 * time.Hour), UniqueKey: "key-ü-1",
		Tags: []string{"gpu", "β"}, Metadata: map[string]string{"trace": "abc-123", "": "empty key", "ü": "line\nbreak"},
		Errors: []contract.AttemptError{{Attempt: 1, At: base.Add(-2 * time.Minute), Error: `dial tcp 10.0.0.1:25: i/o timeout ("smtp")`,
			Trace: "goroutine 7 [running]:\nmain.send()\n\t/src/send.go:42 +0x1d"}},
		CreatedAt: base.Add(-time.Hour), AttemptedAt: base.Add(-3 * time.Minute), WorkerID: "w-old-0",
	}
	running = &contract.Job{
		Queue: "upgrade", Kind: "report.build", Args: json.RawMessage(`{"id":42,"range":["2030-01-01","2030-01-02"]}`),
		Priority: 5, State: contract.StateRunning, Attempt: 1, MaxAttempts: 3, RunAt: base.Add(-10 * time.Minute),
		Tags: []string{"reports"}, Metadata: map[string]string{"tenant": "t-1"},
		Errors:    []contract.AttemptError{{Attempt: 1, At: base.Add(-time.Minute), Error: "handed back: shutting down"}},
		CreatedAt: base.Add(-10 * time.Minute), AttemptedAt: base.Add(-30 * time.Second),
		WorkerID: "w-old-1", LeaseUntil: base.Add(5 * time.Minute),
	}
	completed = &contract.Job{
		Queue: "upgrade", Kind: "email.send", Args: json.RawMessage(`[{"x":"ü"},true,-0.5]`),
		Priority: 10, State: contract.StateCompleted, Attempt: 2, MaxAttempts: 2, RunAt: base.Add(-20 * time.Minute),
		UniqueKey: "key-ü-1", Metadata: map[string]string{"k": `va"lue`},
		Errors: []contract.AttemptError{
			{Attempt: 1, At: base.Add(-19 * time.Minute), Error: "lease expired", Cause: core.CauseLeaseExpired},
			{Attempt: 2, At: base.Add(-18 * time.Minute), Error: "boom ✗", Trace: "exit status 2\nstderr: ✗"},
		},
		Result:    []byte{0x00, 0xff, 'o', 'k', '\n'},
		CreatedAt: base.Add(-20 * time.Minute), AttemptedAt: base.Add(-17 * time.Minute), FinishedAt: base.Add(-16 * time.Minute),
		WorkerID: "w-old-2",
	}
	return pending, running, completed
}

// Prefixed returns the Backend of a store reached through db, with ?
// placeholders and LastInsertId, whose migrations name its tables with
// {{.P}} and whose tables are prefix+"jobs" and prefix+"goose_db_version".
// claimSeqQuery counts the columns named claim_seq of the jobs table named
// by its one argument. tm and noErrors encode the version-1 rows as for
// V1Values.
func Prefixed(s Store, db *sql.DB, prefix string, migrations fs.FS, dialect goose.Dialect, claimSeqQuery string, tm func(time.Time) any, noErrors any) Backend {
	jobs := prefix + "jobs"
	return Backend{
		Store: s, DB: db, Dialect: dialect,
		Migrations: migrations, Data: struct{ P string }{prefix},
		Jobs: jobs, Versions: prefix + "goose_db_version",
		ClaimSeqQuery: claimSeqQuery, ClaimSeqArgs: []any{jobs},
		InsertV1: SQLInsertV1(db, jobs, tm, noErrors),
		Rows:     SQLRows(db),
	}
}

// V1Values returns the values of j's V1InsertColumns, in order, with
// version as its version column: tags, metadata and errors as JSON text
// (noErrors where j has no error history), unset unique key, worker id
// and result as nil (NULL), and times as tm encodes them.
func V1Values(t testing.TB, j *contract.Job, version int64, tm func(time.Time) any, noErrors any) []any {
	t.Helper()
	tags, err := sqlq.EncodeTags(j.Tags)
	if err != nil {
		t.Fatal(err)
	}
	meta, err := sqlq.EncodeMetadata(j.Metadata)
	if err != nil {
		t.Fatal(err)
	}
	errs := noErrors
	if j.Errors != nil {
		b, err := json.Marshal(j.Errors)
		if err != nil {
			t.Fatal(err)
		}
		errs = string(b)
	}
	var result any
	if j.Result != nil {
		result = j.Result
	}
	var key, worker any
	if j.UniqueKey != "" {
		key = j.UniqueKey
	}
	if j.WorkerID != "" {
		worker = j.WorkerID
	}
	return []any{j.Queue, j.Kind, string(j.Args), j.Priority, string(j.State), j.Attempt, j.MaxAttempts, tm(j.RunAt), tm(j.Deadline), key, tags, meta, errs, result,
		tm(j.CreatedAt), tm(j.AttemptedAt), tm(j.FinishedAt), worker, tm(j.LeaseUntil), version}
}

// SQLInsertV1 returns a Backend.InsertV1 for a database with ?
// placeholders and LastInsertId: it inserts V1Values(t, j, version, tm,
// noErrors) into jobs through db.
func SQLInsertV1(db *sql.DB, jobs string, tm func(time.Time) any, noErrors any) func(t testing.TB, j *contract.Job, version int64) {
	return func(t testing.TB, j *contract.Job, version int64) {
		t.Helper()
		vals := V1Values(t, j, version, tm, noErrors)
		res, err := db.Exec("INSERT INTO "+jobs+" ("+V1InsertColumns+") VALUES (?"+strings.Repeat(", ?", len(vals)-1)+")", vals...)
		if err != nil {
			t.Fatalf("insert version-1 row: %v", err)
		}
		if j.ID, err = res.LastInsertId(); err != nil {
			t.Fatal(err)
		}
	}
}

// SQLRows returns a Backend.Rows reading through db: each column scanned
// into an any, []byte turned into string (compared byte for byte, printed
// readably).
func SQLRows(db *sql.DB) func(t testing.TB, query string) [][]any {
	return func(t testing.TB, query string) [][]any {
		t.Helper()
		rows, err := db.Query(query)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		cols, err := rows.Columns()
		if err != nil {
			t.Fatal(err)
		}
		var out [][]any
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(vals))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			for i, v := range vals {
				if b, ok := v.([]byte); ok {
					vals[i] = string(b)
				}
			}
			out = append(out, vals)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
}

// onlyV1 returns the rendered migration 00001 alone.
func onlyV1(t *testing.T, full fs.FS) fs.FS {
	t.Helper()
	entries, err := fs.ReadDir(full, ".")
	if err != nil {
		t.Fatal(err)
	}
	out := fstest.MapFS{}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "00001_") {
			b, err := fs.ReadFile(full, e.Name())
			if err != nil {
				t.Fatal(err)
			}
			out[e.Name()] = &fstest.MapFile{Data: b, Mode: 0o444}
		}
	}
	if len(out) != 1 {
		t.Fatalf("%d migrations numbered 00001; want 1", len(out))
	}
	return out
}

// schemaVersion is the highest applied version in b's goose version table.
func schemaVersion(t *testing.T, b Backend) int64 {
	t.Helper()
	var v sql.NullInt64
	if err := b.DB.QueryRow("SELECT MAX(version_id) FROM " + b.Versions + " WHERE is_applied").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v.Int64
}

// versionRows counts the rows of b's goose version table.
func versionRows(t *testing.T, b Backend) int {
	t.Helper()
	var n int
	if err := b.DB.QueryRow("SELECT COUNT(*) FROM " + b.Versions).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func hasClaimSeq(t *testing.T, b Backend) bool {
	t.Helper()
	var n int
	if err := b.DB.QueryRow(b.ClaimSeqQuery, b.ClaimSeqArgs...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// snapshot reads the version-1 columns of every job, as stored: three
// jobs.
func snapshot(t *testing.T, b Backend) [][]any {
	t.Helper()
	return snapshotN(t, b, 3)
}

// snapshotN is snapshot of n jobs.
func snapshotN(t *testing.T, b Backend, n int) [][]any {
	t.Helper()
	out := b.Rows(t, "SELECT "+V1Columns+" FROM "+b.Jobs+" ORDER BY id")
	if len(out) != n {
		t.Fatalf("%d jobs stored; want %d", len(out), n)
	}
	cols := strings.Count(V1Columns, ",") + 1
	for i, r := range out {
		if len(r) != cols {
			t.Fatalf("jobs row %d has %d columns; want %d", i, len(r), cols)
		}
	}
	return out
}

// sameRows fails t, naming every column that differs, unless the
// snapshots are equal.
func sameRows(t *testing.T, what string, before, after [][]any) {
	t.Helper()
	cols := strings.Split(V1Columns, ", ")
	for i := range before {
		for c := range cols {
			if !reflect.DeepEqual(before[i][c], after[i][c]) {
				t.Errorf("%s changed jobs row %d column %s: %#v, then %#v", what, i, cols[c], before[i][c], after[i][c])
			}
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

// checkGet reads want.ID through the store and compares it with want,
// args by meaning.
func checkGet(t *testing.T, s Store, want *contract.Job) {
	t.Helper()
	got, err := s.Get(context.Background(), want.ID)
	if err != nil {
		t.Fatalf("get job %d: %v", want.ID, err)
	}
	if g, w := canon(t, got), canon(t, want); g != w || got.ClaimSeq != want.ClaimSeq {
		t.Fatalf("job %d reads back as\n%s (claim_seq %d)\nwant\n%s (claim_seq %d)", want.ID, g, got.ClaimSeq, w, want.ClaimSeq)
	}
}

// canon is j as JSON with its args re-encoded canonically.
func canon(t *testing.T, j *contract.Job) string {
	t.Helper()
	c := *j
	var args any
	if err := json.Unmarshal(c.Args, &args); err != nil {
		t.Fatalf("job %d args %q: %v", j.ID, c.Args, err)
	}
	a, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	c.Args = a
	b, err := json.Marshal(&c)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// finish applies the single outcome o and returns its result.
func finish(t *testing.T, s Store, o contract.Outcome) contract.FinishResult {
	t.Helper()
	res, err := s.Finish(context.Background(), []contract.Outcome{o})
	if err != nil {
		t.Fatalf("finish job %d: %v", o.JobID, err)
	}
	if len(res) != 1 || res[0].JobID != o.JobID {
		t.Fatalf("finish of job %d returned %+v", o.JobID, res)
	}
	return res[0]
}
