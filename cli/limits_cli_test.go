package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

func TestQueueLimitsCommand(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	mustCLI(t, db, "migrate")
	if r := mustCLI(t, db, "queues", "limits", "reports"); !strings.Contains(r.stdout, "queue reports: no limits") {
		t.Fatalf("before: %s", r)
	}
	if r := cli(t, db, "queues", "limits", "reports", "--max-running", "20"); r.code != exitRuntime || !strings.Contains(r.stderr, "no such queue") {
		t.Fatalf("limits of a queue the store does not hold, without --create: %s", r)
	}
	r := mustCLI(t, db, "queues", "limits", "reports", "--create", "--max-running", "20", "--per-kind", "pdf=4", "--per-partition", "1")
	if !strings.Contains(r.stdout, "max running 20; per kind pdf=4; per partition 1") {
		t.Fatalf("set: %s", r)
	}
	// Two jobs of one partition: a claim takes one of them.
	for range 2 {
		j := decodeJSON[enqueuedJob](t, mustCLI(t, db, "-o", "json", "enqueue", "k", "--queue", "reports", "--partition-key", "acme").stdout)
		if j.PartitionKey != "acme" {
			t.Fatalf("enqueued %+v", j)
		}
	}
	st := openStore(t, db)
	now := time.Now().UTC()
	got, err := st.Claim(context.Background(), contract.ClaimParams{Queue: "reports", WorkerID: "w", Limit: 10, Now: now, LeaseUntil: now.Add(time.Minute)})
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

// Rates, fairness and aging are set, shown and seeded the same way.
func TestQueuePolicyCommand(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	mustCLI(t, db, "migrate")
	r := mustCLI(t, db, "queues", "limits", "mail", "--create", "--rate", "100/1m", "--rate-per-kind", "bulk=1/s", "--rate-per-partition", "10/h", "--fair", "--aging", "5m", "--aging-max-steps", "4")
	want := "queue mail: rate 100/1m0s; rate per kind bulk=1/1s; rate per partition 10/1h0m0s; fair across partition keys; aging one step per 5m0s, at most 4"
	if !strings.Contains(r.stdout, want) {
		t.Fatalf("set: %s\nwant %s", r, want)
	}
	if r := mustCLI(t, db, "queues", "limits", "mail", "--rate", "0", "--rate-per-kind", "bulk=0", "--fair=false", "--aging", "0"); !strings.Contains(r.stdout, "queue mail: rate per partition 10/1h0m0s\n") {
		t.Fatalf("lift: %s", r)
	}
	if r := mustCLI(t, db, "queues", "limits", "mail", "--workers-per-node", "5"); !strings.Contains(r.stdout, "queue mail: rate per partition 10/1h0m0s; 5 workers per node\n") {
		t.Fatalf("workers per node: %s", r)
	}
	for args, want := range map[string]string{
		"queues limits mail --rate 10":                       "must be N/PERIOD",
		"queues limits mail --rate 10/fortnight":             "not a duration",
		"queues limits mail --rate-per-kind bulk":            "must be KIND=N/PERIOD",
		"queues limits mail --aging 10ms":                    "1s",
		"queues limits mail --aging 1m --aging-max-steps 12": "max steps",
	} {
		if r := cli(t, db, strings.Fields(args)...); r.code == 0 || !strings.Contains(r.stderr, want) {
			t.Errorf("%s: %s", args, r)
		}
	}
	// A burst used up shows its wait.
	mustCLI(t, db, "queues", "limits", "burst", "--create", "--rate", "1/h")
	for range 2 {
		mustCLI(t, db, "enqueue", "k", "--queue", "burst")
	}
	st := openStore(t, db)
	now := time.Now().UTC()
	if got, err := st.Claim(context.Background(), contract.ClaimParams{Queue: "burst", WorkerID: "w", Limit: 10, Now: now, LeaseUntil: now.Add(time.Minute)}); err != nil || len(got) != 1 {
		t.Fatalf("claimed %d (%v) under a rate of 1 an hour", len(got), err)
	}
	if r := mustCLI(t, db, "queues", "limits", "burst"); !strings.Contains(r.stdout, "  queue waits for its rate until ") {
		t.Fatalf("rate wait: %s", r)
	}
	cfg := writeFile(t, t.TempDir(), "c.json", `{
	  "queues": {"reports": {"max_workers": 2, "rate": "5/s", "rate_per_kind": {"pdf": "1/m"}, "fair": true, "aging": "1m"}},
	  "handlers": {"pdf": {"command": "true"}}
	}`)
	startWorker(t, db, "--config", cfg)
	waitFor(t, 10*time.Second, "policy stored", func() bool {
		r := cli(t, db, "queues", "limits", "reports")
		return strings.Contains(r.stdout, "rate 5/1s; rate per kind pdf=1/1m0s; fair across partition keys; aging one step per 1m0s")
	})
	bad := writeFile(t, t.TempDir(), "bad.json", `{"queues": {"q": {"rate": "fast"}}, "handlers": {"k": {"command": "true"}}}`)
	if r := cli(t, db, "work", "--config", bad); r.code != exitUsage || !strings.Contains(r.stderr, "N/PERIOD") {
		t.Fatalf("bad rate: %s", r)
	}
}
