// Package depstest holds a test the SQL stores share of their dependency
// edges table (contract.Dependencies), which the contract cannot see: a
// job's own edges (the rows naming it as the job that waits) are deleted
// with the job, in every way a job leaves the jobs table for good, and
// kept while it is archived. It is imported only by _test files.
package depstest

import (
	"context"
	"testing"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

// Store is what RunEdgesGone uses of the store under test.
type Store interface {
	contract.Store
	contract.Archiver
}

// RunEdgesGone inserts, on a store of its own, a root job and five jobs
// that depend on it, then removes each dependant in one way: an admin
// Delete while it waits, a completion with Delete, Prune, and Archive
// followed by PruneArchive (the archived job reads back its DependsOn
// meanwhile). After each, edges (the rows of the store's dependency
// table, counted with raw SQL) must hold exactly the edges of the jobs
// still there, archived ones included.
func RunEdgesGone(t *testing.T, s Store, edges func(t *testing.T) int) {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	p := func(queue string, deps ...int64) contract.InsertParams {
		return contract.InsertParams{Queue: queue, Kind: "k", Args: []byte("{}"), MaxAttempts: 1, RunAt: now, DependsOn: deps}
	}
	root, err := s.Insert(ctx, now, []contract.InsertParams{p("edges-root")})
	if err != nil {
		t.Fatal(err)
	}
	rootID := root[0].Job.ID
	// Each dependant runs whatever its dependency's end, so an admin
	// delete of one leaves the others' states alone.
	queues := []string{"edges-deleted", "edges-finish-delete", "edges-pruned", "edges-archived", "edges-other"}
	ps := make([]contract.InsertParams, len(queues))
	for i, q := range queues {
		ps[i] = p(q, rootID)
		ps[i].OnDependencyFailure = contract.DependencyRun
	}
	got, err := s.Insert(ctx, now, ps)
	if err != nil {
		t.Fatal(err)
	}
	check := func(after string, want int) {
		t.Helper()
		if n := edges(t); n != want {
			t.Fatalf("after %s: %d dependency edges; want %d", after, n, want)
		}
	}
	check("the insert", 5)

	if err := s.Delete(ctx, got[0].Job.ID); err != nil {
		t.Fatal(err)
	}
	check("an admin delete of a waiting job", 4)

	run := func(queue string, del bool) {
		t.Helper()
		js, err := s.Claim(ctx, contract.ClaimParams{Queue: queue, WorkerID: "w", Limit: 1, Now: now, LeaseUntil: now.Add(time.Minute)})
		if err != nil || len(js) != 1 {
			t.Fatalf("claim of queue %s: %d jobs, %v; want 1", queue, len(js), err)
		}
		j := js[0]
		res, err := s.Finish(ctx, []contract.Outcome{{JobID: j.ID, WorkerID: "w", ClaimSeq: j.ClaimSeq, Attempt: j.Attempt, Kind: contract.OutcomeComplete, At: now, Delete: del}})
		if err != nil || len(res) != 1 || !res[0].Applied {
			t.Fatalf("finish of job %d: %+v, %v", j.ID, res, err)
		}
	}
	run("edges-root", false)
	run("edges-finish-delete", true)
	check("a completion with Delete", 3)

	run("edges-pruned", false)
	if n, err := s.Prune(ctx, contract.StateCompleted, now.Add(time.Second), 10); err != nil || n != 2 {
		t.Fatalf("pruned %d jobs, %v; want 2 (the root and one dependant)", n, err)
	}
	check("Prune", 2)

	run("edges-archived", false)
	if n, err := s.Archive(ctx, contract.StateCompleted, now.Add(time.Second), 10); err != nil || n != 1 {
		t.Fatalf("archived %d jobs, %v; want 1", n, err)
	}
	check("Archive (an archived job keeps its edges)", 2)
	if j, err := s.GetArchived(ctx, got[3].Job.ID); err != nil || len(j.DependsOn) != 1 || j.DependsOn[0] != rootID {
		t.Fatalf("archived job read back: %+v, %v; want DependsOn [%d]", j, err, rootID)
	}
	if n, err := s.PruneArchive(ctx, now.Add(time.Second), 10); err != nil || n != 1 {
		t.Fatalf("pruned %d archived jobs, %v; want 1", n, err)
	}
	check("PruneArchive", 1)
	if j, err := s.Get(ctx, got[4].Job.ID); err != nil || len(j.DependsOn) != 1 || j.DependsOn[0] != rootID {
		t.Fatalf("the last dependant read back: %+v, %v; want DependsOn [%d]", j, err, rootID)
	}
}
