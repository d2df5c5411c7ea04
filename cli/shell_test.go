//go:build unix

package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/store/memory"
)

func testJob() *core.Job {
	return &core.Job{ID: 42, Kind: "demo", Queue: "q1", Attempt: 2, ClaimSeq: 3, MaxAttempts: 5, Priority: 3, Args: []byte(`{"x":1}`)}
}

func sh(script string) *shellHandler {
	return &shellHandler{kind: "demo", argv: shellArgv(script), maxResult: core.DefaultMaxResultBytes, killGrace: 500 * time.Millisecond}
}

func TestShellSuccessEnvAndStdin(t *testing.T) {
	t.Parallel()
	h := sh(`read args; echo "$args|$BACKLOG_JOB_ID|$BACKLOG_JOB_KIND|$BACKLOG_JOB_QUEUE|$BACKLOG_JOB_ATTEMPT|$BACKLOG_JOB_CLAIM_SEQ|$BACKLOG_JOB_MAX_ATTEMPTS|$BACKLOG_JOB_PRIORITY|$EXTRA|${HOME:+home}"`)
	h.env = []string{"EXTRA=yes"}
	out, err := h.run(context.Background(), testJob())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(out), `{"x":1}|42|demo|q1|2|3|5|3|yes|home`+"\n"; got != want {
		t.Fatalf("stdout %q, want %q", got, want)
	}
}

func TestShellArgvCommand(t *testing.T) {
	t.Parallel()
	h := &shellHandler{kind: "demo", argv: []string{"cat"}, maxResult: 100}
	out, err := h.run(context.Background(), testJob())
	if err != nil || string(out) != "{\"x\":1}\n" {
		t.Fatalf("%q %v", out, err)
	}
}

func TestShellResultKeepsTail(t *testing.T) {
	t.Parallel()
	h := sh(`i=0; while [ $i -lt 2000 ]; do echo "line $i"; i=$((i+1)); done`)
	h.maxResult = 100
	out, err := h.run(context.Background(), testJob())
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 100 || !strings.HasSuffix(string(out), "line 1999\n") {
		t.Fatalf("%d bytes: %q", len(out), out)
	}
}

func TestShellFailure(t *testing.T) {
	t.Parallel()
	// Lots of stderr: the trace keeps the last 4 KiB, the message the last line.
	h := sh(`i=0; while [ $i -lt 1000 ]; do echo "noise $i" >&2; i=$((i+1)); done; echo "final words" >&2; exit 3`)
	_, err := h.run(context.Background(), testJob())
	var se *shellError
	if !errors.As(err, &se) {
		t.Fatalf("%T %v", err, err)
	}
	if se.Error() != "exit status 3: final words" {
		t.Fatalf("message %q", se.Error())
	}
	tr := se.ErrorTrace()
	if len(tr) > stderrTailBytes || !strings.HasSuffix(tr, "noise 999\nfinal words\n") || strings.Contains(tr, "noise 1\n") {
		t.Fatalf("trace (%d bytes) %q…", len(tr), tr[:min(80, len(tr))])
	}

	_, err = (&shellHandler{kind: "demo", argv: []string{"/nonexistent/cmd"}}).run(context.Background(), testJob())
	if err == nil || !strings.Contains(err.Error(), "did not start") {
		t.Fatalf("missing command: %v", err)
	}
	_, err = sh(`kill -9 $$`).run(context.Background(), testJob())
	if err == nil || !strings.Contains(err.Error(), "killed by signal 9") {
		t.Fatalf("signal: %v", err)
	}
}

