package cli

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/backlogq/backlog/adapters/httpapi"
	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/memory"
)

// serveMemory serves the HTTP API over a fresh memory store (which has
// job dependencies) with tokens and returns its URL.
func serveMemory(t *testing.T, tokens httpapi.Tokens) string {
	t.Helper()
	c, err := core.NewClient(memory.New(), core.Config{
		MaintenanceInterval: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), AllowUnknownKinds: true,
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

const testWorkflowBody = `{"steps":[
  {"name":"extract","kind":"etl.extract","args":{"day":"2026-11-27"},"queue":"etl"},
  {"name":"transform","kind":"etl.transform","after":["extract"]},
  {"name":"load","kind":"etl.load","after":["transform"],"priority":2}
]}`

const testBatchBody = `{"jobs":[{"kind":"resize","args":{"img":1}},{"kind":"resize","args":{"img":2}}],
 "on_finish":{"kind":"album.done"},"on_success":null,"metadata":{"album":"a1"}}`

// flowRun runs the command line on one target: a job server (--server
// url with token) or a database (--db).
type flowRun func(stdin string, args ...string) result

// testFlows runs the workflows and batches commands against run, which
// holds no workflow yet.
func testFlows(t *testing.T, run flowRun) {
	file := writeFile(t, t.TempDir(), "wf.json", testWorkflowBody)
	r := run("", "workflows", "submit", file, "-o", "json")
	if r.code != 0 {
		t.Fatalf("workflows submit: %s", r)
	}
	wf := decodeJSON[httpapi.WorkflowResponse](t, r.stdout)
	if len(wf.Steps) != 3 || wf.Steps["extract"].ID != wf.ID || wf.Steps["load"].State != core.StateWaiting || wf.Steps["load"].Priority != 2 {
		t.Fatalf("workflows submit -o json = %+v", wf)
	}
	id := strconv.FormatInt(wf.ID, 10)

	r = run(testWorkflowBody, "workflows", "submit", "-")
	if r.code != 0 || !strings.Contains(r.stdout, "submitted: 3 steps") || !strings.Contains(r.stdout, "transform") {
		t.Fatalf("workflows submit -: %s", r)
	}
	r = run("", "workflows", "list")
	if r.code != 0 || !strings.Contains(r.stdout, "COUNTS") || !strings.Contains(r.stdout, "waiting=2 available=1") {
		t.Fatalf("workflows list: %s", r)
	}
	r = run("", "workflows", "list", "--limit", "1", "-o", "json")
	list := decodeJSON[[]core.WorkflowStatus](t, r.stdout)
	if r.code != 0 || len(list) != 1 || list[0].ID <= wf.ID {
		t.Fatalf("workflows list --limit 1 -o json: %s", r)
	}
	if r = run("", "workflows", "list", "--limit", "1"); r.code != 0 || !strings.Contains(r.stderr, "more may follow: --after "+strconv.FormatInt(list[0].ID, 10)) {
		t.Fatalf("workflows list --limit 1: %s", r)
	}
	r = run("", "workflows", "get", id)
	if r.code != 0 || !strings.Contains(r.stdout, "workflow "+id+": 3 jobs, done: false") || !strings.Contains(r.stdout, "etl.transform") {
		t.Fatalf("workflows get: %s", r)
	}
	r = run("", "workflows", "get", id, "-o", "json")
	d := decodeJSON[httpapi.WorkflowDetail](t, r.stdout)
	if len(d.Steps) != 3 || d.Steps[2].Name != "load" || d.Steps[2].WaitingFor != 1 {
		t.Fatalf("workflows get -o json: %s", r)
	}
	if r = run("", "batches", "get", id); r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Fatalf("batches get of a workflow: %s", r)
	}
	r = run("", "jobs", "list", "--workflow", id, "-o", "json")
	if jobs := decodeJSON[[]map[string]any](t, r.stdout); r.code != 0 || len(jobs) != 3 {
		t.Fatalf("jobs list --workflow: %s", r)
	}
	if r = run("", "workflows", "cancel", id); r.code != 2 || !strings.Contains(r.stderr, "--yes") {
		t.Fatalf("workflows cancel without --yes: %s", r)
	}
	r = run("", "workflows", "cancel", id, "--yes")
	if r.code != 0 || !strings.Contains(r.stdout, "3 jobs matched: ") {
		t.Fatalf("workflows cancel --yes: %s", r)
	}
	// The cancel of a step cancels the steps after it: some are skipped.
	if r = run("", "workflows", "get", id); !strings.Contains(r.stdout, "counts:      cancelled=3") || !strings.Contains(r.stdout, "done: true") {
		t.Fatalf("workflows get after cancel: %s", r)
	}
	if r = run(`{"steps":[{"name":"a","kind":"k","after":["a"]}]}`, "workflows", "submit", "-"); r.code == 0 || !strings.Contains(r.stderr, "cycle") {
		t.Fatalf("a cycle: %s", r)
	}
	if r = run(`{"steps":[{"name":"a","kind":"k","bogus":1}]}`, "workflows", "submit", "-"); r.code != 2 {
		t.Fatalf("an unknown field: %s", r)
	}

	r = run(testBatchBody, "batches", "submit", "-", "-o", "json")
	if r.code != 0 {
		t.Fatalf("batches submit: %s", r)
	}
	b := decodeJSON[httpapi.BatchCreateResponse](t, r.stdout)
	if len(b.Jobs) != 2 || b.OnFinish == nil || b.OnSuccess != nil || b.OnFinish.Metadata["album"] != "a1" {
		t.Fatalf("batches submit -o json = %+v", b)
	}
	bid := strconv.FormatInt(b.ID, 10)
	r = run("", "batches", "list")
	if r.code != 0 || !strings.Contains(r.stdout, "\n"+bid+" ") || strings.Count(r.stdout, "\n") != 2 {
		t.Fatalf("batches list: %s", r)
	}
	r = run("", "batches", "get", bid)
	if r.code != 0 || !strings.Contains(r.stdout, "on_finish") || !strings.Contains(r.stdout, "album.done") {
		t.Fatalf("batches get: %s", r)
	}
	r = run("", "batches", "cancel", bid, "-y", "-o", "json")
	if res := decodeJSON[map[string]any](t, r.stdout); r.code != 0 || res["applied"] != float64(3) {
		t.Fatalf("batches cancel -o json: %s", r)
	}
	if r = run("", "batches", "cancel", id, "--yes"); r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Fatalf("batches cancel of a workflow: %s", r)
	}
}

