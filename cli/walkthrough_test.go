//go:build unix

package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
)

// walkthrough is the first transcript of docs/cli.md: lines starting with
// "$ " are commands, the lines after one its output.
func walkthrough(t *testing.T) []transcriptStep {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", "cli.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "A first session")
	if i < 0 {
		t.Fatal(`docs/cli.md has no "A first session" walkthrough`)
	}
	start := strings.Index(doc[i:], "\n```")
	if start < 0 {
		t.Fatal("the walkthrough has no code block")
	}
	body := doc[i+start+4:]
	body = body[strings.Index(body, "\n")+1:] // the fence's info string
	end := strings.Index(body, "\n```")
	if end < 0 {
		t.Fatal("the walkthrough's code block does not end")
	}
	var steps []transcriptStep
	for _, line := range strings.Split(body[:end], "\n") {
		if cmd, ok := strings.CutPrefix(line, "$ "); ok {
			steps = append(steps, transcriptStep{cmd: cmd})
			continue
		}
		if len(steps) == 0 {
			t.Fatalf("output before the first command: %q", line)
		}
		steps[len(steps)-1].out += line + "\n"
	}
	return steps
}

// transcriptStep is one command of a transcript and the output shown.
type transcriptStep struct{ cmd, out string }

// shellWords splits a command line as sh would for the simple lines of a
// transcript: words, '…' and "…" quoting (backslash escapes inside double
// quotes; $(…) kept as text), a # comment at the start of a word, and a
// trailing & (background).
func shellWords(line string) (words []string, background bool, err error) {
	var (
		cur    strings.Builder
		inWord bool
	)
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '#' && !inWord:
			i = len(line)
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				return nil, false, fmt.Errorf("unclosed ' in %q", line)
			}
			cur.WriteString(line[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(line) && line[i] != '"'; i++ {
				if line[i] == '\\' && i+1 < len(line) {
					i++
				}
				cur.WriteByte(line[i])
			}
			if i >= len(line) {
				return nil, false, fmt.Errorf("unclosed \" in %q", line)
			}
			inWord = true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	if n := len(words); n > 0 && words[n-1] == "&" {
		words, background = words[:n-1], true
	}
	return words, background, nil
}

// Normalisations of a transcript: times, worker ids (host-pid-random), the
// listener's port, and the spaces a table pads its last column with.
var (
	walkTimes   = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`)
	walkWorkers = regexp.MustCompile(`[A-Za-z0-9._-]+-\d+-[0-9a-f]{8}\b`)
	walkPort    = regexp.MustCompile(`127\.0\.0\.1:\d+`)
	walkTrail   = regexp.MustCompile(`(?m)[ \t]+$`)
)

func normalizeWalk(s, dir string) string {
	s = strings.ReplaceAll(s, dir+string(filepath.Separator), "")
	s = walkTimes.ReplaceAllString(s, "TIME")
	s = walkWorkers.ReplaceAllString(s, "WORKER")
	s = walkPort.ReplaceAllString(s, "127.0.0.1:PORT")
	return walkTrail.ReplaceAllString(s, "")
}

// The walkthrough at the top of docs/cli.md is what the commands print:
// each runs in-process against a temp SQLite database (the background
// serve on a free port), and its output is compared with the transcript.
func TestDocsWalkthrough(t *testing.T) {
	dir := t.TempDir()
	vars := map[string]string{}
	var (
		bg     *worker
		bgOut  *syncBuffer
		bgSeen int // bytes of the background output already compared
		server string
	)
	t.Cleanup(func() {
		if bg != nil {
			bg.stop(t)
		}
	})
	// Paths in the transcript are relative: the database lives in dir.
	rewrite := func(w string) string {
		w = strings.ReplaceAll(w, "sqlite:jobs.db", "sqlite:"+filepath.Join(dir, "jobs.db"))
		if server != "" {
			w = strings.ReplaceAll(w, "http://127.0.0.1:8080", server)
		}
		return w
	}
	settled := func() {
		// Before the next command, the background server has run every
		// job that was due (a person reading the transcript waits too).
		if bg == nil {
			return
		}
		st := openStore(t, rewrite("sqlite:jobs.db"))
		waitFor(t, 20*time.Second, "the due jobs to finish", func() bool {
			n := counts(t, st)
			return n[core.StateAvailable]+n[core.StateRunning] == 0
		})
	}
	for _, step := range walkthrough(t) {
		words, background, err := shellWords(step.cmd)
		if err != nil {
			t.Fatal(err)
		}
		if len(words) == 0 {
			t.Fatalf("empty command %q", step.cmd)
		}
		var got string
		switch {
		case words[0] == "export" && len(words) == 2:
			k, v, ok := strings.Cut(words[1], "=")
			if !ok {
				t.Fatalf("export without =: %q", step.cmd)
			}
			vars[k] = rewrite(v)
		case words[0] == "kill" && len(words) == 2 && words[1] == "%1":
			if bg == nil {
				t.Fatal("kill %1 without a background job")
			}
			bg.sigs <- syscall.SIGTERM
			if code := bg.wait(t); code != 0 {
				t.Fatalf("serve exited %d\n%s", code, bg.stderr)
			}
			got = bgOut.String()[bgSeen:]
			bg = nil
		case words[0] == "backlog" && background:
			e, out, errb := testEnv("")
			e.getenv = func(k string) string { return vars[k] }
			w := &worker{sigs: make(chan os.Signal, 2), done: make(chan int, 1), stdout: out, stderr: errb}
			e.notifySignals = func() (<-chan os.Signal, func()) { return w.sigs, func() {} }
			ctx, cancel := context.WithCancel(context.Background())
			w.cancel = cancel
			args := []string{"--listen", "127.0.0.1:0"}
			for _, a := range words[1:] {
				args = append(args, rewrite(a))
			}
			go func() { w.done <- run(ctx, e, args) }()
			bg, bgOut = w, out
			waitFor(t, 20*time.Second, "serve's start lines", func() bool {
				select {
				case code := <-w.done:
					w.stopped = true
					t.Fatalf("serve exited early with %d\n%s%s", code, out, errb)
				default:
				}
				return strings.Contains(out.String(), "serving ")
			})
			got = out.String()
			bgSeen = len(got)
			if m := regexp.MustCompile(`http://127\.0\.0\.1:\d+`).FindString(got); m != "" {
				server = m
			}
		case words[0] == "backlog":
			settled()
			e, out, errb := testEnv("")
			e.getenv = func(k string) string { return vars[k] }
			args := make([]string, 0, len(words)-1)
			for _, a := range words[1:] {
				args = append(args, rewrite(a))
			}
			if code := run(context.Background(), e, args); code != 0 {
				t.Fatalf("$ %s: exit %d\n%s%s", step.cmd, code, out, errb)
			}
			got = out.String() + errb.String()
		default:
			t.Fatalf("the walkthrough runs %q, which this test does not know how to run", step.cmd)
		}
		if g, w := normalizeWalk(got, dir), normalizeWalk(step.out, dir); g != w {
			t.Errorf("$ %s\ndocs/cli.md shows:\n%s\nthe command printed:\n%s", step.cmd, step.out, got)
		}
	}
}
