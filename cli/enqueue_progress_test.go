package cli

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// enqueue --from FILE --progress counts jobs and jobs per second, not
// bytes, and ends at 100 % also for a file whose last line has no line
// ending or whose lines end in CRLF; from a pipe it shows the same counts.
func TestEnqueueProgressJobsPerSecond(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	mustCLI(t, db, "migrate")
	for name, ending := range map[string]string{"lf.jsonl": "\n", "crlf.jsonl": "\r\n"} {
		var b strings.Builder
		for i := range 2500 {
			if i > 0 {
				b.WriteString(ending)
			}
			fmt.Fprintf(&b, `{"i":%d}`, i)
		}
		path := writeFile(t, t.TempDir(), name, b.String())
		r := mustCLI(t, db, "enqueue", "k", "--from", path, "--progress", "--batch-size", "100", "--allow-unknown-kinds")
		last := finalFrame(r.stderr)
		if !strings.Contains(last, "100%") || !strings.Contains(last, "enqueue: 2500 jobs") || !strings.Contains(last, "jobs/s") {
			t.Errorf("%s: the bar's last frame %q; want 100%%, 2500 jobs and jobs/s\n%q", filepath.Base(path), last, r.stderr)
		}
		if strings.Contains(r.stderr, "kB") || strings.Contains(r.stderr, "B/s") {
			t.Errorf("%s: the bar counts bytes: %q", name, r.stderr)
		}
	}
	r := cliIn(t, db, "{}\n{}\n{}", "enqueue", "k", "--from", "-", "--progress", "--allow-unknown-kinds")
	if r.code != 0 || !strings.Contains(finalFrame(r.stderr), "enqueue: 3 jobs") {
		t.Errorf("from a pipe: %s", r)
	}
}

// finalFrame is the last frame a progress bar drew (frames are separated
// by carriage returns).
func finalFrame(out string) string {
	frames := strings.Split(strings.TrimRight(out, "\n"), "\r")
	for i := len(frames) - 1; i >= 0; i-- {
		if f := strings.TrimSpace(frames[i]); f != "" {
			return f
		}
	}
	return ""
}

// A bar for an input of unknown size (a pipe) draws nothing after enqueue
// returns, also when a bad line stops the insert before the bar finished:
// the library's spinner ticker, which redrew it every 100 ms from a
// goroutine of its own until finished, is off.
func TestEnqueueProgressStopsWithTheCommand(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	mustCLI(t, db, "migrate")
	e, _, errb := testEnv("{}\n{}\nnot json\n")
	code := run(context.Background(), e, []string{"--db", db, "enqueue", "k", "--from", "-", "--progress", "--batch-size", "1", "--allow-unknown-kinds"})
	if code == 0 {
		t.Fatalf("a bad line: exit 0; want a failure\n%s", errb.String())
	}
	before := errb.String()
	time.Sleep(350 * time.Millisecond)
	if after := errb.String(); after != before {
		t.Fatalf("the progress bar drew after enqueue returned:\nbefore %q\nafter  %q", before, after)
	}
}
