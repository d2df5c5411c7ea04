package postgres

import (
	"context"
	"encoding/json"
	"io/fs"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/store/internal/sqlq"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pressly/goose/v3"
)

// upgradeV1Cols are the jobs columns of schema version 1.
const upgradeV1Cols = "id, queue, kind, args, priority, state, attempt, max_attempts, run_at, deadline, unique_key, tags, metadata, errors, result, created_at, attempted_at, finished_at, worker_id, lease_until, version"

// TestMigrateUpgradeFromVersion1 writes jobs into a version-1 schema with
// raw SQL, as the store before claim_seq left them, runs Migrate, and
// checks that they read back unchanged with ClaimSeq 0, that a new claim
// counts from there, that the execution running across the upgrade can
// still be finished at ClaimSeq 0 (once), and that Migrate is then a no-op.
func TestMigrateUpgradeFromVersion1(t *testing.T) {
	ctx := context.Background()
	s, err := New(ctx, testPool(t), WithSchema(freshSchema(t)), WithMigrate(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	pool, jobs, versions := s.Pool(), s.Schema()+".jobs", s.Schema()+".goose_db_version"
	db := stdlibDB(s)
	t.Cleanup(func() { db.Close() })

	full, newest, err := sqlq.RenderMigrations(migrationFiles, struct{ S string }{s.Schema()})
	if err != nil {
		t.Fatal(err)
	}
	if newest < 2 {
		t.Fatalf("newest migration is %d; want at least 2", newest)
	}
	if err := s.createSchema(ctx); err != nil { // as Migrate does before goose
		t.Fatal(err)
	}
	if err := sqlq.Migrate(ctx, db, goose.DialectPostgres, upgradeOnlyV1(t, full), versions); err != nil {
		t.Fatalf("migrate to version 1: %v", err)
	}
	if v := upgradeSchemaVersion(t, pool, versions); v != 1 {
		t.Fatalf("schema at version %d; want 1", v)
	}
	if upgradeHasClaimSeq(t, pool, jobs) {
		t.Fatal("version 1 already has jobs.claim_seq")
	}

	pending, running, completed := upgradeJobs()
	upgradeInsertV1(t, pool, jobs, pending, 4)
	upgradeInsertV1(t, pool, jobs, running, 5)
	upgradeInsertV1(t, pool, jobs, completed, 7)
	before := upgradeSnapshot(t, pool, jobs)

	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("migrate from version 1: %v", err)
	}
	if v := upgradeSchemaVersion(t, pool, versions); v != newest {
		t.Fatalf("schema at version %d after Migrate; want %d", v, newest)
	}
	if !upgradeHasClaimSeq(t, pool, jobs) {
		t.Fatal("no jobs.claim_seq after Migrate")
	}
	upgradeSameRows(t, "the migration", before, upgradeSnapshot(t, pool, jobs))
	for _, want := range []*core.Job{pending, running, completed} {
		upgradeCheckGet(t, s, want)
	}

	// A second Migrate, and goose itself with every migration, find
	// nothing to do.
	var applied int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+versions).Scan(&applied); err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("second migrate: %v", err)
	}
	if err := sqlq.Migrate(ctx, db, goose.DialectPostgres, full, versions); err != nil {
		t.Fatalf("goose up on the migrated schema: %v", err)
	}
	var again int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+versions).Scan(&again); err != nil {
		t.Fatal(err)
	}
	if again != applied || upgradeSchemaVersion(t, pool, versions) != newest {
		t.Fatalf("second migrate wrote versions: %d rows, then %d", applied, again)
	}
	upgradeSameRows(t, "the second migrate", before, upgradeSnapshot(t, pool, jobs))

	// The first claim after the upgrade is claim 1.
	now := pending.RunAt.Add(time.Minute)
	got, err := s.Claim(ctx, core.ClaimParams{Queue: pending.Queue, WorkerID: "w-new", Limit: 10, Now: now, LeaseUntil: now.Add(time.Minute), Tags: pending.Tags})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != pending.ID {
		t.Fatalf("claimed %d jobs (%v); want only the pending job %d", len(got), got, pending.ID)
	}
	if c := got[0]; c.ClaimSeq != 1 || c.Attempt != pending.Attempt+1 || c.State != core.StateRunning || c.WorkerID != "w-new" {
		t.Fatalf("claimed %+v; want claim_seq 1, attempt %d, running under w-new", c, pending.Attempt+1)
	}
	stale := core.Outcome{JobID: pending.ID, WorkerID: "w-new", ClaimSeq: 0, Attempt: pending.Attempt + 1, Kind: core.OutcomeComplete, At: now}
	if res := upgradeFinish(t, s, stale); res.Applied {
		t.Fatal("an outcome at claim_seq 0 applied to the claim made after the upgrade")
	}

	// The execution that was running across the upgrade is claim 0.
	if n, err := s.ExtendLeases(ctx, running.WorkerID, []core.Lease{{JobID: running.ID, ClaimSeq: 0}}, now.Add(10*time.Minute)); err != nil || n != 1 {
		t.Fatalf("extend the lease of the job running across the upgrade: %d, %v; want 1", n, err)
	}
	done := core.Outcome{JobID: running.ID, WorkerID: running.WorkerID, ClaimSeq: 0, Attempt: running.Attempt, Kind: core.OutcomeComplete, At: now, Result: []byte(`{"rows":3}`)}
	if res := upgradeFinish(t, s, done); !res.Applied {
		t.Fatal("the job running across the upgrade could not be finished at claim_seq 0")
	}
	want := *running
	want.State, want.FinishedAt, want.LeaseUntil, want.Result = core.StateCompleted, now, time.Time{}, done.Result
	upgradeCheckGet(t, s, &want)
	if res := upgradeFinish(t, s, done); res.Applied {
		t.Fatal("a second finish with the same fence applied")
	}
	upgradeCheckGet(t, s, &want)
	upgradeCheckGet(t, s, completed)
}

