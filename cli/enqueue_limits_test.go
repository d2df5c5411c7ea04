package cli

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/store/memory"
)

// TestEnqueueTimesOutOfRange: --run-at, --deadline and the times of a
// --from line outside core's range (UTC) are refused before anything is
// inserted, naming the flag or the field.
func TestEnqueueTimesOutOfRange(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	const y10k = "9999-12-31T23:59:59-14:00"
	for _, c := range []struct {
		args []string
		in   string
		code int
		want string
	}{
		{[]string{"enqueue", "k", "--run-at", y10k}, "", exitUsage, "--run-at 9999-12-31T23:59:59-14:00 (10000-01-01T13:59:59Z) is outside the supported range"},
		{[]string{"enqueue", "k", "--run-at", "1969-12-31T23:59:59Z"}, "", exitUsage, "--run-at 1969-12-31T23:59:59Z is outside"},
		{[]string{"enqueue", "k", "--deadline", y10k}, "", exitUsage, "--deadline 9999-12-31T23:59:59-14:00 (10000-01-01T13:59:59Z) is outside"},
		{[]string{"enqueue", "--from", "-"}, `{"kind":"x","run_at":"` + y10k + `"}` + "\n", exitRuntime, "stdin:1: backlog: invalid job: kind \"x\": run_at 10000-01-01T13:59:59Z is outside"},
		{[]string{"enqueue", "--from", "-"}, `{"kind":"x"}` + "\n" + `{"kind":"x","deadline":"` + y10k + `"}` + "\n", exitRuntime, "stdin:2: "},
		{[]string{"enqueue", "k", "{\"s\":\"\xff\"}"}, "", exitUsage, "not valid UTF-8"},
		{[]string{"enqueue", "--from", "-"}, "{\"kind\":\"x\",\"args\":\"\xc3\"}\n", exitRuntime, "not valid UTF-8"},
	} {
		r := cliIn(t, db, c.in, c.args...)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%q: want exit %d and %q; got %s", c.args, c.code, c.want, r)
		}
	}
	if n := len(allJobs(t, openStore(t, db))); n != 0 {
		t.Fatalf("%d jobs inserted by refused enqueues", n)
	}
	// The last representable microsecond is fine.
	r := mustCLI(t, db, "enqueue", "k", "--run-at", "9999-12-31T23:59:59.999999Z", "-o", "json")
	if !strings.Contains(r.stdout, `"run_at": "9999-12-31T23:59:59.999999Z"`) && !strings.Contains(r.stdout, `"run_at":"9999-12-31T23:59:59.999999Z"`) {
		t.Fatalf("%s", r)
	}
}

// longLine is a JSON Lines input whose first line never ends within n
// bytes; it counts what was read from it.
type longLine struct {
	n, read int
	head    string
}

func (l *longLine) Read(p []byte) (int, error) {
	if l.read >= l.n {
		return 0, io.EOF
	}
	k := min(len(p), l.n-l.read)
	for i := range k {
		if at := l.read + i; at < len(l.head) {
			p[i] = l.head[at]
		} else {
			p[i] = 'a'
		}
	}
	l.read += k
	return k, nil
}

// TestEnqueueFromStopsReadingAtTheLineLimit: a 70 MB line is refused
// after at most the line limit (plus one read buffer) has been read and
// held, with the line number, instead of being read whole first.
func TestEnqueueFromStopsReadingAtTheLineLimit(t *testing.T) {
	st := memory.New()
	defer st.Close()
	cl, err := core.NewClient(st, core.Config{MaintenanceInterval: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	in := &longLine{n: 70 << 20, head: `{"kind":"x","args":"`}
	valid := strings.NewReader("{\"kind\":\"ok\"}\n")
	_, err = bulkInsert(context.Background(), storeOps{cl}, io.MultiReader(valid, in), "big.jsonl", "", &core.Options{}, 1000, nil)
	if err == nil || !strings.Contains(err.Error(), "big.jsonl:2: line is over") || !strings.Contains(err.Error(), "nothing was inserted") {
		t.Fatalf("err = %v; want big.jsonl:2 over the limit, nothing inserted", err)
	}
	if limit := maxLineBytes + 128<<10; in.read > limit {
		t.Fatalf("read %d bytes of the long line; at most %d may be read", in.read, limit)
	}
}
