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

// jobs list shows the newest jobs first unless --order asc says otherwise,
// and --state failed lists the states of the dashboard's "failed" filter.
func TestJobsListNewestFirstAndFailed(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	mustCLI(t, db, "migrate")
	for range 3 {
		mustCLI(t, db, "enqueue", "k", `{}`)
	}
	for args, want := range map[string]string{
		"jobs list":                          "3,2,1",
		"jobs list --limit 2":                "3,2",
		"jobs list --after 3":                "2,1",
		"jobs list --order desc":             "3,2,1",
		"jobs list --desc":                   "3,2,1",
		"jobs list --order asc":              "1,2,3",
		"jobs list --order asc --after 1":    "2,3",
		"jobs list --state failed":           "",
		"jobs list --state failed,available": "3,2,1",
	} {
		r := mustCLI(t, db, strings.Fields(args)...)
		if ids := strings.Join(listedIDs(r.stdout), ","); ids != want {
			t.Errorf("%s: ids %q, want %q\n%s", args, ids, want, r.stdout)
		}
	}
	if r := mustCLI(t, db, "jobs", "list", "--limit", "2"); !strings.Contains(r.stderr, "--after 2") {
		t.Errorf("paging hint of a newest-first page: %s", r.stderr)
	}
	for args, want := range map[string]string{
		"jobs list --order newest":     "--order must be asc or desc",
		"jobs list --desc --order asc": "contradict",
		"jobs list --state failing":    `unknown state "failing"`,
	} {
		if r := cli(t, db, strings.Fields(args)...); r.code != exitUsage || !strings.Contains(r.stderr, want) {
			t.Errorf("%s: %s", args, r)
		}
	}
	help := mustCLI(t, db, "jobs", "list", "--help").stdout
	if !strings.Contains(help, "failed for retryable, discarded") || !strings.Contains(help, "newest first") {
		t.Errorf("help lacks --state failed or the order:\n%s", help)
	}
}
