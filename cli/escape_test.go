package cli

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/backlogq/backlog/adapters/httpapi/apitypes"
	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
)

// hostile are the terminal escapes stored in a job's fields below: a
// colour change (CSI), a carriage return that would let the rest of the
// line overwrite what came before, a window title change (OSC … BEL), a
// C1 CSI and a right-to-left override.
const (
	hostileKind  = "k\x1b[31mred\r"
	hostileQueue = "q\x1b]0;pwned\x07"
	hostileError = "boom\x1b[2J\rfake ok\u009b1m\u202etxt"
)

// noEscapes fails when out holds a byte or character that a terminal
// acts on, other than the line breaks and tabs of the layout.
func noEscapes(t *testing.T, what, out string) {
	t.Helper()
	for i, r := range out {
		if r == '\n' || r == '\t' {
			continue
		}
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) || r == 0x202e {
			t.Fatalf("%s prints %U raw at byte %d:\n%q", what, r, i, out)
		}
	}
}

// TestHumanOutputEscapesControlCharacters: kinds, queues, errors, results
// and worker fields holding terminal escapes are printed escaped by jobs
// list, jobs get, queues and workers; -o json keeps them as JSON strings.
func TestHumanOutputEscapesControlCharacters(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	st := openStore(t, db)
	ctx := context.Background()
	now := contract.UTC(time.Now())
	ins, err := st.Insert(ctx, now, []core.InsertParams{{
		Queue: hostileQueue, Kind: hostileKind, Args: []byte(`{"a":"\u001b[31m"}`), Priority: 5, MaxAttempts: 1, RunAt: now,
		UniqueKey: "u\x1b[1m", Tags: []string{"t\x1b[1m"}, Metadata: map[string]string{"m": "v\r"},
	}, {Queue: hostileQueue, Kind: hostileKind, Args: []byte(`{}`), Priority: 6, MaxAttempts: 1, RunAt: now}})
	if err != nil {
		t.Fatal(err)
	}
	id, done := ins[0].Job.ID, ins[1].Job.ID
	got, err := st.Claim(ctx, contract.ClaimParams{Queue: hostileQueue, WorkerID: "w\x1b[5m", Tags: []string{"t\x1b[1m"}, Limit: 2, Now: now, LeaseUntil: now.Add(time.Minute)})
	if err != nil || len(got) != 2 {
		t.Fatalf("claim: %v %v", got, err)
	}
	res, err := st.Finish(ctx, []contract.Outcome{{
		JobID: id, WorkerID: "w\x1b[5m", ClaimSeq: got[0].ClaimSeq, Attempt: 1, Kind: contract.OutcomeDiscard, At: now,
		Error: &core.AttemptError{Attempt: 1, At: now, Error: hostileError, Trace: "frame\x1b[1m\n\tnext\r"},
	}, {
		JobID: done, WorkerID: "w\x1b[5m", ClaimSeq: got[1].ClaimSeq, Attempt: 1, Kind: contract.OutcomeComplete, At: now,
		Result: []byte("line1\x1b[31m\nline2\r"),
	}})
	if err != nil || len(res) != 2 || !res[0].Applied || !res[1].Applied {
		t.Fatalf("finish: %v %v", res, err)
	}
	if err := st.RegisterWorker(ctx, core.WorkerInfo{
		ID: "w\x1b[5m", Host: "h\x1b]0;x\x07", PID: 1, Queues: []string{hostileQueue}, StartedAt: now, HeartbeatAt: now,
	}); err != nil {
		t.Fatal(err)
	}

	list := mustCLI(t, db, "jobs", "list")
	noEscapes(t, "jobs list", list.stdout)
	for _, want := range []string{`k\x1b[31mred\r`, `q\x1b]0;pwned\x07`, `boom\x1b[2J\rfake ok\u009b1m\u202etxt`} {
		if !strings.Contains(list.stdout, want) {
			t.Errorf("jobs list lacks %s:\n%s", want, list.stdout)
		}
	}
	get := mustCLI(t, db, "jobs", "get", strconv.FormatInt(id, 10))
	noEscapes(t, "jobs get", get.stdout)
	for _, want := range []string{`k\x1b[31mred\r`, `u\x1b[1m`, `t\x1b[1m`, `m=v\r`, `frame\x1b[1m`} {
		if !strings.Contains(get.stdout, want) {
			t.Errorf("jobs get lacks %q:\n%s", want, get.stdout)
		}
	}
	get = mustCLI(t, db, "jobs", "get", strconv.FormatInt(done, 10))
	noEscapes(t, "jobs get of a result", get.stdout)
	if want := "line1\\x1b[31m\nline2\\r"; !strings.Contains(get.stdout, want) {
		t.Errorf("jobs get lacks the result %q:\n%s", want, get.stdout)
	}
	queues := mustCLI(t, db, "queues")
	noEscapes(t, "queues", queues.stdout)
	workers := mustCLI(t, db, "workers")
	noEscapes(t, "workers", workers.stdout)
	if !strings.Contains(workers.stdout, `h\x1b]0;x\x07`) {
		t.Errorf("workers lacks the escaped host:\n%s", workers.stdout)
	}
	r := cli(t, db, "queues", "pause", hostileQueue)
	noEscapes(t, "queues pause", r.stdout+r.stderr)

	// JSON stays JSON: the same strings, escaped by JSON only.
	views := decodeJSON[[]*apitypes.Job](t, mustCLI(t, db, "jobs", "list", "--order", "asc", "-o", "json").stdout)
	if len(views) != 2 || views[0].Kind != hostileKind || views[0].Queue != hostileQueue || views[0].Errors[0].Error != hostileError {
		t.Fatalf("jobs list -o json changed the fields: %+v", views)
	}
}

