package cli

import (
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
	mustCLI(t, db, "jobs", "cancel", "--queue", "mail", "--kind", "email")
	if c := counts(t, openStore(t, db)); c[core.StateCancelled] != 3 || c[core.StateAvailable] != 2 {
		t.Fatalf("after cancel: %v", c)
	}
	res := decodeJSON[[]actionResult](t, mustCLI(t, db, "-o", "json", "jobs", "delete", "--state", "cancelled,discarded").stdout)
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
