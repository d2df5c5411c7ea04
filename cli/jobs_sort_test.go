package cli

import (
	"strings"
	"testing"
)

// jobs list --sort run_at lists by run time, soonest first, and pages
// with --after and --after-run-at.
func TestJobsListSortRunAt(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	mustCLI(t, db, "migrate")
	for _, at := range []string{"2099-01-03T00:00:00Z", "2099-01-01T00:00:00Z", "2099-01-02T00:00:00Z"} {
		mustCLI(t, db, "enqueue", "later", `{}`, "--run-at", at)
	}
	r := mustCLI(t, db, "jobs", "list", "--state", "scheduled", "--sort", "run_at", "--limit", "2")
	if ids := listedIDs(r.stdout); strings.Join(ids, ",") != "2,3" {
		t.Fatalf("first page %v; want 2,3 (by run time)\n%s", ids, r.stdout)
	}
	if !strings.Contains(r.stderr, "--after 3 --after-run-at 2099-01-02T00:00:00Z") {
		t.Fatalf("next page hint: %s", r.stderr)
	}
	r = mustCLI(t, db, "jobs", "list", "--state", "scheduled", "--sort", "run_at", "--after", "3", "--after-run-at", "2099-01-02T00:00:00Z")
	if ids := listedIDs(r.stdout); strings.Join(ids, ",") != "1" {
		t.Fatalf("second page %v; want 1", ids)
	}
	for args, want := range map[string]string{
		"jobs list --sort due":                          "--sort must be id or run_at",
		"jobs list --sort run_at --after 3":             "--after-run-at goes with",
		"jobs list --after-run-at 2099-01-02T00:00:00Z": "--after-run-at goes with",
	} {
		if r := cli(t, db, strings.Fields(args)...); r.code == 0 || !strings.Contains(r.stderr, want) {
			t.Errorf("%s: %s", args, r)
		}
	}
}

// listedIDs returns the ID column of a jobs list table.
func listedIDs(out string) []string {
	var ids []string
	for i, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if i == 0 || line == "" {
			continue
		}
		ids = append(ids, strings.Fields(line)[0])
	}
	return ids
}
