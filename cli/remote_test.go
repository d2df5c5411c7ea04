//go:build unix

package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/backlogq/backlog/adapters/httpapi"
	"github.com/backlogq/backlog/adapters/httpapi/client"
	"github.com/backlogq/backlog/core"
)

// apiServer serves the HTTP API over a fresh SQLite store and returns its
// URL and a producer/admin client.
func apiServer(t *testing.T) (string, *client.Client) {
	t.Helper()
	st := openStore(t, tempDB(t))
	c, err := core.NewClient(st, core.Config{
		MaintenanceInterval: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	api, err := httpapi.New(c, httpapi.Config{Tokens: httpapi.Tokens{Producer: "ptok", Worker: "wtok", Admin: "atok"}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(api)
	t.Cleanup(func() {
		_ = api.Close()
		hs.Close()
	})
	admin, err := client.New(hs.URL, client.WithToken("atok"))
	if err != nil {
		t.Fatal(err)
	}
	return hs.URL, admin
}

// startRemote runs "backlog work --server url args..." in a goroutine and
// waits for its start line. getenv may be nil.
func startRemote(t *testing.T, getenv func(string) string, url string, args ...string) *worker {
	t.Helper()
	e, out, errb := testEnv("")
	if getenv != nil {
		e.getenv = getenv
	}
	w := &worker{sigs: make(chan os.Signal, 2), done: make(chan int, 1), stdout: out, stderr: errb}
	e.notifySignals = func() (<-chan os.Signal, func()) { return w.sigs, func() {} }
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	full := append([]string{"--log-level", "warn", "work", "--server", url}, args...)
	go func() { w.done <- run(ctx, e, full) }()
	t.Cleanup(func() { w.stop(t) })
	waitFor(t, 20*time.Second, "the remote worker's start line", func() bool {
		select {
		case code := <-w.done:
			w.stopped = true
			t.Fatalf("work --server exited early with %d\nstdout:\n%s\nstderr:\n%s", code, out, errb)
		default:
		}
		return strings.Contains(out.String(), "remote worker of")
	})
	return w
}

func submit(t *testing.T, c *client.Client, req client.SubmitRequest) int64 {
	t.Helper()
	r, err := c.Submit(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return r.Job.ID
}

func getJob(t *testing.T, c *client.Client, id int64) *client.Job {
	t.Helper()
	j, err := c.GetJob(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// TestWorkRemote: work --server runs shell handlers for jobs submitted
// through the API, reports results and failures, and stops cleanly when
// its context ends.
func TestWorkRemote(t *testing.T) {
	t.Parallel()
	url, admin := apiServer(t)
	echo := submit(t, admin, client.SubmitRequest{Kind: "echo", Args: json.RawMessage(`{"n": 1}`)})
	text := submit(t, admin, client.SubmitRequest{Kind: "text"})
	bad := submit(t, admin, client.SubmitRequest{Kind: "bad", MaxAttempts: 1})
	unknown := submit(t, admin, client.SubmitRequest{Kind: "unknown", MaxAttempts: 1})

	w := startRemote(t, nil, url, "--token", "wtok", "--worker-id", "remote-1", "--queue", "default=3",
		"--handler", "echo=cat", "--handler", "text=echo hello; echo world",
		"--handler", "bad=echo partial; echo oops >&2; exit 2")
	if out := w.stdout.String(); !strings.Contains(out, "backlog work: remote worker of "+url+": queues default; kinds bad, echo, text; worker remote-1; heartbeat every 10s") {
		t.Fatalf("start line: %s", out)
	}
	waitFor(t, 30*time.Second, "the jobs to be final", func() bool {
		for _, id := range []int64{echo, text, bad, unknown} {
			if !getJob(t, admin, id).State.Final() {
				return false
			}
		}
		return true
	})
	if code := w.stop(t); code != 0 {
		t.Fatalf("exit %d: %s", code, w.stderr)
	}
	if !strings.Contains(w.stdout.String(), "backlog: context ended: stopping\n") || !strings.Contains(w.stdout.String(), "backlog: stopped\n") {
		t.Fatalf("stop messages: %s", w.stdout)
	}

	if j := getJob(t, admin, echo); j.State != core.StateCompleted || string(j.Result) != `{"n":1}` || j.WorkerID != "remote-1" {
		t.Errorf("echo: %s %s %s", j.State, j.Result, j.WorkerID)
	}
	if j := getJob(t, admin, text); j.State != core.StateCompleted || string(j.Result) != `"hello\nworld\n"` {
		t.Errorf("text: %s %s", j.State, j.Result)
	}
	if j := getJob(t, admin, bad); j.State != core.StateDiscarded || len(j.Errors) != 1 ||
		j.Errors[0].Error != "exit status 2: oops" || j.Errors[0].Trace != "oops\n" {
		t.Errorf("bad: %s %+v", j.State, j.Errors)
	}
	if j := getJob(t, admin, unknown); j.State != core.StateDiscarded || len(j.Errors) != 1 ||
		!strings.Contains(j.Errors[0].Error, `no handler registered for kind "unknown" (worker remote-1 knows 3 kinds)`) {
		t.Errorf("unknown: %s %+v", j.State, j.Errors)
	}
	ws, err := admin.Workers(context.Background())
	if err != nil || len(ws) != 0 {
		t.Fatalf("the stopped worker should have deregistered: %v %+v", err, ws)
	}
}

// TestWorkRemoteTags: `work --server --tag gpu` registers the worker with
// its tags, so it takes jobs tagged gpu (and untagged ones).
func TestWorkRemoteTags(t *testing.T) {
	t.Parallel()
	url, admin := apiServer(t)
	tagged := submit(t, admin, client.SubmitRequest{Kind: "k", Tags: []string{"gpu"}})
	plain := submit(t, admin, client.SubmitRequest{Kind: "k"})
	w := startRemote(t, nil, url, "--token", "wtok", "--tag", "gpu", "--handler", "k=true")
	waitFor(t, 30*time.Second, "both jobs to complete", func() bool {
		return getJob(t, admin, tagged).State == core.StateCompleted && getJob(t, admin, plain).State == core.StateCompleted
	})
	w.stop(t)
}

// TestWorkRemoteSignals: the first signal waits for the running job, the
// second hands it back without using an attempt; the token comes from
// BACKLOG_TOKEN.
func TestWorkRemoteSignals(t *testing.T) {
	t.Parallel()
	url, admin := apiServer(t)
	long := submit(t, admin, client.SubmitRequest{Kind: "long"})
	getenv := func(k string) string {
		if k == "BACKLOG_TOKEN" {
			return "wtok"
		}
		return ""
	}
	w := startRemote(t, getenv, url, "--handler", "long=sleep 30", "--shutdown-timeout", "1m")
	waitFor(t, 20*time.Second, "the job to run", func() bool { return getJob(t, admin, long).State == core.StateRunning })
	time.Sleep(100 * time.Millisecond) // let the handler start its command
	w.sigs <- syscall.SIGTERM
	waitFor(t, 10*time.Second, "the soft-stop message", func() bool {
		return strings.Contains(w.stdout.String(), fmt.Sprintf("received terminated: stopping; waiting up to 1m0s for 1 running jobs: #%d long", long))
	})
	w.sigs <- syscall.SIGINT
	if code := w.wait(t); code != 0 {
		t.Fatalf("exit %d: %s", code, w.stderr)
	}
	if out := w.stdout.String(); !strings.Contains(out, "received interrupt again: hard stop; handing back 1 unfinished jobs") {
		t.Fatalf("hard-stop message: %s", out)
	}
	if j := getJob(t, admin, long); j.State != core.StateAvailable || j.Attempt != 0 {
		t.Fatalf("handed-back job: %s attempt %d errors %v", j.State, j.Attempt, j.Errors)
	}
}

// TestWorkRemoteUsage: flags that belong to the server, a bad URL and a
// refused token are errors.
func TestWorkRemoteUsage(t *testing.T) {
	t.Parallel()
	url, _ := apiServer(t)
	for _, args := range [][]string{
		{"--db", "sqlite:x.db", "work", "--server", url, "--handler", "k=cat"},
		{"work", "--server", url, "--handler", "k=cat", "--lease", "1m"},
		{"work", "--server", url, "--handler", "k=cat", "--completed-ttl", "0"},
		{"work", "--server", "localhost:8080", "--handler", "k=cat"},
		{"work", "--server", url},
	} {
		r := cli(t, "", args...)
		if r.code != exitUsage {
			t.Errorf("%v: %s", args, r)
		}
	}
	r := cli(t, "", "work", "--server", url, "--token", "wrong", "--handler", "k=cat")
	if r.code != exitRuntime || !strings.Contains(r.stderr, "401 unauthorized") {
		t.Errorf("wrong token: %s", r)
	}
}