// upgradeJobs returns a pending (retryable, due) job, a running one and a
// completed one as the store at schema version 1 would have left them.
func upgradeJobs() (pending, running, completed *core.Job) {
	base := time.Date(2030, 1, 2, 3, 4, 5, 123456000, time.UTC)
	pending = &core.Job{
		Queue: "upgrade", Kind: "email.send", Args: json.RawMessage(`{"to":"ü@example.com","n":[1,2.5,null],"nested":{"q":"\"quoted\"\n","e":{}}}`),
		Priority: 2, State: core.StateRetryable, Attempt: 1, MaxAttempts: 5,
		RunAt: base.Add(-time.Minute), Deadline: base.Add(24 * time.Hour), UniqueKey: "key-ü-1",
		Tags: []string{"gpu", "β"}, Metadata: map[string]string{"trace": "abc-123", "": "empty key", "ü": "line\nbreak"},
		Errors: []core.AttemptError{{Attempt: 1, At: base.Add(-2 * time.Minute), Error: `dial tcp 10.0.0.1:25: i/o timeout ("smtp")`,
			Trace: "goroutine 7 [running]:\nmain.send()\n\t/src/send.go:42 +0x1d"}},
		CreatedAt: base.Add(-time.Hour), AttemptedAt: base.Add(-3 * time.Minute), WorkerID: "w-old-0",
	}
	running = &core.Job{
		Queue: "upgrade", Kind: "report.build", Args: json.RawMessage(`{"id":42,"range":["2030-01-01","2030-01-02"]}`),
		Priority: 5, State: core.StateRunning, Attempt: 1, MaxAttempts: 3, RunAt: base.Add(-10 * time.Minute),
		Tags: []string{"reports"}, Metadata: map[string]string{"tenant": "t-1"},
		Errors:    []core.AttemptError{{Attempt: 1, At: base.Add(-time.Minute), Error: "handed back: shutting down"}},
		CreatedAt: base.Add(-10 * time.Minute), AttemptedAt: base.Add(-30 * time.Second),
		WorkerID: "w-old-1", LeaseUntil: base.Add(5 * time.Minute),
	}
	completed = &core.Job{
		Queue: "upgrade", Kind: "email.send", Args: json.RawMessage(`[{"x":"ü"},true,-0.5]`),
		Priority: 10, State: core.StateCompleted, Attempt: 2, MaxAttempts: 2, RunAt: base.Add(-20 * time.Minute),
		UniqueKey: "key-ü-1", Metadata: map[string]string{"k": `va"lue`},
		Errors: []core.AttemptError{
			{Attempt: 1, At: base.Add(-19 * time.Minute), Error: "lease expired", Cause: core.CauseLeaseExpired},
			{Attempt: 2, At: base.Add(-18 * time.Minute), Error: "boom ✗", Trace: "exit status 2\nstderr: ✗"},
		},
		Result:    []byte{0x00, 0xff, 'o', 'k', '\n'},
		CreatedAt: base.Add(-20 * time.Minute), AttemptedAt: base.Add(-17 * time.Minute), FinishedAt: base.Add(-16 * time.Minute),
		WorkerID: "w-old-2",
	}
	return pending, running, completed
}

