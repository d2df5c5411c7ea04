package cli

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/backlogq/backlog/core"
)

// jobs cancel|retry|delete take a filter instead of ids: --dry-run counts,
// the action touches exactly the matching jobs.
func TestJobsBulkByFilter(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	mustCLI(t, db, "migrate")
	for range 3 {
		mustCLI(t, db, "enqueue", "email", "--queue", "mail")
	}
	mustCLI(t, db, "enqueue", "sms", "--queue", "mail")
	mustCLI(t, db, "enqueue", "email", "--queue", "other")

	r := mustCLI(t, db, "jobs", "cancel", "--queue", "mail", "--kind", "email", "--dry-run")
	if !strings.Contains(r.stdout, "3 jobs match") {
		t.Fatalf("dry run: %s", r)
	}
	if c := counts(t, openStore(t, db)); c[core.StateCancelled] != 0 {
		t.Fatalf("the dry run changed jobs: %v", c)
	}
	// Without --yes and without a terminal: refused, nothing changed.
	for _, args := range [][]string{{"jobs", "cancel", "--queue", "mail", "--kind", "email"}, {"jobs", "delete", "--queue", "mail"}} {
		r := cli(t, db, args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "--yes") || !strings.Contains(r.stderr, "--dry-run") {
			t.Fatalf("%v without --yes: %s", args, r)
		}
		if c := counts(t, openStore(t, db)); c[core.StateAvailable] != 5 {
			t.Fatalf("%v without --yes changed jobs: %v", args, c)
		}
	}
	mustCLI(t, db, "jobs", "cancel", "--queue", "mail", "--kind", "email", "--yes")
	if c := counts(t, openStore(t, db)); c[core.StateCancelled] != 3 || c[core.StateAvailable] != 2 {
		t.Fatalf("after cancel: %v", c)
	}
	res := decodeJSON[[]actionResult](t, mustCLI(t, db, "-o", "json", "jobs", "delete", "--state", "cancelled,discarded", "-y").stdout)
	if len(res) != 3 || !res[0].OK {
		t.Fatalf("delete: %+v", res)
	}
	if c := counts(t, openStore(t, db)); c[core.StateCancelled] != 0 || c[core.StateAvailable] != 2 {
		t.Fatalf("after delete: %v", c)
	}
	if r := mustCLI(t, db, "jobs", "retry", "--kind", "nope"); !strings.Contains(r.stdout, "no job matches") {
		t.Fatalf("nothing matching: %s", r)
	}
	for args, want := range map[string]string{
		"jobs delete":                        "give job ids, or a filter",
		"jobs delete 1 --queue mail":         "not both",
		"jobs delete 1 --dry-run":            "--dry-run goes with a filter",
		"jobs delete --state bogus":          "is not one of",
		"jobs delete --queue mail --limit 0": "--limit must be",
	} {
		if r := cli(t, db, strings.Fields(args)...); r.code != exitUsage || !strings.Contains(r.stderr, want) {
			t.Errorf("%s: %s", args, r)
		}
	}
}

// On a terminal, a filtered delete or cancel without --yes asks, with
// the count of matching jobs, and acts only on y or yes.
func TestBulkActionPrompt(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	mustCLI(t, db, "migrate")
	for range 3 {
		mustCLI(t, db, "enqueue", "email", "--queue", "mail")
	}
	atTerminal := func(answer string, args ...string) result {
		e, out, errb := testEnv("")
		// A terminal is both read and written; tests stand in a reader
		// with a Write method.
		e.stdin = struct {
			io.Reader
			io.Writer
		}{strings.NewReader(answer), io.Discard}
		e.isTerminal = func(io.Writer) bool { return true }
		code := run(context.Background(), e, append([]string{"--db", db}, args...))
		return result{code: code, stdout: out.String(), stderr: errb.String()}
	}
	for _, answer := range []string{"", "n\n", "no\n", "maybe\n"} {
		r := atTerminal(answer, "jobs", "delete", "--queue", "mail")
		if r.code != 0 || !strings.Contains(r.stderr, "delete 3 jobs? [y/N] ") || !strings.Contains(r.stderr, "nothing changed") {
			t.Fatalf("answer %q: %s", answer, r)
		}
		if c := counts(t, openStore(t, db)); c[core.StateAvailable] != 3 {
			t.Fatalf("answer %q changed jobs: %v", answer, c)
		}
	}
	if r := atTerminal("", "jobs", "delete", "--queue", "nope"); r.code != 0 || !strings.Contains(r.stdout, "no job matches") || strings.Contains(r.stderr, "[y/N]") {
		t.Fatalf("nothing matching: %s", r)
	}
	if r := atTerminal("y\n", "jobs", "cancel", "--queue", "mail"); r.code != 0 || !strings.Contains(r.stderr, "cancel 3 jobs? [y/N] ") {
		t.Fatalf("answer y: %s", r)
	}
	if c := counts(t, openStore(t, db)); c[core.StateCancelled] != 3 {
		t.Fatalf("after cancel confirmed: %v", c)
	}
	if r := atTerminal("yes\n", "jobs", "delete", "--state", "cancelled"); r.code != 0 || !strings.Contains(r.stderr, "delete 3 jobs? [y/N] ") {
		t.Fatalf("answer yes: %s", r)
	}
	if c := counts(t, openStore(t, db)); c[core.StateCancelled] != 0 {
		t.Fatalf("after delete confirmed: %v", c)
	}
}
