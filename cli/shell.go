package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/backlogq/backlog/core"
)

// Exit codes with a meaning in the shell handler contract (the first two
// from sysexits.h). See docs/cli.md.
const (
	exitSnooze   = 75 // EX_TEMPFAIL: run again later without using an attempt
	exitCancel   = 77 // EX_NOPERM: cancel the job, never retry it
	exitContinue = 79 // continue as the next step written to $BACKLOG_CONTINUE_FILE
)

// continueFileEnv names the file a command writes its next step to before
// it exits with exitContinue.
const continueFileEnv = "BACKLOG_CONTINUE_FILE"

// Shell handler bounds.
const (
	// stderrTailBytes of a failed command's stderr go into the error
	// entry's trace.
	stderrTailBytes = 4 << 10
	// defaultSnooze is the delay of exit 75 when neither the kind nor the
	// command's output says otherwise.
	defaultSnooze = 30 * time.Second
	// defaultKillGrace is how long a cancelled command's process group has
	// between SIGTERM and SIGKILL.
	defaultKillGrace = 3 * time.Second
	// maxContinueFileBytes bounds what is read of the continue file: the
	// largest args the engine accepts by default, plus room for the rest.
	maxContinueFileBytes = core.DefaultMaxArgsBytes + 64<<10
)

// shellHandler runs one kind's jobs as an external command. See the
// contract in docs/cli.md.
type shellHandler struct {
	kind      string
	argv      []string // the command; a string command is {"sh", "-c", cmd}
	baseEnv   []string // KEY=VALUE every command starts from (handlerBaseEnv); nil: the default allow-list over os.Environ
	env       []string // the kind's own KEY=VALUE, on top of baseEnv
	snooze    time.Duration
	maxResult int           // stdout bytes kept as the result (the tail)
	killGrace time.Duration // SIGTERM → SIGKILL on cancellation
	log       *slog.Logger  // nil: no warnings

	warnOnce sync.Once // the watchdog of the process group did not start
}

// handle is the core.HandlerFunc: it runs the command and turns its exit
// into the job's outcome, recording stdout as the result on success.
func (h *shellHandler) handle(ctx context.Context, job *core.Job) error {
	out, err := h.run(ctx, job)
	if err != nil {
		return err
	}
	return core.RecordRawResult(ctx, out)
}

// shellError is a failed command: Error gives the exit status and the last
// line of stderr; ErrorTrace (stored as the error entry's trace) the tail
// of stderr.
type shellError struct {
	msg    string
	stderr string
}

func (e *shellError) Error() string      { return e.msg }
func (e *shellError) ErrorTrace() string { return e.stderr }

