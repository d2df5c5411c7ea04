package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
)

func TestCronListPauseResumeRun(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	mustCLI(t, db, "migrate")
	cfg := writeFile(t, t.TempDir(), "c.json", `{
	  "periodic": {
	    "nightly": {"schedule": "CRON_TZ=Europe/Paris 0 3 * * *", "kind": "report", "args": {"full": true}, "queue": "reports", "missed": "skip"},
	    "tick": {"schedule": "@every 1m", "kind": "tick"}
	  }
	}`)
	r := mustCLI(t, db, "cron", "--config", cfg)
	if !strings.Contains(r.stdout, "nightly") || !strings.Contains(r.stdout, "CRON_TZ=Europe/Paris 0 3 * * *") || !strings.Contains(r.stdout, "tick") {
		t.Fatalf("list: %s", r)
	}
	mustCLI(t, db, "cron", "--config", cfg, "pause", "nightly")
	list := decodeJSON[[]core.PeriodicStatus](t, mustCLI(t, db, "-o", "json", "cron", "--config", cfg).stdout)
	if len(list) != 2 || list[0].Name != "nightly" || !list[0].Paused || !list[0].NextRunAt.IsZero() || list[1].Paused || list[1].NextRunAt.IsZero() {
		t.Fatalf("after pause: %+v", list)
	}
	mustCLI(t, db, "cron", "--config", cfg, "resume", "nightly")
	job := decodeJSON[core.Job](t, mustCLI(t, db, "-o", "json", "cron", "--config", cfg, "run", "nightly").stdout)
	var args bytes.Buffer
	_ = json.Compact(&args, job.Args)
	if job.Kind != "report" || job.Queue != "reports" || args.String() != `{"full":true}` || job.Metadata[core.PeriodicMetadataName] != "nightly" {
		t.Fatalf("run now: %+v", job)
	}
	if r := cli(t, db, "cron", "--config", cfg, "pause", "nope"); r.code == 0 || !strings.Contains(r.stderr, "no such periodic job") {
		t.Fatalf("unknown name: %s", r)
	}
	if r := cli(t, db, "cron"); r.code != exitUsage || !strings.Contains(r.stderr, "--config is required") {
		t.Fatalf("without --config: %s", r)
	}
	bad := writeFile(t, t.TempDir(), "bad.json", `{"periodic": {"x": {"schedule": "every day", "kind": "k"}}}`)
	if r := cli(t, db, "cron", "--config", bad); r.code != exitUsage || !strings.Contains(r.stderr, `schedule "every day"`) {
		t.Fatalf("bad schedule: %s", r)
	}
}

// backlog work with a periodic job in its config enqueues and runs each
// occurrence once.
func TestWorkRunsPeriodicJobs(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	cfg := writeFile(t, t.TempDir(), "c.json", `{
	  "handlers": {"tick": {"command": "true"}},
	  "periodic": {"tick": {"schedule": "@every 1s", "kind": "tick"}}
	}`)
	startWorker(t, db, "--config", cfg)
	st := openStore(t, db)
	waitFor(t, 20*time.Second, "three completed ticks", func() bool { return counts(t, st)[core.StateCompleted] >= 3 })
	seen := map[string]bool{}
	for _, j := range allJobs(t, st) {
		at := j.Metadata[core.PeriodicMetadataAt]
		if at == "" || seen[at] {
			t.Fatalf("job %d: occurrence %q (seen before: %v)", j.ID, at, seen[at])
		}
		seen[at] = true
	}
}
