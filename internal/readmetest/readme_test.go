// Package readmetest checks that README.md says what works: its "Two
// commands" section shows exactly the server and the test command, and its
// Go quickstart compiles as shown against this checkout.
package readmetest

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// repoRoot is the checkout this test file lives in.
func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller information")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// readme returns README.md.
func readme(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// section returns the text of the "## title" section, up to the next
// heading of level two.
func section(t *testing.T, doc, title string) string {
	t.Helper()
	i := strings.Index(doc, "\n## "+title+"\n")
	if i < 0 {
		t.Fatalf("README.md has no section %q", title)
	}
	rest := doc[i+len(title)+5:]
	if j := strings.Index(rest, "\n## "); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// block is one fenced code block: its info string and its text.
type block struct{ lang, text string }

// blocks returns the fenced code blocks of s, in order.
func blocks(s string) []block {
	var out []block
	lines := strings.Split(s, "\n")
	for i := 0; i < len(lines); i++ {
		if !strings.HasPrefix(lines[i], "```") {
			continue
		}
		b := block{lang: strings.TrimPrefix(lines[i], "```")}
		var body []string
		for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
			body = append(body, lines[i])
		}
		b.text = strings.Join(body, "\n") + "\n"
		out = append(out, b)
	}
	return out
}

// The first two commands of "Two commands" run the job server on embedded
// SQLite and every test; everything else comes after them.
func TestTwoCommands(t *testing.T) {
	s := section(t, readme(t), "Two commands")
	bs := blocks(s)
	if len(bs) < 2 {
		t.Fatalf("Two commands has %d code blocks, want the two commands first", len(bs))
	}
	for i, want := range []string{"go run ./cmd/backlog serve ", "make test"} {
		cmd := strings.TrimSpace(bs[i].text)
		if strings.Contains(cmd, "\n") || !strings.HasPrefix(cmd, want) {
			t.Errorf("command %d is %q; want one line starting with %q", i+1, cmd, want)
		}
	}
	if strings.Contains(bs[0].text, "--db") || strings.Contains(bs[0].text, "postgres") || strings.Contains(bs[0].text, "mysql") {
		t.Errorf("the first command should use the embedded SQLite default: %q", bs[0].text)
	}
	for _, word := range []string{"--listen", "BACKLOG_LISTEN"} {
		if !strings.Contains(s, word) {
			t.Errorf("Two commands does not mention %s", word)
		}
	}
}

// The Go quickstart, as README.md shows it, builds in a module of its own
// that requires this checkout (go get github.com/backlogq/backlog,
// replaced by the checkout), offline: GOPROXY=off, with the module cache
// the checkout itself builds from.
func TestQuickstartCompiles(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program (-short)")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	root := repoRoot(t)
	s := section(t, readme(t), "Quickstart in Go")
	var code string
	getLine := false
	for _, b := range blocks(s) {
		switch b.lang {
		case "go":
			if code == "" {
				code = b.text
			}
		case "sh", "":
			if strings.Contains(b.text, "go get github.com/backlogq/backlog") {
				getLine = true
			}
		}
	}
	if !getLine {
		t.Error("the quickstart does not show `go get github.com/backlogq/backlog`")
	}
	if code == "" {
		t.Fatal("the quickstart has no ```go block")
	}
	if !strings.HasPrefix(code, "package main\n") {
		t.Errorf("the quickstart does not start with package main:\n%s", code)
	}

	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("main.go", code)
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	write("go.mod", "module example.com/quickstart\n\ngo 1.24\n\n"+
		"require github.com/backlogq/backlog v0.0.0\n\n"+
		"replace github.com/backlogq/backlog => "+abs+"\n")
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	write("go.sum", string(sum))

	cmd := exec.Command(goBin, "build", "-o", filepath.Join(dir, "quickstart"), ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off", "GOSUMDB=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the README's Go quickstart does not build: %v\n%s\n--- main.go\n%s", err, out, code)
	}
}
