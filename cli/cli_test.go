package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/adapters/httpapi/apitypes"
	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
)

func TestMigrate(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	if r := mustCLI(t, db, "migrate"); !strings.Contains(r.stdout, "migrated the schema from version 0") {
		t.Fatalf("migrate output: %s", r)
	}
	if r := mustCLI(t, db, "migrate"); !strings.Contains(r.stdout, "schema is up to date") {
		t.Fatalf("migrate output: %s", r)
	}
	r := mustCLI(t, db, "migrate", "-o", "json")
	m := decodeJSON[map[string]any](t, r.stdout)
	if m["status"] != "migrated" || m["applied"] != 0.0 {
		t.Fatalf("json: %v", m)
	}
}

func TestUsageAndStoreErrors(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	cases := []struct {
		name string
		db   string
		args []string
		code int
		want string
	}{
		{"unknown command", db, []string{"frobnicate"}, exitUsage, `unknown command "frobnicate"`},
		{"unknown subcommand", db, []string{"jobs", "frob"}, exitUsage, `unknown command "frob"`},
		{"unknown flag", db, []string{"jobs", "list", "--nope"}, exitUsage, "unknown flag: --nope"},
		{"bad output", db, []string{"queues", "-o", "yaml"}, exitUsage, "--output must be table or json"},
		{"bad log level", db, []string{"queues", "--log-level", "loud"}, exitUsage, "--log-level"},
		{"missing arg", db, []string{"jobs", "get"}, exitUsage, "accepts 1 arg"},
		{"bad id", db, []string{"jobs", "get", "abc"}, exitUsage, `"abc" is not a job id`},
		{"bad state", db, []string{"jobs", "list", "--state", "done"}, exitUsage, `unknown state "done"`},
		{"no scheme", "backlog.db", []string{"queues"}, exitRuntime, "has no scheme"},
		{"unknown scheme", "nosuch://x/y", []string{"queues"}, exitRuntime, "unknown URL scheme"},
		{"password hidden", "nosuch://bob:hunter2@host/db", []string{"queues"}, exitRuntime, "bob:xxxxx@host"},
		{"empty db", "", []string{"--db", "", "queues"}, exitUsage, "--db is empty"},
		{"unwritable dir", "sqlite:" + filepath.Join(t.TempDir(), "missing", "dir", "x.db"), []string{"migrate"}, exitRuntime, "open store"},
		{"bad queue name", db, []string{"queues", "pause", "no spaces"}, exitUsage, "queue name"},
		{"work without handlers", db, []string{"work"}, exitUsage, "no handlers"},
		{"work bad queue flag", db, []string{"work", "--handler", "a=true", "--queue", "q=zero"}, exitUsage, "MAXWORKERS"},
		{"work bad handler flag", db, []string{"work", "--handler", "nocommand"}, exitUsage, "KIND=COMMAND"},
		{"work missing config", db, []string{"work", "--config", "/nonexistent/backlog.json"}, exitUsage, "read config"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := cli(t, c.db, c.args...)
			if r.code != c.code || !strings.Contains(r.stderr, c.want) || !strings.HasPrefix(r.stderr, "backlog: ") {
				t.Fatalf("want exit %d and stderr containing %q; got %s", c.code, c.want, r)
			}
			if strings.Contains(r.stderr, "hunter2") {
				t.Fatalf("password leaked: %s", r)
			}
		})
	}
}