// The workflows and batches commands work through a job server (here
// over the memory store).
func TestWorkflowsServer(t *testing.T) {
	t.Parallel()
	url := serveMemory(t, remoteTokens)
	testFlows(t, func(stdin string, args ...string) result {
		return cliIn(t, "", stdin, append([]string{"--server", url, "--token", remoteTokens.Admin}, args...)...)
	})
	// A producer's token may submit and read, not cancel.
	r := cliServer(t, url, remoteTokens.Producer, "workflows", "cancel", "1", "--yes")
	if r.code != 1 || !strings.Contains(r.stderr, "admin role") {
		t.Fatalf("cancel with the producer token: %s", r)
	}
}

// On a database the commands work as through a job server where the
// store has job dependencies, and say clearly that it has none where it
// has none.
func TestWorkflowsDB(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	mustCLI(t, db, "migrate")
	if _, ok := openStore(t, db).(contract.Dependencies); !ok {
		r := cli(t, db, "workflows", "list")
		if r.code != 1 || !strings.Contains(r.stderr, "contract.Dependencies") {
			t.Fatalf("workflows list on a store without dependencies: %s", r)
		}
		r = cliIn(t, db, testWorkflowBody, "workflows", "submit", "-")
		if r.code != 1 || !strings.Contains(r.stderr, "contract.Dependencies") {
			t.Fatalf("workflows submit on a store without dependencies: %s", r)
		}
		t.Skip("the SQLite store does not implement contract.Dependencies yet")
	}
	testFlows(t, func(stdin string, args ...string) result {
		return cliIn(t, db, stdin, args...)
	})
}

