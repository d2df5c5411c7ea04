package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/adapters/httpapi/apitypes"
	"github.com/backlogq/backlog/core"
)

// startWaitWorker works queue "work" of db in the test: kind "ok"
// completes with {"ok":true}, "bad" fails ("boom"), "slow" completes
// after 300 ms.
func startWaitWorker(t *testing.T, db string) {
	t.Helper()
	st := openStore(t, db)
	h := core.NewHandlers()
	h.HandleRaw("ok", func(ctx context.Context, _ *core.Job) error { return core.RecordRawResult(ctx, []byte(`{"ok":true}`)) })
	h.HandleRaw("bad", func(context.Context, *core.Job) error { return errors.New("boom") })
	h.HandleRaw("slow", func(ctx context.Context, _ *core.Job) error {
		time.Sleep(300 * time.Millisecond)
		return core.RecordRawResult(ctx, []byte(`"slept"`))
	})
	c, err := core.NewClient(st, core.Config{
		Queues: map[string]core.QueueConfig{"work": {MaxWorkers: 4}}, Handlers: h,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), PollInterval: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
}

// enqueuedID enqueues on db and returns the job's id.
func enqueuedID(t *testing.T, db string, args ...string) string {
	t.Helper()
	r := mustCLI(t, db, append([]string{"enqueue", "-o", "json"}, args...)...)
	j := decodeJSON[apitypes.Job](t, r.stdout)
	return strconv.FormatInt(j.ID, 10)
}

// TestJobsWait: jobs wait prints the final job and exits 0 completed,
// 4 discarded, 5 cancelled, 3 when --timeout passes first (printing the
// job as it is), 1 for a missing job and 2 for a wrong command line; on
// the store (--db) and through a job server (--server) alike.
func TestJobsWait(t *testing.T) {
	db := tempDB(t)
	mustCLI(t, db, "migrate")
	url := serveDB(t, db, "", remoteTokens)
	targets := map[string]func(args ...string) result{
		"db":     func(args ...string) result { return cli(t, db, args...) },
		"server": func(args ...string) result { return cliServer(t, url, remoteTokens.Producer, args...) },
	}
	startWaitWorker(t, db)
	for name, run := range targets {
		t.Run(name, func(t *testing.T) {
			ok := enqueuedID(t, db, "slow", "--queue", "work")
			bad := enqueuedID(t, db, "bad", "--queue", "work", "--max-attempts", "1")
			idle := enqueuedID(t, db, "later", "--queue", "idle", "--allow-unknown-kinds")
			gone := enqueuedID(t, db, "later", "--queue", "idle", "--allow-unknown-kinds")
			mustCLI(t, db, "jobs", "cancel", gone)

			r := run("jobs", "wait", ok)
			if r.code != 0 || !strings.Contains(r.stdout, "completed") || !strings.Contains(r.stdout, "slept") {
				t.Fatalf("wait for a completing job: %s", r)
			}
			r = run("jobs", "wait", ok, "-o", "json")
			if j := decodeJSON[apitypes.Job](t, r.stdout); r.code != 0 || j.State != core.StateCompleted || compact(t, j.Result) != `"slept"` {
				t.Fatalf("wait -o json: %s", r)
			}
			r = run("jobs", "wait", bad)
			if r.code != exitWaitDiscarded || !strings.Contains(r.stdout, "discarded") || !strings.Contains(r.stderr, "job "+bad+" was discarded: boom") {
				t.Fatalf("wait for a failing job: %s", r)
			}
			r = run("jobs", "wait", gone)
			if r.code != exitWaitCancelled || !strings.Contains(r.stderr, "was cancelled") {
				t.Fatalf("wait for a cancelled job: %s", r)
			}
			start := time.Now()
			r = run("jobs", "wait", idle, "--timeout", "300ms", "-o", "json")
			if j := decodeJSON[apitypes.Job](t, r.stdout); r.code != exitWaitTimeout || j.State != core.StateAvailable || !strings.Contains(r.stderr, "still available after 300ms") {
				t.Fatalf("wait past --timeout: %s", r)
			}
			if d := time.Since(start); d < 300*time.Millisecond {
				t.Fatalf("answered after %s, before --timeout", d)
			}
			if r = run("jobs", "wait", "99999"); r.code != exitRuntime || !strings.Contains(r.stderr, "not found") {
				t.Fatalf("wait for a missing job: %s", r)
			}
			for _, args := range [][]string{{"jobs", "wait", "x"}, {"jobs", "wait", ok, "--timeout", "-1s"}, {"jobs", "wait"}, {"jobs", "wait", ok, "--timeout", "soon"}} {
				if r = run(args...); r.code != exitUsage {
					t.Fatalf("%v: %s", args, r)
				}
			}
		})
	}
}

// TestEnqueueWait: enqueue --wait prints the final job (with -o json only
// it) and exits by its state; --timeout needs --wait and --from refuses
// both.
func TestEnqueueWait(t *testing.T) {
	db := tempDB(t)
	mustCLI(t, db, "migrate")
	startWaitWorker(t, db)

	r := cli(t, db, "enqueue", "ok", "{}", "--queue", "work", "--wait", "-o", "json")
	if j := decodeJSON[apitypes.Job](t, r.stdout); r.code != 0 || j.State != core.StateCompleted || compact(t, j.Result) != `{"ok":true}` {
		t.Fatalf("enqueue --wait -o json: %s", r)
	}
	r = cli(t, db, "enqueue", "ok", "{}", "--queue", "work", "--wait")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "enqueued job ") || !strings.Contains(r.stdout, "completed") {
		t.Fatalf("enqueue --wait: %s", r)
	}
	r = cli(t, db, "enqueue", "bad", "{}", "--queue", "work", "--max-attempts", "1", "--wait", "--timeout", "20s")
	if r.code != exitWaitDiscarded || !strings.Contains(r.stderr, "boom") {
		t.Fatalf("enqueue --wait of a failing job: %s", r)
	}
	r = cli(t, db, "enqueue", "later", "{}", "--queue", "idle", "--allow-unknown-kinds", "--wait", "--timeout", "200ms")
	if r.code != exitWaitTimeout || !strings.Contains(r.stdout, "available") {
		t.Fatalf("enqueue --wait past --timeout: %s", r)
	}
	for _, args := range [][]string{
		{"enqueue", "ok", "--timeout", "1s"},
		{"enqueue", "ok", "--wait", "--timeout", "-1s"},
		{"enqueue", "--from", "-", "--wait"},
	} {
		if r = cli(t, db, args...); r.code != exitUsage {
			t.Fatalf("%v: %s", args, r)
		}
	}

	url := serveDB(t, db, "", remoteTokens)
	r = cliServer(t, url, remoteTokens.Producer, "enqueue", "ok", "{}", "--queue", "work", "--wait", "-o", "json")
	if j := decodeJSON[apitypes.Job](t, r.stdout); r.code != 0 || j.State != core.StateCompleted {
		t.Fatalf("enqueue --wait --server: %s", r)
	}
}

// compact returns the JSON b without insignificant space.
func compact(t *testing.T, b []byte) string {
	t.Helper()
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return out.String()
}