func TestShellSnoozeAndCancel(t *testing.T) {
	t.Parallel()
	var snooze *core.SnoozeError
	_, err := sh(`exit 75`).run(context.Background(), testJob())
	if !errors.As(err, &snooze) || snooze.Delay != defaultSnooze {
		t.Fatalf("default snooze: %v", err)
	}
	h := sh(`exit 75`)
	h.snooze = 5 * time.Second
	if _, err = h.run(context.Background(), testJob()); !errors.As(err, &snooze) || snooze.Delay != 5*time.Second {
		t.Fatalf("kind snooze: %v", err)
	}
	if _, err = sh(`echo working; echo snooze=1m30s; exit 75`).run(context.Background(), testJob()); !errors.As(err, &snooze) || snooze.Delay != 90*time.Second {
		t.Fatalf("snooze from stdout: %v", err)
	}
	var cancel *core.CancelError
	_, err = sh(`echo "no such account" >&2; exit 77`).run(context.Background(), testJob())
	if !errors.As(err, &cancel) || !strings.Contains(err.Error(), "exit status 77 (cancel): no such account") {
		t.Fatalf("cancel: %v", err)
	}
	var se *shellError
	if !errors.As(err, &se) || se.ErrorTrace() != "no such account\n" {
		t.Fatalf("cancel keeps the trace: %v", err)
	}
}

// TestShellCancelKillsGroup: a cancelled context kills the command and
// everything it started, also children that ignore SIGTERM.
func TestShellCancelKillsGroup(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "pid")
	h := sh(`sh -c 'trap "" TERM; sleep 30' & echo $! > ` + pidFile + `; sleep 30 & wait`)
	h.killGrace = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := h.run(ctx, testJob())
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("took %s", took)
	}
	if err == nil || !strings.Contains(err.Error(), "killed by signal") {
		t.Fatalf("err %v", err)
	}
	b, _ := os.ReadFile(pidFile)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if pid == 0 {
		t.Fatal("no pid recorded")
	}
	waitFor(t, 5*time.Second, "the TERM-ignoring child to die", func() bool { return !alive(pid) })
}

// TestShellExitZeroAfterStopCompletes: a command that exits 0 after its
// context ended (the stop came as it finished, or it ignores SIGTERM and
// finishes its work) did the work; the handler reports success, not a
// failure that would hand the finished job back to run again.
func TestShellExitZeroAfterStopCompletes(t *testing.T) {
	t.Parallel()
	h := sh(`trap "" TERM; sleep 0.6; echo done`)
	h.killGrace = 5 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	out, err := h.run(ctx, testJob())
	if ctx.Err() == nil {
		t.Fatal("the command ended before the stop")
	}
	if err != nil || string(out) != "done\n" {
		t.Fatalf("exit 0 after the stop: %q %v; want the output and no error", out, err)
	}
}

// alive reports whether pid runs (a zombie waiting for its reaper is dead).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func TestShellLeftoverBackgroundProcess(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "pid")
	// The command exits at once but leaves a child holding stdout open.
	h := sh(`sleep 30 & echo $! > ` + pidFile + `; echo done`)
	h.killGrace = 200 * time.Millisecond
	start := time.Now()
	out, err := h.run(context.Background(), testJob())
	if time.Since(start) > 5*time.Second {
		t.Fatal("waited for the background child")
	}
	if err != nil || string(out) != "done\n" {
		t.Fatalf("exit 0 should complete: %q %v", out, err)
	}
	b, _ := os.ReadFile(pidFile)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	waitFor(t, 5*time.Second, "the background child to die", func() bool { return !alive(pid) })
}

func TestTailBuffer(t *testing.T) {
	t.Parallel()
	b := &tailBuffer{max: 5}
	b.Write([]byte("ab"))
	b.Write([]byte("cd"))
	if b.String() != "abcd" {
		t.Fatal(b.String())
	}
	b.Write([]byte("efg"))
	if b.String() != "cdefg" {
		t.Fatal(b.String())
	}
	b.Write([]byte("0123456789"))
	if b.String() != "56789" {
		t.Fatal(b.String())
	}
	u := &tailBuffer{max: 4}
	u.Write([]byte("aé€")) // 1 + 2 + 3 bytes: the tail starts inside é
	if u.String() != "€" {
		t.Fatalf("%q", u.String())
	}
}

func TestSnoozeFromOutput(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{
		"snooze=10s\n":          10 * time.Second,
		"x\nsnooze=2m\n\n":      2 * time.Minute,
		"snooze=1s\nother\n":    -1,
		"snooze=soon\n":         -1,
		"":                      -1,
		"  snooze= 250ms  \r\n": 250 * time.Millisecond,
	} {
		d, ok := snoozeFromOutput([]byte(in))
		if (want < 0 && ok) || (want >= 0 && (!ok || d != want)) {
			t.Errorf("%q: %s %v, want %s", in, d, ok, want)
		}
	}
}