// upgradeOnlyV1 returns the rendered migration 00001 alone.
func upgradeOnlyV1(t *testing.T, full fs.FS) fs.FS {
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

func upgradeSchemaVersion(t *testing.T, pool *pgxpool.Pool, versions string) int64 {
	t.Helper()
	var v *int64
	if err := pool.QueryRow(context.Background(), "SELECT max(version_id) FROM "+versions+" WHERE is_applied").Scan(&v); err != nil {
		t.Fatal(err)
	}
	if v == nil {
		return 0
	}
	return *v
}

func upgradeHasClaimSeq(t *testing.T, pool *pgxpool.Pool, jobs string) bool {
	t.Helper()
	schema, table, _ := strings.Cut(jobs, ".")
	var n int
	err := pool.QueryRow(context.Background(), "SELECT count(*) FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 AND column_name = 'claim_seq'",
		schema, table).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// upgradeInsertV1 writes j with the version-1 columns only (JSON as jsonb
// text, times as timestamptz) and sets j.ID.
func upgradeInsertV1(t *testing.T, pool *pgxpool.Pool, jobs string, j *core.Job, version int64) {
	t.Helper()
	tags, err := sqlq.EncodeTags(j.Tags)
	if err != nil {
		t.Fatal(err)
	}
	meta, err := sqlq.EncodeMetadata(j.Metadata)
	if err != nil {
		t.Fatal(err)
	}
	errs := "[]"
	if j.Errors != nil {
		b, err := json.Marshal(j.Errors)
		if err != nil {
			t.Fatal(err)
		}
		errs = string(b)
	}
	var result []byte // nil: NULL
	if j.Result != nil {
		result = j.Result
	}
	var key, worker *string
	if j.UniqueKey != "" {
		key = &j.UniqueKey
	}
	if j.WorkerID != "" {
		worker = &j.WorkerID
	}
	tm := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		return &t
	}
	err = pool.QueryRow(context.Background(), "INSERT INTO "+jobs+" (queue, kind, args, priority, state, attempt, max_attempts, run_at, deadline, unique_key, tags, metadata, errors, result, created_at, attempted_at, finished_at, worker_id, lease_until, version)"+
		" VALUES ($1, $2, $3::jsonb, $4, $5, $6, $7, $8, $9, $10, $11::jsonb, $12::jsonb, $13::jsonb, $14, $15, $16, $17, $18, $19, $20) RETURNING id",
		j.Queue, j.Kind, string(j.Args), j.Priority, string(j.State), j.Attempt, j.MaxAttempts, j.RunAt, tm(j.Deadline), key, tags, meta, errs, result,
		j.CreatedAt, tm(j.AttemptedAt), tm(j.FinishedAt), worker, tm(j.LeaseUntil), version).Scan(&j.ID)
	if err != nil {
		t.Fatalf("insert version-1 row: %v", err)
	}
}

// upgradeSnapshot reads the version-1 columns of every job, as stored.
func upgradeSnapshot(t *testing.T, pool *pgxpool.Pool, jobs string) [][]any {
	t.Helper()
	rows, err := pool.Query(context.Background(), "SELECT "+upgradeV1Cols+" FROM "+jobs+" ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out [][]any
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, vals)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) != 3 {
		t.Fatalf("%d jobs stored; want 3", len(out))
	}
	return out
}

// upgradeSameRows fails t, naming every column that differs, unless the
// snapshots are equal.
func upgradeSameRows(t *testing.T, what string, before, after [][]any) {
	t.Helper()
	cols := strings.Split(upgradeV1Cols, ", ")
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

// upgradeCheckGet reads want.ID through the store and compares it with
// want, args by meaning.
func upgradeCheckGet(t *testing.T, s *Store, want *core.Job) {
	t.Helper()
	got, err := s.Get(context.Background(), want.ID)
	if err != nil {
		t.Fatalf("get job %d: %v", want.ID, err)
	}
	if g, w := upgradeCanon(t, got), upgradeCanon(t, want); g != w || got.ClaimSeq != want.ClaimSeq {
		t.Fatalf("job %d reads back as\n%s (claim_seq %d)\nwant\n%s (claim_seq %d)", want.ID, g, got.ClaimSeq, w, want.ClaimSeq)
	}
}

// upgradeCanon is j as JSON with its args re-encoded canonically.
func upgradeCanon(t *testing.T, j *core.Job) string {
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

func upgradeFinish(t *testing.T, s *Store, o core.Outcome) core.FinishResult {
	t.Helper()
	res, err := s.Finish(context.Background(), []core.Outcome{o})
	if err != nil {
		t.Fatalf("finish job %d: %v", o.JobID, err)
	}
	if len(res) != 1 || res[0].JobID != o.JobID {
		t.Fatalf("finish of job %d returned %+v", o.JobID, res)
	}
	return res[0]
}