func TestEnqueueSingle(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	before := time.Now()
	r := mustCLI(t, db, "enqueue", "email", `{"to":"ann@example.com"}`, "-o", "json",
		"--queue", "mail", "--priority", "2", "--in", "1h", "--max-attempts", "3",
		"--tag", "a", "--tag", "b", "--meta", "tenant=42", "--meta", "k=v=w", "--deadline", "2h")
	v := decodeJSON[apitypes.Job](t, r.stdout)
	var args bytes.Buffer
	_ = json.Compact(&args, v.Args)
	if v.ID == 0 || v.Kind != "email" || v.Queue != "mail" || v.Priority != 2 || v.MaxAttempts != 3 ||
		v.State != core.StateScheduled || args.String() != `{"to":"ann@example.com"}` {
		t.Fatalf("job: %+v", v)
	}
	if got := v.RunAt.Sub(before); got < 59*time.Minute || got > 61*time.Minute {
		t.Fatalf("run_at %s is not about an hour from now", v.RunAt)
	}
	if d := v.Deadline.Sub(before); d < 119*time.Minute || d > 121*time.Minute {
		t.Fatalf("deadline %s", v.Deadline)
	}
	if strings.Join(v.Tags, ",") != "a,b" || v.Metadata["tenant"] != "42" || v.Metadata["k"] != "v=w" {
		t.Fatalf("tags/metadata: %v %v", v.Tags, v.Metadata)
	}

	// Args from stdin, run-at given as a time, table output.
	r = cliIn(t, db, `{"n": 1}`, "enqueue", "report", "-", "--run-at", "2030-01-02T03:04:05Z")
	if r.code != 0 || !strings.Contains(r.stdout, "enqueued job 2") || !strings.Contains(r.stdout, "2030-01-02T03:04:05Z") {
		t.Fatalf("%s", r)
	}

	// Unique keys: the second enqueue is a duplicate of the first.
	r1 := decodeJSON[enqueuedJob](t, mustCLI(t, db, "enqueue", "sync", "--unique-key", "u1", "-o", "json").stdout)
	r2 := decodeJSON[enqueuedJob](t, mustCLI(t, db, "enqueue", "sync", "--unique-key", "u1", "-o", "json").stdout)
	if r1.Duplicate || !r2.Duplicate || r1.ID != r2.ID {
		t.Fatalf("unique: first %+v second %+v", r1, r2)
	}
	r = mustCLI(t, db, "enqueue", "sync", "--unique-key", "u1")
	if !strings.Contains(r.stdout, fmt.Sprintf("duplicate of job %d", r1.ID)) {
		t.Fatalf("%s", r)
	}
	if n := len(allJobs(t, openStore(t, db))); n != 3 {
		t.Fatalf("%d jobs, want 3", n)
	}
}

func TestEnqueueInvalid(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"enqueue", "k", `{"a":`}, "not valid JSON"},
		{[]string{"enqueue", "k", `{"a":1} x`}, "not valid JSON"},
		{[]string{"enqueue", "k", ""}, "args are empty"},
		{[]string{"enqueue", ""}, "kind is empty"},
		{[]string{"enqueue"}, "needs a KIND"},
		{[]string{"enqueue", "k", "--priority", "0"}, "--priority 0 is outside 1..10"},
		{[]string{"enqueue", "k", "--priority", "11"}, "outside 1..10"},
		{[]string{"enqueue", "k", "--priority", "high"}, "invalid argument"},
		{[]string{"enqueue", "k", "--max-attempts", "0"}, "below 1"},
		{[]string{"enqueue", "k", "--run-at", "tomorrow"}, "RFC 3339"},
		{[]string{"enqueue", "k", "--run-at", "2030-01-01T00:00:00Z", "--in", "1h"}, "not both"},
		{[]string{"enqueue", "k", "--meta", "novalue"}, "key=value"},
		{[]string{"enqueue", "k", "--queue", "bad queue"}, "queue name"},
		{[]string{"enqueue", "k", "--deadline", "soon"}, "--deadline"},
		{[]string{"enqueue", "k", "--in", "2h", "--deadline", "1h"}, "before run_at"},
		{[]string{"enqueue", "k", "{}", "extra"}, "accepts between 0 and 2 arg"},
	}
	for _, c := range cases {
		r := cli(t, db, c.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%q: want exit 2 and %q; got %s", c.args, c.want, r)
		}
	}
	if n := len(allJobs(t, openStore(t, db))); n != 0 {
		t.Fatalf("%d jobs inserted by invalid enqueues", n)
	}
}

func TestEnqueueFromFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "jobs.db")
	st := openStore(t, db)

	// Args lines with KIND on the command line; a bad line in the third batch.
	var b strings.Builder
	for i := 1; i <= 2500; i++ {
		if i == 2345 {
			b.WriteString("{\"n\": 2345,}\n")
			continue
		}
		fmt.Fprintf(&b, "{\"n\": %d}\n", i)
	}
	path := writeFile(t, dir, "args.jsonl", b.String())
	r := cli(t, db, "enqueue", "resize", "--from", path, "--queue", "img", "--batch-size", "1000")
	if r.code != exitRuntime {
		t.Fatalf("want exit 1: %s", r)
	}
	for _, want := range []string{path + ":2345:", "not valid JSON", "2000 jobs were inserted before this batch", "nothing from line 2001 on was inserted"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q: %s", want, r)
		}
	}
	if n := counts(t, st)[core.StateAvailable]; n != 2000 {
		t.Fatalf("%d jobs, want the first two batches (2000)", n)
	}

	// A bad line in the first batch inserts nothing.
	path = writeFile(t, dir, "bad.jsonl", "{\"n\":1}\n[1,2\n")
	r = cli(t, db, "enqueue", "resize", "--from", path)
	if r.code != exitRuntime || !strings.Contains(r.stderr, path+":2:") || !strings.Contains(r.stderr, "nothing was inserted") {
		t.Fatalf("%s", r)
	}

	// Full objects from stdin, flags as defaults, blank lines skipped, CRLF.
	lines := strings.Join([]string{
		`{"kind":"a","args":{"x":1},"queue":"q1","priority":1,"tags":["t"],"metadata":{"m":"1"},"max_attempts":4}`,
		``,
		`{"kind":"b","run_at":"2031-05-06T07:08:09Z","unique_key":"k1"}`,
		`{"kind":"b","unique_key":"k1"}` + "\r",
		`{"kind":"c"}`,
	}, "\n")
	r = cliIn(t, db, lines, "enqueue", "--from", "-", "--priority", "7", "--progress", "-o", "json")
	if r.code != 0 {
		t.Fatalf("%s", r)
	}
	stats := decodeJSON[bulkStats](t, r.stdout)
	if stats.Inserted != 3 || stats.Duplicates != 1 {
		t.Fatalf("stats %+v", stats)
	}
	if !strings.Contains(r.stderr, "enqueue") {
		t.Errorf("forced progress bar not drawn: %q", r.stderr)
	}
	js, err := st.List(context.Background(), core.ListParams{Desc: true, Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	c, bj, a := js[0], js[1], js[2]
	if a.Kind != "a" || a.Queue != "q1" || a.Priority != 1 || a.MaxAttempts != 4 || a.Tags[0] != "t" || a.Metadata["m"] != "1" || string(a.Args) != `{"x":1}` {
		t.Errorf("a: %+v", a)
	}
	if bj.Kind != "b" || bj.Priority != 7 || bj.State != core.StateScheduled || bj.UniqueKey != "k1" {
		t.Errorf("b: %+v", bj)
	}
	if c.Kind != "c" || c.Priority != 7 || c.Queue != "default" || string(c.Args) != "{}" {
		t.Errorf("c: %+v", c)
	}

	// Object-line errors name the line and the reason.
	for _, c := range []struct{ line, want string }{
		{`{"args":{}}`, `"kind" is missing`},
		{`{"kind":"x","priority":0}`, "priority 0 is outside"},
		{`{"kind":"x","priority":12}`, "priority 12 is outside"},
		{`{"kind":"x","prio":1}`, `unknown field "prio"`},
		{`{"kind":"x","queue":"a b"}`, "queue name"},
		{`{"kind":"x","run_at":"tomorrow"}`, "not a valid job object"},
		{`[1]`, "not a JSON object"},
		{`{"kind":"x"} {}`, "extra data"},
	} {
		r := cliIn(t, db, "{\"kind\":\"ok\"}\n"+c.line+"\n", "enqueue", "--from", "-")
		if r.code != exitRuntime || !strings.Contains(r.stderr, "stdin:2: ") || !strings.Contains(r.stderr, c.want) {
			t.Errorf("line %s: want stdin:2 and %q; got %s", c.line, c.want, r)
		}
	}
	r = cli(t, db, "enqueue", "--from", filepath.Join(dir, "missing.jsonl"))
	if r.code != exitRuntime || !strings.Contains(r.stderr, "no such file") {
		t.Fatalf("%s", r)
	}
	r = cli(t, db, "enqueue", "k", "--from", "-", "--unique-key", "x")
	if r.code != exitUsage {
		t.Fatalf("%s", r)
	}
	if n := len(allJobs(t, st)); n != 2003 {
		t.Fatalf("%d jobs after the failed runs, want 2003", n)
	}
}

func TestJobsCommands(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	st := openStore(t, db)
	ctx := context.Background()
	for i := range 5 {
		q := "default"
		if i%2 == 1 {
			q = "other"
		}
		mustCLI(t, db, "enqueue", fmt.Sprintf("kind%d", i%2), fmt.Sprintf(`{"i":%d}`, i), "--queue", q)
	}
	// Job 1: claim it and fail it once with a trace; job 2: claim and keep running.
	now := contract.UTC(time.Now())
	claimed, err := st.Claim(ctx, contract.ClaimParams{Queue: "default", WorkerID: "w1", Limit: 2, Now: now, LeaseUntil: now.Add(time.Minute)})
	if err != nil || len(claimed) != 2 {
		t.Fatalf("claim: %v %d", err, len(claimed))
	}
	_, err = st.Finish(ctx, []contract.Outcome{{
		JobID: claimed[0].ID, WorkerID: "w1", ClaimSeq: claimed[0].ClaimSeq, Attempt: 1, Kind: contract.OutcomeRetry, At: now, RunAt: now.Add(time.Hour),
		Error: &core.AttemptError{Attempt: 1, At: now, Error: "exit status 1: boom\nsecond line", Trace: "line1\nboom"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	failedID, runningID := claimed[0].ID, claimed[1].ID

	r := mustCLI(t, db, "jobs", "list")
	if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); len(lines) != 6 {
		t.Fatalf("want header + 5 rows:\n%s", r.stdout)
	}
	if !strings.Contains(r.stdout, "exit status 1: boom ⏎ second line") || !strings.Contains(r.stdout, "1/20") {
		t.Fatalf("list table:\n%s", r.stdout)
	}
	list := func(args ...string) []*apitypes.Job {
		return decodeJSON[[]*apitypes.Job](t, mustCLI(t, db, append([]string{"jobs", "list", "-o", "json"}, args...)...).stdout)
	}
	if js := list("--queue", "other"); len(js) != 2 || js[0].Queue != "other" {
		t.Fatalf("--queue: %+v", js)
	}
	if js := list("--state", "retryable,running"); len(js) != 2 {
		t.Fatalf("--state comma: %+v", js)
	}
	if js := list("--state", "retryable", "--state", "running"); len(js) != 2 {
		t.Fatalf("--state repeated: %+v", js)
	}
	if js := list("--kind", "kind1"); len(js) != 2 || js[0].Kind != "kind1" {
		t.Fatalf("--kind: %+v", js)
	}
	if js := list("--desc", "--limit", "2"); len(js) != 2 || js[0].ID != 5 || js[1].ID != 4 {
		t.Fatalf("--desc --limit: %+v", js)
	}
	if js := list("--order", "asc", "--after", "3"); len(js) != 2 || js[0].ID != 4 {
		t.Fatalf("--order asc --after: %+v", js)
	}
	if js := list("--state", "failed"); len(js) != 1 || js[0].ID != failedID {
		t.Fatalf("--state failed (retryable and discarded): %+v", js)
	}
	if js := list("--state", "cancelled"); len(js) != 0 {
		t.Fatalf("want an empty array: %+v", js)
	}
	if r := mustCLI(t, db, "jobs", "list", "--limit", "2"); !strings.Contains(r.stderr, "--after 4") {
		t.Fatalf("paging hint: %s", r)
	}

	// get: everything, errors history with trace.
	r = mustCLI(t, db, "jobs", "get", fmt.Sprint(failedID))
	for _, want := range []string{"state:        retryable", "attempt 1 at", "exit status 1: boom", "    | boom", `{"i":0}`} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("get lacks %q:\n%s", want, r.stdout)
		}
	}
	g := decodeJSON[apitypes.Job](t, mustCLI(t, db, "jobs", "get", fmt.Sprint(failedID), "-o", "json").stdout)
	if len(g.Errors) != 1 || g.Errors[0].Trace != "line1\nboom" {
		t.Fatalf("get json: %+v", g)
	}
	if r := cli(t, db, "jobs", "get", "999"); r.code != exitRuntime || !strings.Contains(r.stderr, "job 999: not found") {
		t.Fatalf("%s", r)
	}

	// Jobs 1, 3, 5 are in queue default (1 failed once, 3 running), 2 and 4 in other.
	if failedID != 1 || runningID != 3 {
		t.Fatalf("claimed %d and %d, want 1 and 3", failedID, runningID)
	}
	// cancel: one ok, one missing → per-id messages and exit 1.
	r = cli(t, db, "jobs", "cancel", "5", "999")
	if r.code != exitRuntime || !strings.Contains(r.stdout, "job 5 cancelled") || !strings.Contains(r.stderr, "backlog: job 999: not found") {
		t.Fatalf("cancel: %s", r)
	}
	r = cli(t, db, "jobs", "cancel", "5")
	if r.code != exitRuntime || !strings.Contains(r.stderr, "backlog: job 5: cannot cancel a job in state cancelled\n") {
		t.Fatalf("cancel twice: %s", r)
	}
	// retry: the cancelled job comes back; a running job cannot be retried.
	r = cli(t, db, "jobs", "retry", "5", "3")
	if r.code != exitRuntime || !strings.Contains(r.stdout, "job 5 retried (now available)") || !strings.Contains(r.stderr, "backlog: job 3: cannot retry a job in state running\n") {
		t.Fatalf("retry: %s", r)
	}
	// delete: ok for a pending job, refused for a running one; JSON reports per id.
	r = cli(t, db, "jobs", "delete", "4", "3", "-o", "json")
	res := decodeJSON[[]actionResult](t, r.stdout)
	if r.code != exitRuntime || len(res) != 2 || !res[0].OK || res[1].OK || res[1].State != "running" {
		t.Fatalf("delete: %s", r)
	}
	if _, err := st.Get(ctx, 4); err == nil {
		t.Fatal("job 4 still exists")
	}
	mustCLI(t, db, "jobs", "delete", "2")
}

func TestQueuesAndWorkers(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	st := openStore(t, db)
	for range 3 {
		mustCLI(t, db, "enqueue", "k", "--queue", "alpha")
	}
	mustCLI(t, db, "enqueue", "k", "--queue", "beta", "--in", "1h")
	mustCLI(t, db, "queues", "pause", "alpha")
	if r := cli(t, db, "queues", "pause", "gama"); r.code != exitRuntime || !strings.Contains(r.stderr, "queue gama: no such queue") || !strings.Contains(r.stderr, "--create") {
		t.Fatalf("pause of a queue the store does not hold: %s", r) // a likely typo
	}
	mustCLI(t, db, "queues", "pause", "gamma", "--create") // no jobs: the pause is still recorded

	r := mustCLI(t, db, "queues")
	want := []string{
		"QUEUE  PAUSED  SCHEDULED  AVAILABLE  RUNNING  RETRYABLE  COMPLETED  CANCELLED  DISCARDED",
		"alpha  yes     0          3          0        0          0          0          0",
		"beta   no      1          0          0        0          0          0          0",
		"gamma  yes     0          0          0        0          0          0          0",
	}
	if got := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("queues table:\n%s\nwant:\n%s", r.stdout, strings.Join(want, "\n"))
	}
	mustCLI(t, db, "queues", "resume", "alpha")
	qs := decodeJSON[[]core.QueueStats](t, mustCLI(t, db, "queues", "-o", "json").stdout)
	if len(qs) != 3 || qs[0].Paused || qs[0].Counts[core.StateAvailable] != 3 || qs[0].Counts[core.StateDiscarded] != 0 || !qs[2].Paused {
		t.Fatalf("queues json: %+v", qs)
	}
	if _, ok := qs[0].Counts[core.StateDiscarded]; !ok {
		t.Fatalf("json counts should list every state: %+v", qs[0].Counts)
	}

	if r := mustCLI(t, db, "workers", "-o", "json"); strings.TrimSpace(r.stdout) != "[]" {
		t.Fatalf("no workers yet: %s", r)
	}
	now := contract.UTC(time.Now())
	err := st.RegisterWorker(context.Background(), core.WorkerInfo{
		ID: "host-1-abc", Host: "host", PID: 1, Queues: []string{"alpha", "beta"}, Tags: []string{"gpu", "eu"},
		StartedAt: now.Add(-time.Hour), HeartbeatAt: now.Add(-3 * time.Second),
	})
	if err != nil {
		t.Fatal(err)
	}
	err = st.RegisterWorker(context.Background(), core.WorkerInfo{
		ID: "host-2-def", Host: "host", PID: 2, Queues: []string{"alpha"},
		StartedAt: now.Add(-time.Hour), HeartbeatAt: now.Add(-45 * time.Second),
	})
	if err != nil {
		t.Fatal(err)
	}
	r = mustCLI(t, db, "workers")
	if !strings.Contains(r.stdout, "host-1-abc  active  host  1    alpha,beta  eu,gpu") && !strings.Contains(r.stdout, "host-1-abc  active  host  1    alpha,beta  gpu,eu") ||
		!strings.Contains(r.stdout, "host-2-def  stale   host  2    alpha       -") || !strings.Contains(r.stdout, "LAST HEARTBEAT") {
		t.Fatalf("workers:\n%s", r.stdout)
	}
	ws := decodeJSON[[]workerView](t, mustCLI(t, db, "workers", "-o", "json").stdout)
	if len(ws) != 2 || ws[0].HeartbeatAgeSeconds < 2 || ws[0].HeartbeatAgeSeconds > 60 || ws[0].Liveness != core.LivenessActive || ws[1].Liveness != core.LivenessStale {
		t.Fatalf("workers json: %+v", ws)
	}
	if r := mustCLI(t, db, "-o", "json", "workers", "--stale-after", "10s", "--dead-after", "40s"); !strings.Contains(r.stdout, `"liveness": "dead"`) {
		t.Fatalf("workers with --dead-after 40s: %s", r.stdout)
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	r := cli(t, "", "--help")
	if r.code != 0 || !strings.Contains(r.stdout, "enqueue") || !strings.Contains(r.stdout, "serve") {
		t.Fatalf("%s", r)
	}
	r = cli(t, "", "work", "--help")
	if r.code != 0 || !strings.Contains(r.stdout, "--shutdown-timeout") {
		t.Fatalf("%s", r)
	}
	// BACKLOG_DB is the default of --db.
	e, out, _ := testEnv("")
	dir := t.TempDir()
	e.getenv = func(k string) string {
		if k == "BACKLOG_DB" {
			return "sqlite:" + filepath.Join(dir, "env.db")
		}
		return ""
	}
	if code := run(context.Background(), e, []string{"migrate"}); code != 0 || !strings.Contains(out.String(), "env.db") {
		t.Fatalf("BACKLOG_DB: %d %s", code, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "env.db")); err != nil {
		t.Fatal(err)
	}
}