// TestPrintable pins the escapes.
func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"plain":               "plain",
		"naïve 日本 🙂":          "naïve 日本 🙂",
		"a\x1b[31mb":          `a\x1b[31mb`,
		"cr\roverwrite":       `cr\roverwrite`,
		"del\x7f":             `del\x7f`,
		"c1\u009b2J":          `c1\u009b2J`,
		"bidi\u202eevil":      `bidi\u202eevil`,
		"bad\xffutf8":         `bad\xffutf8`,
		"nul\x00":             `nul\x00`,
		"tab\tand\nline":      `tab\tand\nline`,
		"bell\a":              `bell\x07`,
		"\u2066iso\u2069mark": `\u2066iso\u2069mark`,
	} {
		if got := printable(in, ""); got != want {
			t.Errorf("printable(%q) = %q; want %q", in, got, want)
		}
	}
	if got := printable("a\tb\nc\r", "\n\t"); got != "a\tb\nc\\r" {
		t.Errorf("printable keeping \\n\\t = %q", got)
	}
	if got := oneLine("a\tb\r\nc\x1b"); got != `a b ⏎ c\x1b` {
		t.Errorf("oneLine = %q", got)
	}
}

// FuzzPrintable: whatever a stored string holds, printable's output is
// UTF-8 without a character a terminal acts on, oneLine's has no line
// break or tab either, and a string with nothing to escape is unchanged.
func FuzzPrintable(f *testing.F) {
	for _, s := range []string{hostileKind, hostileQueue, hostileError, "plain", "a\tb\r\nc", "\xff\xfe", "\u009b31m", "日本\u202e"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		clean := true
		for i, r := range s {
			_, size := utf8.DecodeRuneInString(s[i:])
			if needsEscape(r, size, "") {
				clean = false
			}
		}
		for _, out := range []string{printable(s, ""), oneLine(s), printable(s, "\n\t")} {
			if !utf8.ValidString(out) {
				t.Fatalf("output for %q is not UTF-8: %q", s, out)
			}
			for _, r := range out {
				if r != '\n' && r != '\t' && needsEscape(r, utf8.RuneLen(r), "") {
					t.Fatalf("output for %q holds %U: %q", s, r, out)
				}
			}
		}
		if strings.ContainsAny(oneLine(s), "\n\t") {
			t.Fatalf("oneLine(%q) = %q keeps a line break or tab", s, oneLine(s))
		}
		if clean && printable(s, "") != s {
			t.Fatalf("printable changed %q, which needs no escape, to %q", s, printable(s, ""))
		}
	})
}

// TestErrorLineEscapesControlCharacters: the final "backlog: <error>" line
// quotes what the user or the store gave (a path here) without letting a
// terminal act on it.
func TestErrorLineEscapesControlCharacters(t *testing.T) {
	t.Parallel()
	r := cli(t, tempDB(t), "enqueue", "k", "--from", "/nonexistent\x1b[31m")
	if r.code == 0 || !strings.Contains(r.stderr, `/nonexistent\x1b[31m`) {
		t.Fatalf("want the path escaped in the error line: %s", r)
	}
	noEscapes(t, "error line", r.stderr)
}