// run executes the command for job. It returns stdout (the last maxResult
// bytes) on exit 0, and otherwise an error steering the outcome: a
// core.Snooze for exit 75, a core.Cancel for exit 77, a core.Continue for
// exit 79 (read from the continue file), a *shellError for anything else.
func (h *shellHandler) run(ctx context.Context, job *core.Job) ([]byte, error) {
	if len(h.argv) == 0 {
		return nil, core.Permanent(fmt.Errorf("kind %q has no command", h.kind))
	}
	contFile, err := newHandlerFile("backlog-continue-*.json", "continue")
	if err != nil {
		return nil, &shellError{msg: fmt.Sprintf("command did not start: %v", err)}
	}
	defer os.Remove(contFile)
	progFile, err := newHandlerFile("backlog-progress-*.jsonl", "progress")
	if err != nil {
		return nil, &shellError{msg: fmt.Sprintf("command did not start: %v", err)}
	}
	defer os.Remove(progFile)
	stdout := &tailBuffer{max: h.maxResult}
	stderr := &tailBuffer{max: stderrTailBytes}
	cmd := exec.CommandContext(ctx, h.argv[0], h.argv[1:]...)
	cmd.Stdin = bytes.NewReader(append(append([]byte(nil), job.Args...), '\n'))
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	base := h.baseEnv
	if base == nil {
		base = handlerBaseEnv(os.Environ(), nil)
	}
	// Not the worker's environment: its tokens and database URL are none
	// of a handler's business. Later entries win (exec keeps the last of
	// duplicate names), so the job's own variables cannot be overridden.
	cmd.Env = make([]string, 0, len(base)+len(h.env)+8)
	cmd.Env = append(append(cmd.Env, base...), h.env...)
	cmd.Env = append(cmd.Env,
		"BACKLOG_JOB_ID="+strconv.FormatInt(job.ID, 10),
		"BACKLOG_JOB_KIND="+job.Kind,
		"BACKLOG_JOB_QUEUE="+job.Queue,
		"BACKLOG_JOB_ATTEMPT="+strconv.Itoa(job.Attempt),
		"BACKLOG_JOB_CLAIM_SEQ="+strconv.FormatInt(job.ClaimSeq, 10),
		"BACKLOG_JOB_MAX_ATTEMPTS="+strconv.Itoa(job.MaxAttempts),
		"BACKLOG_JOB_PRIORITY="+strconv.Itoa(job.Priority),
		continueFileEnv+"="+contFile,
		progressFileEnv+"="+progFile,
	)
	if job.Checkpoint != nil {
		cmd.Env = append(cmd.Env, checkpointEnv+"="+string(job.Checkpoint))
	}
	// The execution's span (tracing on): the command continues its trace.
	cmd.Env = append(cmd.Env, core.TraceEnv(ctx)...)
	// The command runs in a process group of its own, so a cancellation
	// reaches everything it started: SIGTERM first, SIGKILL after the
	// grace. The group dies with this process (proc_unix.go).
	group, err := newProcGroup()
	if err != nil {
		h.warnOnce.Do(func() {
			if h.log != nil {
				h.log.Warn("no watchdog for shell handler commands: they may outlive this process if it is killed", "kind", h.kind, "err", err)
			}
		})
	}
	group.attach(cmd)
	grace := h.killGrace
	if grace <= 0 {
		grace = defaultKillGrace
	}
	var (
		killMu    sync.Mutex
		killTimer *time.Timer
	)
	cmd.Cancel = func() error {
		pgid := group.id(cmd)
		err := terminateGroup(pgid)
		killMu.Lock()
		killTimer = time.AfterFunc(grace, func() { _ = killGroup(pgid) })
		killMu.Unlock()
		return err
	}
	// After a cancellation, or once the command exited while something it
	// started still holds stdout/stderr open, stop waiting after this long.
	cmd.WaitDelay = grace + 500*time.Millisecond

	// The command's progress lines are applied while it runs, and the
	// last ones after it exited, before its outcome.
	progress := &progressReader{path: progFile, kind: h.kind, jobID: job.ID, log: h.log}
	stopProgress := make(chan struct{})
	var progressDone sync.WaitGroup
	progressDone.Add(1)
	go progress.watch(ctx, stopProgress, &progressDone)
	runErr := runLocked(cmd)
	close(stopProgress)
	progressDone.Wait()
	killMu.Lock()
	if killTimer != nil {
		killTimer.Stop()
	}
	killMu.Unlock()
	// Leave nothing behind: whatever is still in the command's process
	// group is killed (no orphans, also after a normal exit).
	group.release(cmd)

	out := stdout.Bytes()
	errTail := stderr.String()
	if runErr == nil || cmd.ProcessState != nil && cmd.ProcessState.Success() {
		// Exit 0: the command did its work. Wait reports an error for an
		// exit 0 too when the context ended first (the stop came as the
		// command finished, or it ignores SIGTERM and finished anyway) or
		// when processes it started kept stdout/stderr open (killed
		// above); neither undoes the work, and calling it a failure would
		// hand a finished job back to run again.
		return out, nil
	}

	var ee *exec.ExitError
	if !errors.As(runErr, &ee) {
		if ctx.Err() != nil {
			// Never started: stopped before it could.
			return nil, &shellError{msg: fmt.Sprintf("command stopped: %v", context.Cause(ctx)), stderr: errTail}
		}
		// Not started: missing executable, permission denied…
		return nil, &shellError{msg: fmt.Sprintf("command did not start: %v", runErr), stderr: errTail}
	}
	ws, _ := ee.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		// When the context ended (timeout, deadline, hard stop, job
		// cancelled) the engine adds why to the message.
		msg := fmt.Sprintf("killed by signal %d (%s)", int(ws.Signal()), ws.Signal())
		return nil, &shellError{msg: withLastLine(msg, errTail), stderr: errTail}
	}
	code := ee.ExitCode()
	if ctx.Err() == nil {
		switch code {
		case exitSnooze:
			d := h.snooze
			if d <= 0 {
				d = defaultSnooze
			}
			if v, ok := snoozeFromOutput(out); ok {
				d = v
			}
			return nil, core.Snooze(d)
		case exitCancel:
			return nil, core.Cancel(&shellError{msg: withLastLine("exit status 77 (cancel)", errTail), stderr: errTail})
		case exitContinue:
			next, err := readContinueFile(contFile)
			if err != nil {
				return nil, &shellError{msg: fmt.Sprintf("exit status 79 (continue): %s %v", continueFileEnv, err), stderr: errTail}
			}
			return nil, next
		}
	}
	msg := fmt.Sprintf("exit status %d", code)
	return nil, &shellError{msg: withLastLine(msg, errTail), stderr: errTail}
}

