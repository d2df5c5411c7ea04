//go:build unix

package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/backlogq/backlog/core/contract"

	"github.com/spf13/pflag"

	"github.com/backlogq/backlog/core"
)

// TestWorkShellEndToEnd enqueues several hundred jobs whose shell handler
// fails for every third id, and works them to the end: the others complete
// with their stdout as result, the failing ones are discarded after two
// attempts with the stderr tail in their errors.
func TestWorkShellEndToEnd(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "e2e.db")
	const n = 300
	var lines strings.Builder
	for i := range n {
		fmt.Fprintf(&lines, "{\"i\":%d}\n", i)
	}
	path := writeFile(t, dir, "jobs.jsonl", lines.String())
	r := mustCLI(t, db, "enqueue", "task", "--from", path, "--max-attempts", "2")
	if !strings.Contains(r.stdout, fmt.Sprintf("enqueued %d jobs", n)) {
		t.Fatalf("%s", r)
	}
	cfg := writeFile(t, dir, "backlog.json", `{
	  "queues": {"default": {"max_workers": 16}},
	  "handlers": {
	    "task": {
	      "command": "read x; if [ $((BACKLOG_JOB_ID % 3)) = 0 ]; then echo boom >&2; exit 1; fi; echo done",
	      "retry": ["50ms"]
	    }
	  }
	}`)
	w := startWorker(t, db, "--config", cfg)
	if !strings.Contains(w.stdout.String(), "queues default(16); kinds task; worker ") {
		t.Fatalf("start line: %s", w.stdout)
	}

	// The worker shows in the registry while it runs.
	ws := decodeJSON[[]workerView](t, mustCLI(t, db, "workers", "-o", "json").stdout)
	if len(ws) != 1 || !strings.Contains(w.stdout.String(), ws[0].ID) || ws[0].Queues[0] != "default" {
		t.Fatalf("workers: %+v", ws)
	}

	st := openStore(t, db)
	waitFor(t, 40*time.Second, "every job to be final", func() bool {
		c := counts(t, st)
		return c[core.StateCompleted]+c[core.StateDiscarded] == n
	})
	if code := w.stop(t); code != 0 {
		t.Fatalf("work exited %d: %s", code, w.stderr)
	}
	if !strings.Contains(w.stdout.String(), "backlog: stopped") {
		t.Fatalf("stop message: %s", w.stdout)
	}

	for _, j := range allJobs(t, st) {
		if j.ID%3 == 0 {
			if j.State != core.StateDiscarded || j.Attempt != 2 || len(j.Errors) != 2 {
				t.Fatalf("job %d: state %s attempt %d errors %d", j.ID, j.State, j.Attempt, len(j.Errors))
			}
			for _, e := range j.Errors {
				if e.Error != "exit status 1: boom" || e.Trace != "boom\n" {
					t.Fatalf("job %d error entry %+v", j.ID, e)
				}
			}
			continue
		}
		if j.State != core.StateCompleted || string(j.Result) != "done\n" || j.Attempt != 1 {
			t.Fatalf("job %d: state %s result %q attempt %d", j.ID, j.State, j.Result, j.Attempt)
		}
	}

	r = mustCLI(t, db, "queues")
	if !strings.Contains(r.stdout, "default  no      0          0          0        0          200        0          100") {
		t.Fatalf("queues:\n%s", r.stdout)
	}
	r = mustCLI(t, db, "jobs", "list", "--state", "discarded", "--limit", "1000")
	if strings.Count(r.stdout, "exit status 1: boom") != 100 || !strings.Contains(r.stdout, "2/2") {
		t.Fatalf("discarded list:\n%s", r.stdout)
	}
	if ws := decodeJSON[[]workerView](t, mustCLI(t, db, "workers", "-o", "json").stdout); len(ws) != 0 {
		t.Fatalf("the stopped worker should have deregistered: %+v", ws)
	}
}

