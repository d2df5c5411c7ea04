package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/adapters/httpapi/apitypes"
	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"

	"github.com/spf13/pflag"
)

// archiveFirstJob enqueues two jobs into db, cancels the first and moves
// it into the archive as a maintenance round with Retention.Archive
// would.
func archiveFirstJob(t *testing.T, db string) {
	t.Helper()
	mustCLI(t, db, "migrate")
	mustCLI(t, db, "enqueue", "old", `{"n":1}`)
	mustCLI(t, db, "enqueue", "live", `{"n":2}`)
	mustCLI(t, db, "jobs", "cancel", "1")
	st := openStore(t, db)
	n, err := st.(contract.Archiver).Archive(context.Background(), core.StateCancelled, time.Now().Add(time.Hour), 100)
	if err != nil || n != 1 {
		t.Fatalf("Archive: %d, %v", n, err)
	}
}

// jobs list --archived lists the archive, jobs list the jobs alone, and
// jobs get finds an archived job and says so; on the database and through
// a job server alike.
func TestJobsListArchived(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	archiveFirstJob(t, db)
	url := serveDB(t, db, "", remoteTokens)
	runs := map[string]func(args ...string) result{
		"db":     func(args ...string) result { return cli(t, db, args...) },
		"server": func(args ...string) result { return cliServer(t, url, "ptok", args...) },
	}
	for mode, run := range runs {
		if r := run("jobs", "list"); r.code != 0 || strings.Join(listedIDs(r.stdout), ",") != "2" {
			t.Errorf("%s: jobs list: %s; want job 2 only", mode, r)
		}
		if r := run("jobs", "list", "--archived"); r.code != 0 || strings.Join(listedIDs(r.stdout), ",") != "1" {
			t.Errorf("%s: jobs list --archived: %s; want job 1 only", mode, r)
		}
		r := run("jobs", "list", "--archived", "-o", "json")
		if jobs := decodeJSON[[]apitypes.Job](t, r.stdout); r.code != 0 || len(jobs) != 1 || jobs[0].ID != 1 || !jobs[0].Archived || jobs[0].State != core.StateCancelled {
			t.Errorf("%s: jobs list --archived -o json: %s", mode, r)
		}
		if r := run("jobs", "get", "1"); r.code != 0 || !strings.Contains(r.stdout, "archived: true") || !strings.Contains(r.stdout, "cancelled") {
			t.Errorf("%s: jobs get of an archived job: %s", mode, r)
		}
		r = run("jobs", "get", "1", "-o", "json")
		if j := decodeJSON[apitypes.Job](t, r.stdout); r.code != 0 || j.ID != 1 || !j.Archived || strings.Join(strings.Fields(string(j.Args)), "") != `{"n":1}` {
			t.Errorf("%s: jobs get 1 -o json: %s", mode, r)
		}
		if r := run("jobs", "get", "2", "-o", "json"); r.code != 0 || decodeJSON[apitypes.Job](t, r.stdout).Archived {
			t.Errorf("%s: jobs get of a live job: %s; want archived absent", mode, r)
		}
		if r := run("jobs", "get", "9"); r.code == 0 || !strings.Contains(r.stderr, "not found") {
			t.Errorf("%s: jobs get of a missing job: %s", mode, r)
		}
	}
}

// serve --archive and --archive-ttl, and the config file's archive and
// archive_ttl, set the client's retention.
func TestArchiveFlagsAndConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writeFile(t, dir, "c.json", `{"archive": true, "archive_ttl": "48h", "handlers": {"k": {"command": ["true"]}}}`)
	for _, tc := range []struct {
		args    []string
		archive bool
		ttl     time.Duration
	}{
		{[]string{"--handler", "k=true"}, false, defaultArchiveTTL},
		{[]string{"--handler", "k=true", "--archive", "--archive-ttl", "720h"}, true, 720 * time.Hour},
		{[]string{"--config", cfg}, true, 48 * time.Hour},
		{[]string{"--config", cfg, "--archive=false", "--archive-ttl", "1h"}, false, time.Hour},
	} {
		var f workFlags
		fl := pflag.NewFlagSet("serve", pflag.ContinueOnError)
		f.register(fl)
		if err := fl.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		wc, err := f.resolve(fl, "sqlite:x.db", true)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if wc.archive != tc.archive || wc.archiveTTL != tc.ttl {
			t.Errorf("%v: archive %v, ttl %s; want %v, %s", tc.args, wc.archive, wc.archiveTTL, tc.archive, tc.ttl)
		}
	}
}