// TestShellContinue: exit 79 continues the job as the step the command
// wrote to $BACKLOG_CONTINUE_FILE; a missing or malformed step fails the
// attempt, and the file is removed after the command.
func TestShellContinue(t *testing.T) {
	t.Parallel()
	var ct *core.ContinueError
	start := time.Now()
	_, err := sh(`echo "$BACKLOG_CONTINUE_FILE" >&2; printf '{"kind": "step2", "args": {"n": 2}, "run_in": "1m"}' > "$BACKLOG_CONTINUE_FILE"; exit 79`).run(context.Background(), testJob())
	if !errors.As(err, &ct) || ct.Kind != "step2" || string(ct.Args) != `{"n": 2}` ||
		ct.RunAt.Before(start.Add(time.Minute)) || ct.RunAt.After(time.Now().Add(time.Minute)) {
		t.Fatalf("continue: %v %+v", err, ct)
	}
	_, err = sh(`printf '{"kind": "step3", "run_at": "2031-02-03T04:05:06Z"}' > "$BACKLOG_CONTINUE_FILE"; exit 79`).run(context.Background(), testJob())
	if !errors.As(err, &ct) || ct.Kind != "step3" || string(ct.Args) != `{}` || !ct.RunAt.Equal(time.Date(2031, 2, 3, 4, 5, 6, 0, time.UTC)) {
		t.Fatalf("continue at: %v %+v", err, ct)
	}
	// The file is the command's alone, and gone afterwards.
	h := sh(`echo "$BACKLOG_CONTINUE_FILE"`)
	out, err := h.run(context.Background(), testJob())
	path := strings.TrimSpace(string(out))
	if err != nil || path == "" {
		t.Fatalf("continue file: %q %v", out, err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("continue file %s left behind: %v", path, err)
	}
	for script, want := range map[string]string{
		`exit 79`: "is empty",
		`echo '{"kind": "x", "run_at": "2031-01-01T00:00:00Z", "run_in": "1s"}' > "$BACKLOG_CONTINUE_FILE"; exit 79`: "both run_at and run_in",
		`echo '{"kind": "x", "run_in": "soon"}' > "$BACKLOG_CONTINUE_FILE"; exit 79`:                                 "run_in",
		`echo '{"knd": "x"}' > "$BACKLOG_CONTINUE_FILE"; exit 79`:                                                    "unknown field",
		`echo 'step2' > "$BACKLOG_CONTINUE_FILE"; exit 79`:                                                           "not a JSON object",
	} {
		_, err := sh(script).run(context.Background(), testJob())
		var se *shellError
		if !errors.As(err, &se) || errors.As(err, &ct) || !strings.Contains(err.Error(), "exit status 79 (continue): BACKLOG_CONTINUE_FILE") ||
			!strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want a failure saying %q", script, err, want)
		}
	}
}

