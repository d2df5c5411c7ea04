// Package doctest checks the Go code of the docs: every ```go block of
// docs/coming-from-river.md, and the blocks of other docs marked
// <!-- snippet: NAME -->, is the code of a region of snippets_test.go,
// which compiles with this package's tests.
package doctest

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/store/sqlite"
)

// snippetDocs are the docs whose marked Go blocks are checked; all says
// whether every ```go block of the doc must be marked.
var snippetDocs = []struct {
	path string
	all  bool
}{
	{"../../docs/coming-from-river.md", true},
	{"../../docs/scheduling.md", false},
}

// dedent removes the indentation every non-empty line of s shares and
// trailing space.
func dedent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	indent := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		n := len(l) - len(strings.TrimLeft(l, "\t "))
		if indent < 0 || n < indent {
			indent = n
		}
	}
	for i, l := range lines {
		if len(l) >= indent && indent > 0 {
			lines[i] = l[indent:]
		}
		lines[i] = strings.TrimRight(lines[i], " \t")
	}
	return strings.Join(lines, "\n") + "\n"
}

// regions returns the snippet regions of snippets_test.go by name.
func regions(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("snippets_test.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	lines := strings.Split(string(b), "\n")
	for i := 0; i < len(lines); i++ {
		name, ok := strings.CutPrefix(strings.TrimSpace(lines[i]), "// snippet: ")
		if !ok {
			continue
		}
		var body []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "// end snippet"; i++ {
			body = append(body, lines[i])
		}
		if i == len(lines) {
			t.Fatalf("snippets_test.go: region %s has no // end snippet", name)
		}
		if _, dup := out[name]; dup {
			t.Fatalf("snippets_test.go: region %s twice", name)
		}
		out[name] = dedent(strings.Join(body, "\n"))
	}
	return out
}

// Every ```go block of coming-from-river.md, and every marked one of the
// other docs, is the code of its region in snippets_test.go, so it
// compiles as shown; every region is shown somewhere.
func TestDocSnippetsMatch(t *testing.T) {
	regs := regions(t)
	shown := map[string]bool{}
	for _, d := range snippetDocs {
		b, err := os.ReadFile(d.path)
		if err != nil {
			t.Fatal(err)
		}
		doc := filepath.Base(d.path)
		lines := strings.Split(string(b), "\n")
		blocks := 0
		for i, l := range lines {
			if l != "```go" {
				continue
			}
			blocks++
			name := ""
			if i > 0 {
				if n, ok := strings.CutPrefix(lines[i-1], "<!-- snippet: "); ok {
					name = strings.TrimSuffix(n, " -->")
				}
			}
			if name == "" {
				if d.all {
					t.Errorf("%s:%d: a ```go block without a <!-- snippet: NAME --> line before it", doc, i+1)
				}
				continue
			}
			var body []string
			for j := i + 1; j < len(lines) && lines[j] != "```"; j++ {
				body = append(body, lines[j])
			}
			want, ok := regs[name]
			if !ok {
				t.Errorf("%s:%d: snippet %s has no region in snippets_test.go", doc, i+1, name)
				continue
			}
			shown[name] = true
			if got := dedent(strings.Join(body, "\n")); got != want {
				t.Errorf("%s:%d: snippet %s differs from snippets_test.go:\n--- doc\n%s--- snippets_test.go\n%s", doc, i+1, name, got, want)
			}
		}
		if d.all && blocks < 5 {
			t.Errorf("%s has %d Go blocks; want the side-by-side examples", doc, blocks)
		}
	}
	for name := range regs {
		if !shown[name] {
			t.Errorf("snippets_test.go: region %s is shown in no doc", name)
		}
	}
}

// The calls coming-from-river.md shows work on SQLite: the client runs
// the sort handler with the error-handler observer and middleware and
// the periodic job, a unique-by-args enqueue is a duplicate the second
// time, a handler's outcomes, the inspector calls and the graceful stop.
func TestRiverWalkthrough(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "jobs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := errorHandlerConfig(logger)
	cfg.Logger = logger
	cfg.Queues = map[string]core.QueueConfig{core.DefaultQueue: {MaxWorkers: 4}}
	cfg.Handlers = sortHandlers()
	cfg.Periodic = []core.PeriodicJob{hourlySort}
	cfg.PollInterval = 20 * time.Millisecond
	client, err := core.NewClient(st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	id, err := insert(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := insert(ctx, client); err != nil || again != id {
		t.Fatalf("second unique-by-args enqueue: job %d, %v; want the first, %d", again, err, id)
	}
	if err := inspect(ctx, client); err != nil {
		t.Fatal(err)
	}
	if err := cancelByID(ctx, client, id); err != nil {
		t.Fatal(err)
	}
	if j, err := client.GetJob(ctx, id); err != nil || j.State != core.StateCancelled {
		t.Fatalf("after CancelJob: %+v, %v", j, err)
	}
	r, err := client.Enqueue(ctx, SortArgs{Strings: []string{"b", "a"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		j, err := client.GetJob(ctx, r.Job.ID)
		if err != nil {
			t.Fatal(err)
		}
		if j.State == core.StateCompleted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %d still %s", j.ID, j.State)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := stop(client); err != nil {
		t.Fatal(err)
	}
	// The other handler sets register.
	for _, h := range []*core.Handlers{retryHandlers(), outcomeHandlers()} {
		if !h.Has("sort") {
			t.Fatal("no sort handler")
		}
	}
	if p := reportSchedule(); p.Name != "daily-report" {
		t.Fatal(p.Name)
	}
}
