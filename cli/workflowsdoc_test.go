package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/backlogq/backlog/adapters/httpapi"
)

// docExample returns the ```json block of docs/workflows.md marked
// <!-- example: NAME -->.
func docExample(t *testing.T, doc, name string) string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, "<!-- example: "+name+" -->\n```json\n")
	if !ok {
		t.Fatalf("docs/workflows.md has no example %s", name)
	}
	body, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatalf("docs/workflows.md: example %s has no end", name)
	}
	return body
}

// docTimes matches the times of a transcript, which differ between runs.
var docTimes = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`)

// The JSON files of docs/workflows.md are bodies the job server takes,
// and its command-line transcript is what the commands print (times
// aside), run in order through a job server on a fresh store.
func TestWorkflowsDocExamples(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "docs", "workflows.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	dir := t.TempDir()
	for _, name := range []string{"workflow.json", "batch.json"} {
		writeFile(t, dir, name, docExample(t, doc, name))
	}
	_, rest, ok := strings.Cut(doc, "## From the command line")
	if !ok {
		t.Fatal(`docs/workflows.md has no "From the command line" section`)
	}
	_, rest, _ = strings.Cut(rest, "```\n")
	transcript, _, _ := strings.Cut(rest, "```")
	url := serveMemory(t, httpapi.Tokens{})
	var cmd, want string
	check := func() {
		if cmd == "" {
			return
		}
		args := strings.Fields(strings.TrimPrefix(cmd, "backlog "))
		for i, a := range args {
			if strings.HasSuffix(a, ".json") {
				args[i] = filepath.Join(dir, a)
			}
		}
		r := cliServer(t, url, "", args...)
		if r.code != 0 {
			t.Fatalf("$ %s: %s", cmd, r)
		}
		if got := docNormalize(r.stdout); got != docNormalize(want) {
			t.Errorf("$ %s\ndocs/workflows.md shows:\n%s\nthe command printed:\n%s", cmd, want, r.stdout)
		}
	}
	for _, line := range strings.SplitAfter(transcript, "\n") {
		if c, ok := strings.CutPrefix(line, "$ "); ok {
			check()
			cmd, want = strings.TrimSpace(c), ""
			continue
		}
		want += line
	}
	check()
}

// docNormalize drops the times of a transcript and the spaces that end
// its lines (a table's empty last column).
func docNormalize(s string) string {
	s = docTimes.ReplaceAllString(s, "T")
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n")
}