// TestShellContinueInEngine: shell handlers run a two-step job on one row
// through the engine, and a handler's exponential policy (from a config
// file's object form) sets the backoff of its failures.
func TestShellContinueInEngine(t *testing.T) {
	t.Parallel()
	var pol retryPolicy
	if err := pol.UnmarshalJSON([]byte(`{"base": "40s", "max": "1h", "jitter": 0}`)); err != nil {
		t.Fatal(err)
	}
	hs := core.NewHandlers()
	step1 := sh(`read args; printf '{"kind": "step2", "args": {"from": %s}}' "$args" > "$BACKLOG_CONTINUE_FILE"; exit 79`)
	step2 := sh(`cat`)
	fails := sh(`echo nope >&2; exit 3`)
	hs.HandleRaw("step1", step1.handle)
	hs.HandleRaw("step2", step2.handle)
	hs.HandleRaw("fails", fails.handle, core.WithRetry(pol.policy()))
	st := openStore(t, tempDB(t))
	c, err := core.NewClient(st, core.Config{
		Queues: map[string]core.QueueConfig{core.DefaultQueue: {MaxWorkers: 2}}, Handlers: hs,
		PollInterval: 20 * time.Millisecond, MaintenanceInterval: -1, Retention: &core.Retention{Completed: time.Hour},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r, err := c.EnqueueRaw(ctx, "step1", []byte(`{"n":1}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	rf, err := c.EnqueueRaw(ctx, "fails", nil, &core.Options{MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Stop(sctx)
	})
	waitFor(t, 20*time.Second, "both jobs to be decided", func() bool {
		j, err1 := st.Get(ctx, r.Job.ID)
		f, err2 := st.Get(ctx, rf.Job.ID)
		return err1 == nil && err2 == nil && j.State == core.StateCompleted && f.State == core.StateRetryable
	})
	j, _ := st.Get(ctx, r.Job.ID)
	if j.Kind != "step2" || strings.TrimSpace(string(j.Result)) != `{"from": {"n":1}}` || j.Attempt != 1 || len(j.Errors) != 0 {
		t.Fatalf("two steps: %+v %s", j, j.Result)
	}
	f, _ := st.Get(ctx, rf.Job.ID)
	if wait := f.RunAt.Sub(f.Errors[0].At); wait != 40*time.Second || !strings.Contains(f.Errors[0].Error, "exit status 3: nope") {
		t.Fatalf("failure: waits %s, errors %+v", wait, f.Errors)
	}
}

// TestRetryPolicyConfig: retry, a handler's retry and retry_by_kind take a
// list of delays or an exponential backoff; a kind's policy is its
// handler's retry, else its retry_by_kind entry, and a kind given both is
// refused (one policy per kind, wherever it runs).
func TestRetryPolicyConfig(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]core.RetryPolicy{
		`["10s", "1m"]`: core.DelayList{10 * time.Second, time.Minute},
		`[]`:            core.DelayList{},
		`{"base": "2s", "max": "1m", "jitter": 0.5}`: core.ExponentialBackoff{Base: 2 * time.Second, Max: time.Minute, Jitter: 0.5},
		`{"base": "2s"}`:             core.ExponentialBackoff{Base: 2 * time.Second},
		`{"max": "1h", "jitter": 0}`: core.ExponentialBackoff{Max: time.Hour, Jitter: -1},
	} {
		var p retryPolicy
		if err := p.UnmarshalJSON([]byte(in)); err != nil || fmt.Sprint(p.policy()) != fmt.Sprint(want) {
			t.Errorf("%s: %#v %v, want %#v", in, p.policy(), err, want)
		}
	}
	for in, want := range map[string]string{
		`["-1s"]`:            "negative",
		`{"base": "-1s"}`:    "negative",
		`{"jitter": 2}`:      "outside 0..1",
		`{"delays": ["1s"]}`: "unknown field",
		`"1s"`:               "a list of delays",
		`{"base": 5}`:        "a list of delays",
	} {
		var p retryPolicy
		if err := p.UnmarshalJSON([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", in, err, want)
		}
	}

	resolve := func(config string) (*workConfig, error) {
		path := filepath.Join(t.TempDir(), "c.json")
		if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
			t.Fatal(err)
		}
		f := &workFlags{}
		fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
		f.register(fs)
		if err := fs.Parse([]string{"--config", path}); err != nil {
			t.Fatal(err)
		}
		return f.resolve(fs, defaultDB, false)
	}
	wc, err := resolve(`{
	  "handlers": {
	    "local": {"command": "true", "retry": {"base": "3s", "jitter": 0}},
	    "byfile": {"command": "true"}
	  },
	  "retry": {"base": "5s"},
	  "retry_by_kind": {"remote": ["7s", "1m"], "byfile": {"base": "9s", "jitter": 0}}
	}`)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(wc.retry) != fmt.Sprint(core.ExponentialBackoff{Base: 5 * time.Second}) ||
		fmt.Sprint(wc.handlers["local"].retry) != fmt.Sprint(core.ExponentialBackoff{Base: 3 * time.Second, Jitter: -1}) {
		t.Fatalf("policies: %#v %#v", wc.retry, wc.handlers["local"].retry)
	}
	for kind, want := range map[string]core.RetryPolicy{
		"local":  core.ExponentialBackoff{Base: 3 * time.Second, Jitter: -1},
		"byfile": core.ExponentialBackoff{Base: 9 * time.Second, Jitter: -1},
		"remote": core.DelayList{7 * time.Second, time.Minute},
		"other":  nil,
	} {
		if got := wc.kindRetry(kind); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("kind %s: policy %v, want %v", kind, got, want)
		}
	}
	_, err = resolve(`{
	  "handlers": {"both": {"command": "true", "retry": ["1s"]}},
	  "retry_by_kind": {"both": ["9s"]}
	}`)
	if err == nil || !strings.Contains(err.Error(), `kind "both" has a retry in its handler and one in retry_by_kind`) {
		t.Fatalf("a kind with two policies: %v; want it refused", err)
	}
}

// TestKindAttemptsConfig: a kind's policy sets the attempts of its jobs,
// with max_attempts beside an exponential backoff or as an exact schedule
// ({"retries": [...]}: N delays, N retries, N+1 attempts); the default
// retry takes neither, and bad values are refused.
func TestKindAttemptsConfig(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]struct {
		policy   core.RetryPolicy
		attempts int
	}{
		`{"retries": ["1s", "1m"]}`:          {core.DelayList{time.Second, time.Minute}, 3},
		`{"retries": []}`:                    {core.DelayList{}, 1},
		`{"base": "2s", "max_attempts": 5}`:  {core.ExponentialBackoff{Base: 2 * time.Second}, 5},
		`["1s"]`:                             {core.DelayList{time.Second}, 0},
		`{"jitter": 0.5, "max_attempts": 1}`: {core.ExponentialBackoff{Jitter: 0.5}, 1},
	} {
		var p retryPolicy
		if err := p.UnmarshalJSON([]byte(in)); err != nil || fmt.Sprint(p.policy()) != fmt.Sprint(want.policy) || p.attempts() != want.attempts {
			t.Errorf("%s: %#v %d %v, want %#v %d", in, p.policy(), p.attempts(), err, want.policy, want.attempts)
		}
	}
	for in, want := range map[string]string{
		`{"retries": ["1s"], "max_attempts": 3}`: "goes without",
		`{"retries": ["1s"], "base": "1s"}`:      "goes without",
		`{"retries": ["-1s"]}`:                   "negative",
		`{"max_attempts": 0}`:                    "below 1",
	} {
		var p retryPolicy
		if err := p.UnmarshalJSON([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", in, err, want)
		}
	}

	resolve := func(config string) (*workConfig, error) {
		path := filepath.Join(t.TempDir(), "c.json")
		if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
			t.Fatal(err)
		}
		f := &workFlags{}
		fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
		f.register(fs)
		if err := fs.Parse([]string{"--config", path}); err != nil {
			t.Fatal(err)
		}
		return f.resolve(fs, defaultDB, false)
	}
	wc, err := resolve(`{
	  "handlers": {"local": {"command": "true", "retry": {"retries": ["1s", "2s", "3s"]}}},
	  "retry_by_kind": {"remote": {"base": "1s", "max_attempts": 2}, "plain": ["1s"]}
	}`)
	if err != nil {
		t.Fatal(err)
	}
	// The options build a registry whose kinds get those attempts.
	h := core.NewHandlers()
	h.HandleRaw("local", func(context.Context, *core.Job) error { return nil }, wc.kindOptions("local")...)
	h.Declare("remote", wc.kindOptions("remote")...)
	h.Declare("plain", wc.kindOptions("plain")...)
	c, err := core.NewClient(memory.New(), core.Config{Handlers: h, AllowUnknownKinds: true})
	if err != nil {
		t.Fatal(err)
	}
	for kind, want := range map[string]int{"local": 4, "remote": 2, "plain": core.DefaultMaxAttempts, "other": core.DefaultMaxAttempts} {
		if got := c.MaxAttempts(kind); got != want {
			t.Errorf("kind %s: %d attempts, want %d", kind, got, want)
		}
	}
	if _, err := resolve(`{"retry": {"retries": ["1s"]}}`); err == nil || !strings.Contains(err.Error(), "belong to a kind's policy") {
		t.Fatalf("retries in the default retry: %v; want it refused", err)
	}
}
