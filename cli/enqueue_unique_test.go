package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
)

func TestEnqueueUniqueScopeAndWindow(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	ctx := context.Background()
	a := decodeJSON[core.Job](t, mustCLI(t, db, "-o", "json", "enqueue", "k", "--queue", "a", "--unique-key", "u", "--unique-scope", "queue", "--unique-for", "1h").stdout)
	b := decodeJSON[core.Job](t, mustCLI(t, db, "-o", "json", "enqueue", "k", "--queue", "b", "--unique-key", "u", "--unique-scope", "queue").stdout)
	if a.ID == b.ID {
		t.Fatalf("queue scope: the same key in two queues made one job (%d)", a.ID)
	}
	// Complete a's job: its key stays held for the hour.
	st := openStore(t, db)
	now := time.Now().UTC()
	jobs, err := st.Claim(ctx, contract.ClaimParams{Queue: "a", WorkerID: "w", Limit: 1, Now: now, LeaseUntil: now.Add(time.Minute)})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim: %v %v", jobs, err)
	}
	if _, err := st.Finish(ctx, []contract.Outcome{{JobID: a.ID, WorkerID: "w", ClaimSeq: jobs[0].ClaimSeq, Attempt: 1, Kind: contract.OutcomeComplete, At: now}}); err != nil {
		t.Fatal(err)
	}
	r := mustCLI(t, db, "enqueue", "k", "--queue", "a", "--unique-key", "u", "--unique-scope", "queue", "--unique-for", "1h")
	if !strings.Contains(r.stdout, "duplicate of job") {
		t.Fatalf("within the window: %s", r)
	}
	for args, want := range map[string]string{
		"--unique-key u --unique-scope tenant": "not global, queue or kind",
		"--unique-for 1h":                      "need --unique-key",
		"--unique-key u --unique-for 9000h":    "outside 0..",
	} {
		r := cli(t, db, append([]string{"enqueue", "k"}, strings.Fields(args)...)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, want) {
			t.Errorf("%s: %s", args, r)
		}
	}
	// Bulk lines carry unique_scope and unique_for.
	r = cliIn(t, db, `{"kind":"k","queue":"c","unique_key":"u","unique_scope":"queue","unique_for":"2h"}`+"\n"+`{"kind":"k","queue":"c","unique_key":"u","unique_scope":"queue"}`+"\n", "enqueue", "--from", "-")
	if r.code != 0 || !strings.Contains(r.stdout, "enqueued 1 jobs") || !strings.Contains(r.stdout, "1 duplicates") {
		t.Fatalf("bulk: %s", r)
	}
}