// newHandlerFile creates an empty temporary file named after pattern
// (os.CreateTemp) that a command may write to — its next step (the
// continue file), its progress lines (the progress file) — and returns
// its path; what names the file in the error.
func newHandlerFile(pattern, what string) (string, error) {
	f, err := os.CreateTemp("", pattern)
	if err != nil {
		return "", fmt.Errorf("create the %s file: %w", what, err)
	}
	return f.Name(), f.Close()
}

// continueStep is the continue file's JSON: the next step's kind
// (required), args (any JSON value; absent means {}) and when it is due:
// run_at (RFC 3339) or run_in (a Go duration such as "30s"), not both;
// neither means now.
type continueStep struct {
	Kind  string          `json:"kind"`
	Args  json.RawMessage `json:"args"`
	RunAt *time.Time      `json:"run_at"`
	RunIn string          `json:"run_in"`
}

// readContinueFile reads the next step a command wrote to path and
// returns it as the handler's core.Continue. The engine checks the step as
// any continuation (an invalid one fails the attempt).
func readContinueFile(path string) (*core.ContinueError, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxContinueFileBytes+1))
	switch {
	case err != nil:
		return nil, err
	case len(b) > maxContinueFileBytes:
		return nil, fmt.Errorf("is over %d bytes", maxContinueFileBytes)
	case len(bytes.TrimSpace(b)) == 0:
		return nil, errors.New("is empty: write {\"kind\": …, \"args\": …} to it before exiting 79")
	}
	var step continueStep
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&step); err != nil {
		return nil, fmt.Errorf("is not a JSON object of kind, args, run_at or run_in: %v", err)
	}
	if step.Args == nil {
		step.Args = json.RawMessage(`{}`)
	}
	var at time.Time
	switch {
	case step.RunAt != nil && step.RunIn != "":
		return nil, errors.New("has both run_at and run_in")
	case step.RunAt != nil:
		at = *step.RunAt
	case step.RunIn != "":
		d, err := time.ParseDuration(step.RunIn)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("run_in %q is not a duration like \"30s\"", step.RunIn)
		}
		at = time.Now().Add(d)
	}
	return &core.ContinueError{Kind: step.Kind, Args: step.Args, RunAt: at}, nil
}

// passedEnv are the variables of the worker's environment every handler
// gets (when set), besides those named by --handler-env / handler_env:
// what programs need to run at all (PATH, HOME, locale, time zone, temp
// directory) and the trace context. Everything else (tokens, the database
// URL, cloud credentials) stays with the worker.
var passedEnv = []string{"PATH", "HOME", "LANG", "TZ", "TMPDIR", "TRACEPARENT", "TRACESTATE"}

