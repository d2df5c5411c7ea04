package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/adapters/httpapi"
	"github.com/backlogq/backlog/core"
)

// remoteTokens are the role tokens of the servers of these tests.
var remoteTokens = httpapi.Tokens{Producer: "ptok", Worker: "wtok", Admin: "atok"}

// serveDB serves the HTTP API over the SQLite database db, with the
// periodic jobs of the config file cfg ("" for none) and tokens, and
// returns its URL.
func serveDB(t *testing.T, db, cfg string, tokens httpapi.Tokens) string {
	t.Helper()
	st := openStore(t, db)
	var periodic []core.PeriodicJob
	if cfg != "" {
		fc, err := loadConfigFile(cfg)
		if err != nil {
			t.Fatal(err)
		}
		periodic = fc.periodicJobs()
	}
	c, err := core.NewClient(st, core.Config{
		MaintenanceInterval: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Periodic: periodic, AllowUnknownKinds: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	api, err := httpapi.New(c, httpapi.Config{Tokens: tokens, StatsCacheTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(api)
	t.Cleanup(func() {
		_ = api.Close()
		hs.Close()
	})
	return hs.URL
}

// cliServer runs the command line against the job server at url with the
// token (none when "").
func cliServer(t *testing.T, url, token string, args ...string) result {
	t.Helper()
	pre := []string{"--server", url}
	if token != "" {
		pre = append(pre, "--token", token)
	}
	return cliIn(t, "", "", append(pre, args...)...)
}

// fillDB puts jobs in several states, queues and kinds into db: completed
// with a JSON result and with a text result, discarded after a failed
// attempt, cancelled, scheduled and available ones, a pause, queue limits
// and one worker record whose last heartbeat is an hour old.
func fillDB(t *testing.T, db string) {
	t.Helper()
	mustCLI(t, db, "migrate")
	mustCLI(t, db, "enqueue", "json", `{"n":1}`, "--queue", "work", "--meta", "k=v", "--partition-key", "p1")
	mustCLI(t, db, "enqueue", "text", `{"n":2}`, "--queue", "work", "--unique-key", "u2")
	mustCLI(t, db, "enqueue", "fail", `{"n":3}`, "--queue", "work", "--max-attempts", "1")
	mustCLI(t, db, "enqueue", "later", `{}`, "--queue", "mail", "--run-at", "2099-01-02T03:04:05Z", "--deadline", "2099-02-01T00:00:00Z")
	mustCLI(t, db, "enqueue", "now", `[1,2,3]`, "--priority", "2", "--tag", "t1", "--tag", "t2")
	mustCLI(t, db, "enqueue", "gone", `{}`)
	mustCLI(t, db, "jobs", "cancel", "6")
	mustCLI(t, db, "queues", "pause", "mail")

	st := openStore(t, db)
	h := core.NewHandlers()
	h.HandleRaw("json", func(ctx context.Context, _ *core.Job) error { return core.RecordRawResult(ctx, []byte(`{"ok":true}`)) })
	h.HandleRaw("text", func(ctx context.Context, _ *core.Job) error { return core.RecordRawResult(ctx, []byte("hello Ann\n")) })
	h.HandleRaw("fail", func(context.Context, *core.Job) error { return fmt.Errorf("boom: line one\nline two") })
	c, err := core.NewClient(st, core.Config{
		Queues: map[string]core.QueueConfig{"work": {MaxWorkers: 2}}, Handlers: h, WorkerID: "w-test",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the work queue's jobs to finish", func() bool {
		n := counts(t, st)
		return n[core.StateCompleted] == 2 && n[core.StateDiscarded] == 1
	})
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	mustCLI(t, db, "queues", "limits", "work", "--max-running", "3", "--per-kind", "json=1")
	hb := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	if err := st.RegisterWorker(ctx, core.WorkerInfo{
		ID: "host-42-abc", Host: "host", PID: 42, Queues: []string{"default", "mail"}, Tags: []string{"gpu"},
		StartedAt: hb.Add(-time.Minute), HeartbeatAt: hb,
	}); err != nil {
		t.Fatal(err)
	}
}

// heartbeatAge matches the one field of workers -o json that moves
// between two runs.
var heartbeatAge = regexp.MustCompile(`"heartbeat_age_seconds": [0-9.e+]+`)

// Every read command prints the same whether it reads the database or
// asks the job server over the same database.
func TestServerReadsMatchDB(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	fillDB(t, db)
	cfg := writeFile(t, t.TempDir(), "c.json", `{"periodic": {"nightly": {"schedule": "0 3 * * *", "kind": "report", "queue": "reports"}}}`)
	url := serveDB(t, db, cfg, remoteTokens)
	for _, args := range [][]string{
		{"jobs", "list"},
		{"-o", "json", "jobs", "list"},
		{"jobs", "list", "--state", "completed,discarded", "--desc"},
		{"jobs", "list", "--queue", "work", "--kind", "json"},
		{"jobs", "list", "--limit", "2"},
		{"jobs", "list", "--after", "2", "--limit", "2"},
		{"jobs", "list", "--order", "asc", "--after", "2", "--limit", "2"},
		{"jobs", "list", "--state", "failed"},
		{"jobs", "list", "--sort", "run_at"},
		{"jobs", "list", "--sort", "run_at", "--desc", "--limit", "2"},
		{"-o", "json", "jobs", "list", "--sort", "run_at", "--state", "scheduled,available"},
		{"jobs", "get", "1"},
		{"jobs", "get", "2"},
		{"jobs", "get", "3"},
		{"jobs", "get", "4"},
		{"-o", "json", "jobs", "get", "1"},
		{"-o", "json", "jobs", "get", "3"},
		{"jobs", "get", "999"},
		{"queues"},
		{"-o", "json", "queues"},
		{"queues", "limits", "work"},
		{"-o", "json", "queues", "limits", "work"},
		{"queues", "limits", "mail"},
		{"workers"},
		{"workers", "--stale-after", "1s", "--dead-after", "2h"},
		{"-o", "json", "workers"},
		{"cron"},
		{"-o", "json", "cron"},
	} {
		dbArgs := args
		if args[len(args)-1] == "cron" {
			dbArgs = append(append([]string{}, args...), "--config", cfg)
		}
		want := cli(t, db, dbArgs...)
		got := cliServer(t, url, "atok", args...)
		if args[len(args)-1] == "workers" || args[0] == "-o" && args[2] == "workers" {
			want.stdout = heartbeatAge.ReplaceAllString(want.stdout, "AGE")
			got.stdout = heartbeatAge.ReplaceAllString(got.stdout, "AGE")
		}
		if got.String() != want.String() {
			t.Errorf("backlog %s:\n--db:\n%s\n--server:\n%s", strings.Join(args, " "), want, got)
		}
	}
}

// times matches the RFC 3339 times the two databases of a test differ
// in; correlation ids are what the job server adds to the metadata of the
// jobs submitted through it.
var (
	times          = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)
	correlationIDs = regexp.MustCompile(`(?m)(\s*"metadata": \{\s*"correlation_id": "[0-9a-f]+"\s*\},?| ?correlation_id=[0-9a-f]+|,\s*"correlation_id": "[0-9a-f]+"|"correlation_id": "[0-9a-f]+",\s*)`)
	metadataEmpty  = regexp.MustCompile(`(?m)^metadata: *\n`)
)

// normalize blanks the times of a run's output and the correlation ids
// and padding they bring.
func normalize(r result) string {
	s := times.ReplaceAllString(r.String(), "TIME")
	s = correlationIDs.ReplaceAllString(s, "")
	s = metadataEmpty.ReplaceAllString(s, "")
	return regexp.MustCompile(`(?m)^([a-z_]+:) +`).ReplaceAllString(s, "$1 ")
}

// Commands that change things print the same through the server as on the
// database: each runs on one of two databases filled alike.
func TestServerWritesMatchDB(t *testing.T) {
	t.Parallel()
	dbA, dbB := tempDB(t), tempDB(t)
	fillDB(t, dbA)
	fillDB(t, dbB)
	cfg := writeFile(t, t.TempDir(), "c.json", `{"periodic": {"nightly": {"schedule": "0 3 * * *", "kind": "report", "queue": "reports"}}}`)
	url := serveDB(t, dbB, cfg, remoteTokens)
	lines := writeFile(t, t.TempDir(), "jobs.jsonl", `{"kind":"a","queue":"bulk","unique_key":"k1"}
{"kind":"b","args":{"x":1},"partition_key":"p","unique_key":"k2","unique_scope":"kind","unique_for":"1h"}

{"kind":"a","queue":"bulk","unique_key":"k1"}
`)
	for _, args := range [][]string{
		{"enqueue", "email", `{"to":"ann@example.com"}`, "--queue", "mail", "--priority", "2", "--tag", "welcome", "--meta", "a=b", "--partition-key", "acme"},
		{"-o", "json", "enqueue", "report", "--unique-key", "r1", "--unique-scope", "queue", "--unique-for", "24h", "--in", "10m", "--max-attempts", "3"},
		{"enqueue", "report", "--unique-key", "r1", "--unique-scope", "queue", "--in", "10m"},
		{"-o", "json", "enqueue", "report", "--unique-key", "r1", "--unique-scope", "queue", "--in", "10m"},
		{"enqueue", "--from", lines},
		{"-o", "json", "enqueue", "line", "--from", lines, "--batch-size", "2"},
		{"enqueue", "bad", "--deadline", "1h", "--run-at", "2099-01-01T00:00:00Z"},
		{"queues", "pause", "work"},
		{"-o", "json", "queues", "resume", "work"},
		{"queues", "resume", "mail"},
		{"queues", "limits", "work", "--per-partition", "2", "--per-kind", "json=0"},
		{"-o", "json", "queues", "limits", "work", "--clear", "--max-running", "9"},
		{"cron", "pause", "nightly"},
		{"cron", "resume", "nightly"},
		{"cron", "run", "nightly"},
		{"-o", "json", "cron", "run", "nightly"},
		{"cron", "pause", "nope"},
		{"jobs", "list"},
		{"queues"},
	} {
		dbArgs := args
		if slicesIndex(args, "cron") >= 0 {
			dbArgs = append(append([]string{}, args...), "--config", cfg)
		}
		want := cli(t, dbA, dbArgs...)
		got := cliServer(t, url, "atok", args...)
		if w, g := normalize(want), normalize(got); w != g {
			t.Errorf("backlog %s:\n--db:\n%s\n--server:\n%s", strings.Join(args, " "), want, got)
		}
	}
}

func slicesIndex(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// jobs cancel, retry and delete by id print the same through the server.
func TestServerJobActionsMatchDB(t *testing.T) {
	t.Parallel()
	dbA, dbB := tempDB(t), tempDB(t)
	fillDB(t, dbA)
	fillDB(t, dbB)
	url := serveDB(t, dbB, "", remoteTokens)
	for _, args := range [][]string{
		{"jobs", "cancel", "5", "999"},
		{"jobs", "retry", "3", "5"},
		{"-o", "json", "jobs", "retry", "1"},
		{"jobs", "delete", "4", "#2"},
		{"-o", "json", "jobs", "cancel", "1", "2"},
		{"jobs", "cancel", "x"},
		{"jobs", "retry", "--state", "discarded", "--dry-run"},
		{"-o", "json", "jobs", "delete", "--queue", "default", "--dry-run"},
		{"jobs", "cancel", "--queue", "nope", "--yes"},
		{"jobs", "delete", "--queue", "default"}, // refused without --yes
	} {
		want := cli(t, dbA, args...)
		got := cliServer(t, url, "atok", args...)
		if w, g := normalize(want), normalize(got); w != g {
			t.Errorf("backlog %s:\n--db:\n%s\n--server:\n%s", strings.Join(args, " "), want, got)
		}
	}
}

// A filtered action through the server prints the server's counts.
func TestServerBulkAction(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	fillDB(t, db)
	url := serveDB(t, db, "", remoteTokens)
	r := cliServer(t, url, "atok", "jobs", "retry", "--queue", "work", "--state", "completed,discarded")
	if r.code != 0 || r.stdout != "3 jobs matched: 3 retried, 0 skipped (changed meanwhile, or in a state retry does not apply to)\nretried: 1 2 3\n" {
		t.Fatalf("retry by filter: %s", r)
	}
	r = cliServer(t, url, "atok", "-o", "json", "jobs", "cancel", "--queue", "work", "--yes")
	if r.code != 0 || !strings.Contains(r.stdout, `"matched": 3`) || !strings.Contains(r.stdout, `"applied": 3`) {
		t.Fatalf("cancel by filter: %s", r)
	}
	if r := cliServer(t, url, "ptok", "jobs", "delete", "--queue", "work", "--yes"); r.code != exitRuntime || !strings.Contains(r.stderr, "needs a token of the admin role") {
		t.Fatalf("producer token: %s", r)
	}
}

// A missing token, an unknown one and one of too small a role are told
// apart, and the message names the role the command needs.
func TestServerTokenErrors(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	mustCLI(t, db, "migrate")
	mustCLI(t, db, "enqueue", "k")
	mustCLI(t, db, "enqueue", "k", "--queue", "mail") // a queue the store holds
	url := serveDB(t, db, "", remoteTokens)
	for _, c := range []struct {
		token string
		args  []string
		want  string // "" = success
	}{
		{"", []string{"jobs", "list"}, "wants a token (401 unauthorized): pass --token or set BACKLOG_TOKEN to a token of the producer role"},
		{"nope", []string{"queues"}, "does not accept this token (401 unauthorized): this needs a token of the producer role"},
		{"ptok", []string{"jobs", "list"}, ""},
		{"ptok", []string{"enqueue", "k"}, ""},
		{"ptok", []string{"queues", "limits", "default"}, ""},
		{"ptok", []string{"queues", "pause", "default"}, "this needs a token of the admin role; the job server at " + url + " refused this token's role (403 forbidden)"},
		{"ptok", []string{"workers"}, "needs a token of the admin role"},
		{"ptok", []string{"queues", "limits", "default", "--max-running", "2"}, "needs a token of the admin role"},
		{"ptok", []string{"cron", "run", "x"}, "needs a token of the admin role"},
		{"wtok", []string{"enqueue", "k"}, "needs a token of the producer role"},
		{"atok", []string{"workers"}, ""},
	} {
		r := cliServer(t, url, c.token, c.args...)
		switch {
		case c.want == "" && r.code != 0:
			t.Errorf("token %q, %v: %s", c.token, c.args, r)
		case c.want != "" && (r.code != exitRuntime || !strings.Contains(r.stderr, c.want)):
			t.Errorf("token %q, %v: want exit 1 and %q\n%s", c.token, c.args, c.want, r)
		}
	}
	// The messages docs/cli.md shows, whole.
	if r := cliServer(t, url, "", "jobs", "list"); r.stderr != "backlog: list jobs: the job server at "+url+" wants a token (401 unauthorized): pass --token or set BACKLOG_TOKEN to a token of the producer role\n" {
		t.Errorf("no token: %q", r.stderr)
	}
	if r := cliServer(t, url, "ptok", "queues", "pause", "mail"); r.stderr != "backlog: pause queue mail: this needs a token of the admin role; the job server at "+url+" refused this token's role (403 forbidden)\n" {
		t.Errorf("producer token: %q", r.stderr)
	}
	// The token from the environment.
	e, out, errb := testEnv("")
	e.getenv = func(k string) string {
		return map[string]string{"BACKLOG_SERVER": url, "BACKLOG_TOKEN": "atok"}[k]
	}
	if code := run(context.Background(), e, []string{"queues", "pause", "default"}); code != 0 || out.String() != "queue default paused\n" {
		t.Fatalf("BACKLOG_SERVER, BACKLOG_TOKEN: exit %d\n%s%s", code, out, errb)
	}
}

// --server and --db exclude each other, and commands that need the
// database refuse a server.
func TestServerUsageErrors(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	url := "http://127.0.0.1:1"
	env := func(kv map[string]string, args ...string) result {
		e, out, errb := testEnv("")
		e.getenv = func(k string) string { return kv[k] }
		code := run(context.Background(), e, args)
		return result{code: code, stdout: out.String(), stderr: errb.String()}
	}
	for _, c := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{nil, []string{"--db", db, "--server", url, "jobs", "list"}, "give --db or --server, not both"},
		{nil, []string{"--server", url, "--db", db, "queues"}, "give --db or --server, not both"},
		{map[string]string{"BACKLOG_DB": db, "BACKLOG_SERVER": url}, []string{"jobs", "list"}, "BACKLOG_DB and BACKLOG_SERVER are both set"},
		{nil, []string{"--server", url, "migrate"}, "backlog migrate needs the database and cannot work through a job server (--server is set)"},
		{nil, []string{"--server", url, "serve"}, "backlog serve needs the database"},
		{nil, []string{"--server", url, "keys", "rotate"}, "backlog keys rotate needs the database"},
		{nil, []string{"--server", url, "bench", "burndown"}, "needs the database"},
		{map[string]string{"BACKLOG_SERVER": url}, []string{"migrate"}, "backlog migrate needs the database and cannot work through a job server (BACKLOG_SERVER is set)"},
		{map[string]string{"BACKLOG_SERVER": url}, []string{"work", "--handler", "k=true"}, "BACKLOG_SERVER is set, but backlog work runs on the database"},
		{nil, []string{"--server", "ftp://x", "jobs", "list"}, "--server: backlog client: base URL"},
		{nil, []string{"--server", "", "jobs", "list"}, "--server is empty"},
		{nil, []string{"--server", "127.0.0.1:8080", "jobs", "list"}, `--server "127.0.0.1:8080" has no scheme: did you mean http://127.0.0.1:8080?`},
		{nil, []string{"--server", "localhost:8080", "queues"}, "did you mean http://localhost:8080?"},
		{map[string]string{"BACKLOG_SERVER": "10.0.0.5:8080"}, []string{"jobs", "list"}, `BACKLOG_SERVER "10.0.0.5:8080" has no scheme: did you mean http://10.0.0.5:8080?`},
		{nil, []string{"work", "--server", "127.0.0.1:8080", "--handler", "k=true"}, "did you mean http://127.0.0.1:8080?"},
		{nil, []string{"--server", url, "enqueue", "k", "--keys-file", "x"}, "--keys-file does not apply with --server"},
		{nil, []string{"--server", url, "enqueue", "k", "--migrate=false"}, "--migrate does not apply with --server"},
		{nil, []string{"--server", url, "enqueue", "--from", "-", "--batch-size", "1001"}, "--batch-size is at most 1000 with --server"},
		{nil, []string{"--server", url, "cron", "--config", "c.json"}, "--config does not apply with --server"},
	} {
		r := env(c.env, c.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v %v: want exit 2 and %q\n%s", c.env, c.args, c.want, r)
		}
	}
	// --db wins over BACKLOG_SERVER; --server over BACKLOG_DB.
	mustCLI(t, db, "migrate")
	if r := env(map[string]string{"BACKLOG_SERVER": url}, "--db", db, "queues"); r.code != 0 {
		t.Errorf("--db with BACKLOG_SERVER: %s", r)
	}
	srv := serveDB(t, db, "", httpapi.Tokens{})
	if r := env(map[string]string{"BACKLOG_DB": "sqlite:/nonexistent/x.db"}, "--server", srv, "queues"); r.code != 0 {
		t.Errorf("--server with BACKLOG_DB: %s", r)
	}
	// An unreachable server is a runtime error naming it.
	if r := env(nil, "--server", url, "jobs", "get", "1"); r.code != exitRuntime || !strings.Contains(r.stderr, "127.0.0.1:1") {
		t.Errorf("unreachable server: %s", r)
	}
}

// jobs list pages through the server's pages when --limit is above one
// page.
func TestServerListPages(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	mustCLI(t, db, "migrate")
	var b strings.Builder
	for i := range 1205 {
		b.WriteString(`{"i":` + strconv.Itoa(i) + "}\n")
	}
	cliIn(t, db, b.String(), "enqueue", "k", "--from", "-")
	url := serveDB(t, db, "", httpapi.Tokens{})
	want := mustCLI(t, db, "jobs", "list", "--order", "asc", "--limit", "1203", "--after", "1")
	got := cliServer(t, url, "", "jobs", "list", "--order", "asc", "--limit", "1203", "--after", "1")
	if got.String() != want.String() {
		t.Fatalf("--db:\n%.500s\n--server:\n%.500s", want, got)
	}
	if n := strings.Count(got.stdout, "\n"); n != 1204 {
		t.Fatalf("%d lines", n)
	}
}

// Pausing or resuming a queue the store does not hold is refused through
// the job server as on the store, unless --create is given.
func TestServerQueuePauseUnknown(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	mustCLI(t, db, "migrate")
	mustCLI(t, db, "enqueue", "k", "--queue", "mail")
	url := serveDB(t, db, "", remoteTokens)
	for _, verb := range []string{"pause", "resume"} {
		if r := cliServer(t, url, "atok", "queues", verb, "mial"); r.code != exitRuntime || !strings.Contains(r.stderr, "queue mial: no such queue") || !strings.Contains(r.stderr, "did you mean mail?") {
			t.Errorf("%s of an unknown queue: %s", verb, r)
		}
	}
	if r := cliServer(t, url, "atok", "queues"); strings.Contains(r.stdout, "mial") {
		t.Fatalf("a refused pause created the queue: %s", r)
	}
	if r := cliServer(t, url, "atok", "queues", "pause", "reports", "--create"); r.code != 0 || r.stdout != "queue reports paused\n" {
		t.Fatalf("pause --create: %s", r)
	}
	if r := cliServer(t, url, "atok", "queues", "resume", "reports"); r.code != 0 {
		t.Fatalf("resume of a paused queue: %s", r)
	}
}