// The store's ops of workflows and batches answer as the job server's do,
// on a store with job dependencies (the memory store).
func TestWorkflowStoreOps(t *testing.T) {
	t.Parallel()
	c, err := core.NewClient(memory.New(), core.Config{MaintenanceInterval: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), AllowUnknownKinds: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	o := storeOps{c}
	var wreq httpapi.WorkflowRequest
	if err := decodeSubmitFile([]byte(testWorkflowBody), &wreq); err != nil {
		t.Fatal(err)
	}
	wf, err := o.SubmitWorkflow(ctx, wreq)
	if err != nil || len(wf.Steps) != 3 || wf.Steps["load"].Priority != 2 || wf.Steps["extract"].Queue != "etl" {
		t.Fatalf("SubmitWorkflow = %+v, %v", wf, err)
	}
	var breq httpapi.BatchCreateRequest
	if err := decodeSubmitFile([]byte(testBatchBody), &breq); err != nil {
		t.Fatal(err)
	}
	b, err := o.SubmitBatch(ctx, breq)
	if err != nil || len(b.Jobs) != 2 || b.OnFinish == nil || b.OnFinish.Metadata["album"] != "a1" {
		t.Fatalf("SubmitBatch = %+v, %v", b, err)
	}
	list, more, err := o.ListWorkflows(ctx, false, 0, 20)
	if err != nil || more || len(list) != 1 || list[0].ID != wf.ID {
		t.Fatalf("ListWorkflows = %+v, %t, %v", list, more, err)
	}
	if list, _, err = o.ListWorkflows(ctx, true, 0, 20); err != nil || len(list) != 1 || list[0].ID != b.ID {
		t.Fatalf("ListWorkflows(batches) = %+v, %v", list, err)
	}
	d, err := o.GetWorkflow(ctx, wf.ID, false)
	if err != nil || len(d.Steps) != 3 || d.Steps[1].Name != "transform" {
		t.Fatalf("GetWorkflow = %+v, %v", d, err)
	}
	if _, err := o.GetWorkflow(ctx, wf.ID, true); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("GetWorkflow(batch) of a workflow: %v", err)
	}
	if d, err = o.GetWorkflow(ctx, b.ID, true); err != nil || len(d.Callbacks) != 1 || len(d.Steps) != 0 {
		t.Fatalf("GetWorkflow(batch) = %+v, %v", d, err)
	}
	if _, err := o.CancelWorkflow(ctx, b.ID, false); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("CancelWorkflow of a batch as a workflow: %v", err)
	}
	if res, err := o.CancelWorkflow(ctx, b.ID, true); err != nil || res.Applied != 3 {
		t.Fatalf("CancelWorkflow(batch) = %+v, %v", res, err)
	}
}

// workflows cancel asks on a terminal: only y or yes cancels; a workflow
// already done has nothing to ask about.
func TestWorkflowsCancelPrompt(t *testing.T) {
	t.Parallel()
	url := serveMemory(t, httpapi.Tokens{})
	r := cliIn(t, "", testWorkflowBody, "--server", url, "workflows", "submit", "-", "-o", "json")
	id := strconv.FormatInt(decodeJSON[httpapi.WorkflowResponse](t, r.stdout).ID, 10)
	atTerminal := func(answer string, args ...string) result {
		e, out, errb := testEnv("")
		e.stdin = struct {
			io.Reader
			io.Writer
		}{strings.NewReader(answer), io.Discard}
		e.isTerminal = func(io.Writer) bool { return true }
		code := run(context.Background(), e, append([]string{"--server", url}, args...))
		return result{code: code, stdout: out.String(), stderr: errb.String()}
	}
	for _, answer := range []string{"", "n\n", "maybe\n"} {
		r := atTerminal(answer, "workflows", "cancel", id)
		if r.code != 0 || !strings.Contains(r.stderr, "cancel workflow "+id+" (3 jobs not final)? [y/N] ") || !strings.Contains(r.stderr, "nothing changed") {
			t.Fatalf("answer %q: %s", answer, r)
		}
	}
	if r := atTerminal("y\n", "workflows", "cancel", id); r.code != 0 || !strings.Contains(r.stdout, "3 jobs matched") {
		t.Fatalf("answer y: %s", r)
	}
	if r := atTerminal("", "workflows", "cancel", id); r.code != 0 || !strings.Contains(r.stdout, "is done: nothing to cancel") || strings.Contains(r.stderr, "[y/N]") {
		t.Fatalf("a done workflow: %s", r)
	}
}
