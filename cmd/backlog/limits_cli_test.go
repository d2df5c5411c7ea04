package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
)

func TestQueueLimitsCommand(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	mustCLI(t, db, "migrate")
	if r := mustCLI(t, db, "queues", "limits", "reports"); !strings.Contains(r.stdout, "queue reports: no limits") {
		t.Fatalf("before: %s", r)
	}
	r := mustCLI(t, db, "queues", "limits", "reports", "--max-running", "20", "--per-kind", "pdf=4", "--per-partition", "1")
	if !strings.Contains(r.stdout, "max running 20; per kind pdf=4; per partition 1") {
		t.Fatalf("set: %s", r)
	}
	// Two jobs of one partition: a claim takes one of them.
	for range 2 {
		j := decodeJSON[jobView](t, mustCLI(t, db, "-o", "json", "enqueue", "k", "--queue", "reports", "--partition-key", "acme").stdout)
		if j.PartitionKey != "acme" {
			t.Fatalf("enqueued %+v", j)
		}
	}
	st := openStore(t, db)
	now := time.Now().UTC()
	got, err := st.Claim(context.Background(), core.ClaimParams{Queue: "reports", WorkerID: "w", Limit: 10, Now: now, LeaseUntil: now.Add(time.Minute)})
	if err != nil || len(got) != 1 {
		t.Fatalf("claimed %d (%v) under a per-partition limit of 1", len(got), err)
	}
	if r := mustCLI(t, db, "queues", "limits", "reports", "--per-kind", "pdf=0"); !strings.Contains(r.stdout, "max running 20; per partition 1") {
		t.Fatalf("lift one kind: %s", r)
	}
	if r := mustCLI(t, db, "queues", "limits", "reports", "--clear"); !strings.Contains(r.stdout, "no limits") {
		t.Fatalf("clear: %s", r)
	}
	for args, want := range map[string]string{
		"queues limits reports --per-kind pdf":   "must be KIND=N",
		"queues limits reports --max-running -1": "negative",
		"queues limits":                          "accepts 1 arg",
	} {
		if r := cli(t, db, strings.Fields(args)...); r.code == 0 || !strings.Contains(r.stderr, want) {
			t.Errorf("%s: %s", args, r)
		}
	}
}

// The config file's queue limits seed the store at start when it has none.
func TestWorkSeedsQueueLimitsFromConfig(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	cfg := writeFile(t, t.TempDir(), "c.json", `{
	  "queues": {"reports": {"max_workers": 2, "max_running": 5, "max_running_per_kind": {"pdf": 1}, "max_running_per_partition": 2}},
	  "handlers": {"pdf": {"command": "true"}}
	}`)
	startWorker(t, db, "--config", cfg)
	waitFor(t, 10*time.Second, "limits stored", func() bool {
		r := cli(t, db, "queues", "limits", "reports")
		return strings.Contains(r.stdout, "max running 5; per kind pdf=1; per partition 2")
	})
	bad := writeFile(t, t.TempDir(), "bad.json", `{"queues": {"q": {"max_running": -2}}, "handlers": {"k": {"command": "true"}}}`)
	if r := cli(t, db, "work", "--config", bad); r.code != exitUsage || !strings.Contains(r.stderr, "negative") {
		t.Fatalf("negative limit: %s", r)
	}
}
