package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/adapters/httpapi/apitypes"
	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
)

// deleteOnComplete claims the one due job of queue in db and completes it
// with a completed retention of zero: its row goes, its key stays held.
func deleteOnComplete(t *testing.T, db, queue string) *core.Job {
	t.Helper()
	st := openStore(t, db)
	ctx := context.Background()
	now := time.Now().UTC()
	jobs, err := st.Claim(ctx, contract.ClaimParams{Queue: queue, WorkerID: "w", Limit: 1, Now: now, LeaseUntil: now.Add(time.Minute)})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim from %s: %v %v", queue, jobs, err)
	}
	if _, err := st.Finish(ctx, []contract.Outcome{{JobID: jobs[0].ID, WorkerID: "w", ClaimSeq: jobs[0].ClaimSeq, Attempt: 1, Kind: contract.OutcomeComplete, At: now, Delete: true}}); err != nil {
		t.Fatal(err)
	}
	return jobs[0]
}

// backlog unique list shows the holds (also a deleted job's), backlog
// unique release frees a finished or gone job's key, refuses a live one's,
// and both work on the store (--db) and through a job server (--server,
// admin token only).
func TestUniqueCommand(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	mustCLI(t, db, "migrate")
	mustCLI(t, db, "enqueue", "report", "--queue", "reports", "--unique-key", "tenant-42", "--unique-for", "720h")
	gone := deleteOnComplete(t, db, "reports")
	mustCLI(t, db, "enqueue", "mail", "--queue", "mail", "--unique-key", "welcome", "--unique-scope", "queue", "--unique-for", "1h")
	if j := decodeJSON[enqueuedJob](t, mustCLI(t, db, "-o", "json", "enqueue", "report", "--queue", "reports", "--unique-key", "tenant-42").stdout); j.ID != gone.ID {
		t.Fatalf("enqueue of the held key made job %d; want the gone job %d back", j.ID, gone.ID)
	}

	r := mustCLI(t, db, "unique", "list")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 || !strings.Contains(lines[1], "tenant-42") || !strings.Contains(lines[1], "gone") || !strings.Contains(lines[2], "welcome") ||
		!strings.Contains(lines[2], "queue") || !strings.Contains(lines[2], "available") {
		t.Fatalf("unique list:\n%s", r.stdout)
	}
	holds := decodeJSON[[]apitypes.UniqueHold](t, mustCLI(t, db, "-o", "json", "unique", "list").stdout)
	if len(holds) != 2 || holds[0].ScopedKey != "g:tenant-42" || !holds[0].JobGone || holds[0].Until == nil || holds[1].ScopedKey != "q4:mail:welcome" || holds[1].Until != nil {
		t.Fatalf("unique list -o json: %+v", holds)
	}
	if page := decodeJSON[[]apitypes.UniqueHold](t, mustCLI(t, db, "-o", "json", "unique", "list", "--after", "g:tenant-42").stdout); len(page) != 1 || page[0].Key != "welcome" {
		t.Fatalf("unique list --after: %+v", page)
	}

	for args, want := range map[string]string{
		"unique release welcome --scope queue --queue mail": "has not finished",
		"unique release welcome":                            "nothing holds it",
		"unique release welcome --scope queue":              "needs --queue",
		"unique release welcome --queue mail":               "takes no --queue",
		"unique release":                                    "accepts 1 arg",
	} {
		if r := cli(t, db, strings.Fields(args)...); r.code == 0 || !strings.Contains(r.stderr, want) {
			t.Errorf("%s: %s", args, r)
		}
	}

	// Through the job server: the admin token only.
	url := serveDB(t, db, "", remoteTokens)
	if r := cliServer(t, url, remoteTokens.Producer, "unique", "list"); r.code == 0 || !strings.Contains(r.stderr, "admin role") {
		t.Fatalf("unique list with the producer token: %s", r)
	}
	r = cliServer(t, url, remoteTokens.Admin, "-o", "json", "unique", "list")
	if r.code != 0 {
		t.Fatalf("unique list through the server: %s", r)
	}
	if got := decodeJSON[[]apitypes.UniqueHold](t, r.stdout); len(got) != 2 || got[0].ScopedKey != holds[0].ScopedKey || got[0].JobID != gone.ID ||
		!got[0].JobGone || got[0].Until == nil || !got[0].Until.Equal(*holds[0].Until) || got[0].UniqueForSeconds != 720*3600 || got[1].State != core.StateAvailable {
		t.Fatalf("unique list through the server: %+v; on the store: %+v", got, holds)
	}
	r = cliServer(t, url, remoteTokens.Admin, "unique", "release", "tenant-42")
	if r.code != 0 || !strings.Contains(r.stdout, "unique key tenant-42 (global scope) released from job") {
		t.Fatalf("unique release through the server: %s", r)
	}
	if r := cliServer(t, url, remoteTokens.Admin, "unique", "release", "tenant-42"); r.code == 0 || !strings.Contains(r.stderr, "nothing holds it") {
		t.Fatalf("second release: %s", r)
	}
	if j := decodeJSON[enqueuedJob](t, mustCLI(t, db, "-o", "json", "enqueue", "report", "--queue", "reports", "--unique-key", "tenant-42").stdout); j.ID == gone.ID {
		t.Fatalf("enqueue after the release returned the gone job %d", j.ID)
	}

	// On the store: cancel, then release.
	id := decodeJSON[[]apitypes.UniqueHold](t, mustCLI(t, db, "-o", "json", "unique", "list", "--after", "g:tenant-42").stdout)[0].JobID
	mustCLI(t, db, "jobs", "cancel", itoa(id))
	if r := mustCLI(t, db, "unique", "release", "welcome", "--scope", "queue", "--queue", "mail"); !strings.Contains(r.stdout, "released from job") {
		t.Fatalf("release after cancel: %s", r)
	}
}