// TestWorkSnoozeCancelTimeout: exit 75 snoozes without using an attempt,
// exit 77 cancels, and a timeout kills the command's process group.
func TestWorkSnoozeCancelTimeout(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "kinds.db")
	marker := filepath.Join(dir, "snoozed")
	pidFile := filepath.Join(dir, "sleep.pid")
	cfg := writeFile(t, dir, "backlog.json", fmt.Sprintf(`{
	  "handlers": {
	    "snoozy": {"command": ["sh", "-c", "if [ -e %[1]s ]; then echo woke; else touch %[1]s; echo snooze=100ms; exit 75; fi"]},
	    "slowsnooze": {"command": "exit 75", "snooze": "1h"},
	    "quitter": {"command": "echo 'account closed' >&2; exit 77"},
	    "sleeper": {"command": "sleep 30 & echo $! > %[2]s; wait", "timeout": "300ms"},
	    "env": {"command": "echo $GREETING $BACKLOG_JOB_ATTEMPT", "env": {"GREETING": "hello"}}
	  },
	  "poll_interval": "1s",
	  "shutdown_timeout": "10s"
	}`, marker, pidFile))
	id := func(args ...string) int64 {
		return decodeJSON[enqueuedJob](t, mustCLI(t, db, append([]string{"enqueue", "-o", "json"}, args...)...).stdout).ID
	}
	snoozy := id("snoozy")
	slow := id("slowsnooze")
	quitter := id("quitter")
	sleeper := id("sleeper", "--max-attempts", "1")
	envJob := id("env")

	// --poll-interval (50ms, from startWorker) overrides the file's 1s.
	w := startWorker(t, db, "--config", cfg)
	st := openStore(t, db)
	get := func(id int64) *core.Job {
		j, err := st.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	waitFor(t, 30*time.Second, "the jobs to settle", func() bool {
		return get(snoozy).State == core.StateCompleted && get(quitter).State == core.StateCancelled &&
			get(sleeper).State == core.StateDiscarded && get(envJob).State == core.StateCompleted &&
			get(slow).State == core.StateScheduled
	})
	w.stop(t)

	if j := get(snoozy); j.Attempt != 1 || len(j.Errors) != 0 || string(j.Result) != "woke\n" {
		t.Errorf("snoozed job: attempt %d errors %v result %q (the snooze must not use an attempt)", j.Attempt, j.Errors, j.Result)
	}
	if j := get(slow); j.Attempt != 0 || time.Until(j.RunAt) < 50*time.Minute {
		t.Errorf("slow snooze: attempt %d run_at %s (want about an hour away)", j.Attempt, j.RunAt)
	}
	if j := get(quitter); len(j.Errors) != 1 || !strings.Contains(j.Errors[0].Error, "exit status 77 (cancel): account closed") || j.Errors[0].Trace != "account closed\n" {
		t.Errorf("cancelled job: %+v", j.Errors)
	}
	j := get(sleeper)
	if len(j.Errors) != 1 || !strings.Contains(j.Errors[0].Error, "timed out") || !strings.Contains(j.Errors[0].Error, "killed by signal 15") {
		t.Errorf("timed-out job: %+v", j.Errors)
	}
	b, _ := os.ReadFile(pidFile)
	var pid int
	fmt.Sscan(string(b), &pid)
	if pid == 0 {
		t.Fatal("sleeper did not record its child's pid")
	}
	waitFor(t, 5*time.Second, "the timed-out job's child to die", func() bool { return !alive(pid) })
	if j := get(envJob); string(j.Result) != "hello 1\n" {
		t.Errorf("env job result %q", j.Result)
	}
}

// TestWorkSignals: the first signal waits for running jobs (saying which),
// the second hard-stops and hands them back without using an attempt.
func TestWorkSignals(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	long := decodeJSON[enqueuedJob](t, mustCLI(t, db, "enqueue", "long", "-o", "json").stdout).ID
	w := startWorker(t, db, "--handler", "long=sleep 30", "--shutdown-timeout", "1m")
	st := openStore(t, db)
	waitFor(t, 20*time.Second, "the job to run", func() bool {
		j, _ := st.Get(context.Background(), long)
		return j != nil && j.State == core.StateRunning
	})
	time.Sleep(100 * time.Millisecond) // let the handler start its command
	w.sigs <- syscall.SIGTERM
	waitFor(t, 10*time.Second, "the soft-stop message", func() bool {
		return strings.Contains(w.stdout.String(), fmt.Sprintf("waiting up to 1m0s for 1 running jobs: #%d long", long))
	})
	w.sigs <- syscall.SIGINT
	start := time.Now()
	if code := w.wait(t); code != 0 {
		t.Fatalf("exit %d: %s", code, w.stderr)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("hard stop took %s", took)
	}
	if out := w.stdout.String(); !strings.Contains(out, "received interrupt again: hard stop; handing back 1 unfinished jobs") {
		t.Fatalf("hard-stop message: %s", out)
	}
	j, err := st.Get(context.Background(), long)
	if err != nil {
		t.Fatal(err)
	}
	if j.State != core.StateAvailable || j.Attempt != 0 {
		t.Fatalf("handed-back job: state %s attempt %d errors %v", j.State, j.Attempt, j.Errors)
	}
}

