package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/internal/syncbuf"
	"github.com/backlogq/backlog/store"
)

// syncBuffer captures a command's output while a test reads it.
type syncBuffer = syncbuf.Buffer

// result is one in-process run of the CLI.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout\n%s--- stderr\n%s", r.code, r.stdout, r.stderr)
}

// testEnv returns an env over buffers, with stdin from in and no signals.
func testEnv(in string) (*env, *syncBuffer, *syncBuffer) {
	out, errb := &syncBuffer{}, &syncBuffer{}
	return &env{
		stdin:  strings.NewReader(in),
		stdout: out,
		stderr: errb,
		getenv: func(string) string { return "" },
	}, out, errb
}

// cli runs the command line in-process against db (prepended as --db).
func cli(t *testing.T, db string, args ...string) result {
	t.Helper()
	return cliIn(t, db, "", args...)
}

// cliIn is cli with stdin.
func cliIn(t *testing.T, db, stdin string, args ...string) result {
	t.Helper()
	e, out, errb := testEnv(stdin)
	if db != "" {
		args = append([]string{"--db", db}, args...)
	}
	code := run(context.Background(), e, args)
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// mustCLI runs a command that must succeed.
func mustCLI(t *testing.T, db string, args ...string) result {
	t.Helper()
	r := cli(t, db, args...)
	if r.code != 0 {
		t.Fatalf("backlog %s: %s", strings.Join(args, " "), r)
	}
	return r
}

// tempDB returns the URL of a fresh SQLite file in a temp dir.
func tempDB(t *testing.T) string {
	t.Helper()
	return "sqlite:" + filepath.Join(t.TempDir(), "test.db")
}

// openStore opens db directly, for setting up and checking state.
func openStore(t *testing.T, db string) contract.Store {
	t.Helper()
	st, err := store.Open(context.Background(), db)
	if err != nil {
		t.Fatalf("open %s: %v", db, err)
	}
	if m, ok := st.(contract.Migrator); ok {
		if err := m.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func decodeJSON[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("decode %q: %v", s, err)
	}
	return v
}

// allJobs lists every job of the store.
func allJobs(t *testing.T, st contract.Store) []*core.Job {
	t.Helper()
	var out []*core.Job
	var after int64
	for {
		js, err := st.List(context.Background(), core.ListParams{AfterID: after, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, js...)
		if len(js) < 1000 {
			return out
		}
		after = js[len(js)-1].ID
	}
}

// counts sums the store's jobs per state over all queues.
func counts(t *testing.T, st contract.Store) map[core.State]int {
	t.Helper()
	stats, err := st.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[core.State]int{}
	for _, q := range stats {
		for s, n := range q.Counts {
			out[s] += n
		}
	}
	return out
}

// waitFor polls cond every 50 ms until it holds or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// worker is a work command running in-process.
type worker struct {
	cancel  context.CancelFunc
	sigs    chan os.Signal
	done    chan int
	stdout  *syncBuffer
	stderr  *syncBuffer
	stopped bool
}

// startWorker runs "backlog --db db work args..." in a goroutine with short
// intervals and waits for its start line.
func startWorker(t *testing.T, db string, args ...string) *worker {
	t.Helper()
	e, out, errb := testEnv("")
	w := &worker{sigs: make(chan os.Signal, 2), done: make(chan int, 1), stdout: out, stderr: errb}
	e.notifySignals = func() (<-chan os.Signal, func()) { return w.sigs, func() {} }
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	full := append([]string{"--db", db, "--log-level", "warn", "work", "--poll-interval", "50ms"}, args...)
	go func() { w.done <- run(ctx, e, full) }()
	t.Cleanup(func() { w.stop(t) })
	waitFor(t, 20*time.Second, "the worker's start line", func() bool {
		select {
		case code := <-w.done:
			w.stopped = true
			t.Fatalf("work exited early with %d\nstdout:\n%s\nstderr:\n%s", code, out, errb)
		default:
		}
		return strings.Contains(out.String(), "serving")
	})
	return w
}

// stop cancels the worker's context (a soft stop) and waits for it.
func (w *worker) stop(t *testing.T) int {
	t.Helper()
	if w.stopped {
		return 0
	}
	w.cancel()
	return w.wait(t)
}

func (w *worker) wait(t *testing.T) int {
	t.Helper()
	select {
	case code := <-w.done:
		w.stopped = true
		return code
	case <-time.After(40 * time.Second):
		t.Fatalf("worker did not stop\nstdout:\n%s\nstderr:\n%s", w.stdout, w.stderr)
		return -1
	}
}

// writeFile writes a file in dir and returns its path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

var _ io.Writer = (*syncBuffer)(nil)
