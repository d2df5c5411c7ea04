//go:build unix

package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
)

func testJob() *core.Job {
	return &core.Job{ID: 42, Kind: "demo", Queue: "q1", Attempt: 2, MaxAttempts: 5, Priority: 3, Args: []byte(`{"x":1}`)}
}

func sh(script string) *shellHandler {
	return &shellHandler{kind: "demo", argv: shellArgv(script), maxResult: core.DefaultMaxResultBytes, killGrace: 500 * time.Millisecond}
}

func TestShellSuccessEnvAndStdin(t *testing.T) {
	t.Parallel()
	h := sh(`read args; echo "$args|$BACKLOG_JOB_ID|$BACKLOG_JOB_KIND|$BACKLOG_JOB_QUEUE|$BACKLOG_JOB_ATTEMPT|$BACKLOG_JOB_MAX_ATTEMPTS|$BACKLOG_JOB_PRIORITY|$EXTRA|${HOME:+home}"`)
	h.env = []string{"EXTRA=yes"}
	out, err := h.run(context.Background(), testJob())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(out), `{"x":1}|42|demo|q1|2|5|3|yes|home`+"\n"; got != want {
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