// TestWorkSoftStopFinishesJobs: cancelling the context (like one signal)
// lets a running job finish before work returns.
func TestWorkSoftStopFinishesJobs(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	id := decodeJSON[enqueuedJob](t, mustCLI(t, db, "enqueue", "short", "-o", "json").stdout).ID
	// The command marks its start: by then the worker counts it as running
	// (the job's state in the store turns running a little earlier).
	mark := filepath.Join(t.TempDir(), "started")
	w := startWorker(t, db, "--handler", "short=touch '"+mark+"'; sleep 1; echo finished")
	st := openStore(t, db)
	waitFor(t, 20*time.Second, "the job to run", func() bool {
		_, err := os.Stat(mark)
		return err == nil
	})
	if code := w.stop(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
	j, _ := st.Get(context.Background(), id)
	if j.State != core.StateCompleted || string(j.Result) != "finished\n" {
		t.Fatalf("job after soft stop: %s %q", j.State, j.Result)
	}
	if !strings.Contains(w.stdout.String(), "context ended: stopping; waiting up to 30s for 1 running jobs") {
		t.Fatalf("stdout: %s", w.stdout)
	}
}

func TestWorkConfigResolve(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writeFile(t, dir, "c.json", `{
	  "db": "sqlite:from-file.db",
	  "worker_id": "file-worker",
	  "queues": {"a": {"max_workers": 3, "claim_ahead": 5}, "b": {}},
	  "handlers": {
	    "x": {"command": "echo x", "timeout": "2s", "retry": ["10s", "20s", "30s"], "snooze": "1m", "env": {"K": "V"}},
	    "y": {"command": ["/bin/echo", "y"]}
	  },
	  "timeout": "1m", "retry": ["5s"], "completed_ttl": "0s", "cancelled_ttl": "48h", "lease": "20s", "poll_interval": "2s", "shutdown_timeout": "5s"
	}`)
	resolve := func(args ...string) (*workConfig, error) {
		f := &workFlags{}
		fs := pflag.NewFlagSet("work", pflag.ContinueOnError)
		f.register(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return f.resolve(fs, defaultDB, false)
	}
	wc, err := resolve("--config", cfg)
	if err != nil {
		t.Fatal(err)
	}
	x := wc.handlers["x"]
	if wc.db != "sqlite:from-file.db" || wc.workerID != "file-worker" || wc.queues["a"] != 3 || wc.queues["b"] != defaultMaxWorkers || wc.claimAhead["a"] != 5 || wc.claimAhead["b"] != 0 ||
		strings.Join(x.argv, " ") != "sh -c echo x" || x.timeout != 2*time.Second || fmt.Sprint(x.retry) != "[10s 20s 30s]" ||
		x.snooze != time.Minute || x.env["K"] != "V" || strings.Join(wc.handlers["y"].argv, " ") != "/bin/echo y" ||
		wc.timeout != time.Minute || fmt.Sprint(wc.retry) != "[5s]" || wc.completedTTL != 0 || wc.lease != 20*time.Second ||
		wc.pollInterval != 2*time.Second || wc.shutdownTimeout != 5*time.Second ||
		wc.cancelledTTL != 48*time.Hour || wc.discardedTTL != 7*24*time.Hour {
		t.Fatalf("from file: %+v %+v", wc, x)
	}

	// Flags override the file; --handler replaces a kind's command but keeps its settings.
	wc, err = resolve("--config", cfg, "--queue", "c=7", "--handler", "x=echo flag", "--handler", "z=true",
		"--timeout", "3s", "--completed-ttl", "1h", "--discarded-ttl", "720h", "--lease", "9s", "--poll-interval", "50ms", "--shutdown-timeout", "1s", "--worker-id", "w2")
	if err != nil {
		t.Fatal(err)
	}
	if len(wc.queues) != 1 || wc.queues["c"] != 7 || len(wc.claimAhead) != 0 || strings.Join(wc.handlers["x"].argv, " ") != "sh -c echo flag" ||
		wc.handlers["x"].timeout != 2*time.Second || wc.handlers["z"] == nil || wc.timeout != 3*time.Second ||
		wc.completedTTL != time.Hour || wc.lease != 9*time.Second || wc.pollInterval != 50*time.Millisecond ||
		wc.shutdownTimeout != time.Second || wc.workerID != "w2" || wc.discardedTTL != 720*time.Hour || wc.cancelledTTL != 48*time.Hour {
		t.Fatalf("flags over file: %+v", wc)
	}

	// Defaults without a file.
	wc, err = resolve("--handler", "k=true")
	if err != nil || wc.queues["default"] != 10 || len(wc.queues) != 1 || wc.completedTTL != 24*time.Hour || wc.db != defaultDB ||
		wc.cancelledTTL != 7*24*time.Hour || wc.discardedTTL != 7*24*time.Hour {
		t.Fatalf("defaults: %+v %v", wc, err)
	}

	for content, want := range map[string]string{
		`{"handlers": {"x": {"command": "true", "timeout": 5}}}`:          `a duration must be a string like "30s"`,
		`{"handlers": {"x": {"command": "true", "timeout": "5"}}}`:        `bad duration "5"`,
		`{"handlers": {"x": {"cmd": "true"}}}`:                            `unknown field "cmd"`,
		`{"handlers": {"x": {"command": 1}}}`:                             "command must be a string",
		`{"handlers": {"x": {"command": []}}}`:                            "command array is empty",
		`{"handlers": {"x": {}}}`:                                         `handler "x" has no command`,
		"{\n  \"queues\": {\"a\": {\"max_workers\": 1},}\n}":              ":2:",
		`{"queues": {"a b": {}}, "handlers": {"x": {"command": "true"}}}`: "queue name",
		`{"handlers": {"x": {"command": "true"}}, "lease": "100ms"}`:      "--lease must be at least 1s",
	} {
		p := writeFile(t, dir, "bad.json", content)
		if _, err := resolve("--config", p); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: want %q, got %v", content, want, err)
		}
	}
}

// TestWorkTagsRouteJobs: a worker takes untagged jobs and jobs whose tags
// are all among its --tag values, and leaves the others queued.
func TestWorkTagsRouteJobs(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	id := func(args ...string) int64 {
		return decodeJSON[enqueuedJob](t, mustCLI(t, db, append([]string{"enqueue", "k", "-o", "json"}, args...)...).stdout).ID
	}
	plain := id()
	gpu := id("--tag", "gpu")
	both := id("--tag", "gpu", "--tag", "eu")
	tpu := id("--tag", "tpu")
	w := startWorker(t, db, "--handler", "k=cat", "--tag", "gpu,eu")
	st := openStore(t, db)
	for _, j := range []int64{plain, gpu, both} {
		waitFor(t, 20*time.Second, fmt.Sprintf("job %d to complete", j), func() bool {
			got, err := st.Get(context.Background(), j)
			return err == nil && got.State == core.StateCompleted
		})
	}
	time.Sleep(200 * time.Millisecond) // four poll intervals
	if got, _ := st.Get(context.Background(), tpu); got.State != core.StateAvailable {
		t.Fatalf("a job tagged tpu ran on a worker tagged gpu,eu: %s", got.State)
	}
	if c := w.stop(t); c != 0 {
		t.Fatalf("exit %d", c)
	}
	long := strings.Repeat("x", contract.MaxTagLen+1)
	if r := cli(t, db, "work", "--handler", "k=cat", "--tag", long); r.code != 2 || !strings.Contains(r.stderr, "--tag") {
		t.Errorf("a tag over %d bytes: %s", contract.MaxTagLen, r)
	}
}