// passedEnvPrefix: every locale category (LC_ALL, LC_CTYPE, …) is passed.
const passedEnvPrefix = "LC_"

// handlerBaseEnv is the environment handler commands start from: the
// variables of environ (KEY=VALUE, as os.Environ gives them) that
// passedEnv names, then the entries of allow: "NAME" passes NAME through
// from environ when it is set there, "NAME=value" sets it. The kind's own
// env and the BACKLOG_JOB_* variables are added on top when a command
// starts. The result is never nil.
func handlerBaseEnv(environ []string, allow []string) []string {
	pass := make(map[string]bool, len(passedEnv)+len(allow))
	for _, n := range passedEnv {
		pass[n] = true
	}
	var set []string
	for _, e := range allow {
		if name, _, ok := strings.Cut(e, "="); ok {
			set = append(set, e)
			delete(pass, name) // the value given wins over the worker's
		} else {
			pass[e] = true
		}
	}
	out := make([]string, 0, len(pass)+len(set))
	for _, kv := range environ {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			continue
		}
		if pass[name] || strings.HasPrefix(name, passedEnvPrefix) {
			out = append(out, kv)
		}
	}
	return append(out, set...)
}

// handlerEnv is the environment this run's handler commands start from.
func (a *app) handlerEnv(wc *workConfig) []string {
	environ := os.Environ
	if a.env.environ != nil {
		environ = a.env.environ
	}
	return handlerBaseEnv(environ(), wc.handlerEnv)
}

// checkHandlerEnv validates one --handler-env / handler_env entry: NAME or
// NAME=value, with a NAME that can be an environment variable's.
func checkHandlerEnv(e string) error {
	name, _, _ := strings.Cut(e, "=")
	switch {
	case name == "":
		return fmt.Errorf("%q: want NAME (pass the worker's NAME to handlers) or NAME=value", e)
	case strings.ContainsRune(e, 0):
		return fmt.Errorf("%q: contains a NUL byte", e)
	}
	return nil
}

// withLastLine appends the last non-empty line of stderr (bounded) to msg,
// so listings show why a command failed without opening the trace.
func withLastLine(msg, stderr string) string {
	s := strings.TrimRight(stderr, " \t\r\n")
	if s == "" {
		return msg
	}
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	s = strings.TrimSpace(s)
	if len(s) > 200 {
		cut := 200
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return msg + ": " + s
}

// snoozeFromOutput reads "snooze=<duration>" from the last non-empty line
// of stdout.
func snoozeFromOutput(out []byte) (time.Duration, bool) {
	s := strings.TrimRight(string(out), " \t\r\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	v, ok := strings.CutPrefix(strings.TrimSpace(s), "snooze=")
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil || d < 0 {
		return 0, false
	}
	return d, true
}

// tailBuffer keeps the last max bytes written to it. It is safe for
// concurrent use (exec copies into it from its own goroutine).
type tailBuffer struct {
	mu        sync.Mutex
	max       int
	buf       []byte
	truncated bool
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	if t.max <= 0 {
		t.truncated = t.truncated || n > 0
		return n, nil
	}
	if len(p) >= t.max {
		t.buf = append(t.buf[:0], p[len(p)-t.max:]...)
		t.truncated = true
		return n, nil
	}
	if over := len(t.buf) + len(p) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
		t.truncated = true
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

// Bytes returns a copy of the kept tail, starting on a UTF-8 boundary when
// the head was cut.
func (t *tailBuffer) Bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buf
	if t.truncated {
		i := 0
		for i < len(b) && i < utf8.UTFMax && !utf8.RuneStart(b[i]) {
			i++
		}
		b = b[i:]
	}
	return append([]byte(nil), b...)
}

func (t *tailBuffer) String() string { return string(t.Bytes()) }
