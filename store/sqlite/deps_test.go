package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/internal/depstest"
)

// claimFinish claims job j (the only due job of its queue) at t0 and
// finishes it with kind k (and deletes it when del).
func claimFinish(t *testing.T, s *Store, j *contract.Job, k contract.OutcomeKind, del bool) {
	t.Helper()
	ctx := context.Background()
	got, err := s.Claim(ctx, contract.ClaimParams{Queue: j.Queue, WorkerID: "w", Limit: 1, Now: t0, LeaseUntil: t0.Add(time.Minute)})
	if err != nil || len(got) != 1 || got[0].ID != j.ID {
		t.Fatalf("claim of job %d: %d jobs, %v", j.ID, len(got), err)
	}
	c := got[0]
	res, err := s.Finish(ctx, []contract.Outcome{{JobID: c.ID, WorkerID: c.WorkerID, ClaimSeq: c.ClaimSeq, Attempt: c.Attempt, Kind: k, At: t0, RunAt: t0, Delete: del}})
	if err != nil || !res[0].Applied {
		t.Fatalf("finish of job %d: %+v, %v", j.ID, res, err)
	}
}

// TestDependencyChainCancelsWithoutRecursion: a cancelled root cancels a
// chain of 10,000 steps that each wait for the one before, in the one
// statement that cancelled it (the triggers' cascade is one recursive
// query, not 10,000 nested trigger runs, which SQLite caps at 1000);
// 1,500 (more than 1000) under the race detector.
func TestDependencyChainCancelsWithoutRecursion(t *testing.T) {
	n := 10_000
	if raceEnabled {
		n = 1_500
	}
	s := openTest(t)
	ctx := context.Background()
	ps := make([]contract.InsertParams, n+1)
	for i := range ps {
		ps[i] = job("chain", "k")
		if i > 0 {
			ps[i].DependsOnIndex = []int{i - 1}
		}
	}
	got := insert(t, s, ps...)
	if last := got[n].Job; last.State != contract.StateWaiting || last.WaitingFor != 1 {
		t.Fatalf("the last step inserted %s waiting for %d; want waiting for 1", last.State, last.WaitingFor)
	}
	start := time.Now()
	if _, err := s.Cancel(ctx, got[0].Job.ID, t0); err != nil {
		t.Fatal(err)
	}
	t.Logf("a cancel of the root of a %d-step chain took %v", n, time.Since(start))
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c := st[0].Counts; c[contract.StateCancelled] != n+1 || c[contract.StateWaiting] != 0 {
		t.Fatalf("after the cancel of the root: %v; want all %d jobs cancelled", c, n+1)
	}
	last, err := s.Get(ctx, got[n].Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if e := last.Errors[len(last.Errors)-1]; e.Cause != contract.CauseDependency || !strings.Contains(e.Error, "ended cancelled") ||
		last.DependencyEnds != (contract.DependencyEnds{Cancelled: 1}) || !last.FinishedAt.Equal(t0) {
		t.Fatalf("the last step: %+v, ends %+v, finished %v; want cancelled by its dependency at %v", e, last.DependencyEnds, last.FinishedAt, t0)
	}
	var open int
	if err := s.DB().QueryRow("SELECT COUNT(*) FROM " + s.Prefix() + "job_deps WHERE NOT settled").Scan(&open); err != nil || open != 0 {
		t.Fatalf("%d edges left unsettled (%v); want none", open, err)
	}
}

// TestDependenciesOverTheStatementLimits: a job depending on more jobs
// than one statement of the insert binds ids or edges for (idChunk,
// edgeChunk), by index and by id, is inserted with every edge and reads
// back waiting for all. (contract.MaxDependencies, ten times as many,
// took 3.3 s by index and 1.5 s by id here; internal/bench's
// TestWorkflowScale measures it.)
func TestDependenciesOverTheStatementLimits(t *testing.T) {
	const n = max(idChunk, edgeChunk) + 1
	s := openTest(t)
	ctx := context.Background()
	ps := make([]contract.InsertParams, n+1)
	for i := range n {
		ps[i] = job("many", "k")
	}
	ps[n] = job("callback", "k")
	for i := range n {
		ps[n].DependsOnIndex = append(ps[n].DependsOnIndex, i)
	}
	ps[n].OnDependencyFailure = contract.DependencyRun
	start := time.Now()
	got := insert(t, s, ps...)
	t.Logf("an insert of %d jobs and one depending on all of them by index took %v", n, time.Since(start))
	ids := make([]int64, n)
	for i := range n {
		ids[i] = got[i].Job.ID
	}
	byID := job("callback", "k")
	byID.DependsOn = ids
	start = time.Now()
	res, err := s.Insert(ctx, t0, []contract.InsertParams{byID})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("an insert of a job depending on %d ids took %v", n, time.Since(start))
	for _, id := range []int64{got[n].Job.ID, res[0].Job.ID} {
		j, err := s.Get(ctx, id)
		if err != nil || j.State != contract.StateWaiting || j.WaitingFor != n || !slices.Equal(j.DependsOn, ids) {
			t.Fatalf("job %d read back: %v; want it waiting for all %d jobs", id, err, n)
		}
	}
	var marked int
	if err := s.DB().QueryRow("SELECT COUNT(*) FROM " + s.Prefix() + "jobs WHERE queue = 'many' AND has_dependants").Scan(&marked); err != nil || marked != n {
		t.Fatalf("%d of the %d dependencies marked has_dependants (%v)", marked, n, err)
	}
	claimFinish(t, s, got[0].Job, contract.OutcomeComplete, false)
	if j, err := s.Get(ctx, res[0].Job.ID); err != nil || j.WaitingFor != n-1 || j.DependencyEnds.Completed != 1 {
		t.Fatalf("the job depending on %d ids after one completed: %+v, %v; want waiting for %d", n, j, err, n-1)
	}
}

// TestDependencyReleaseNotifies: a release sends NotifyInsert for the
// released job's queue to the listeners of every handle, as an insert of
// a due job does.
func TestDependencyReleaseNotifies(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	path := filepath.Join(t.TempDir(), "n.db")
	a, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	root := insert(t, b, job("root", "k"))[0].Job
	after := job("released", "k")
	after.DependsOn = []int64{root.ID}
	insert(t, b, after)
	ch, err := a.Listen(ctx)
	if err != nil {
		t.Fatal(err)
	}
	claimFinish(t, b, root, contract.OutcomeComplete, true)
	for {
		select {
		case n := <-ch:
			if n.Kind == contract.NotifyInsert && n.Queue == "released" {
				return
			}
		case <-ctx.Done():
			t.Fatal("no NotifyInsert for the queue of the released job")
		}
	}
}

// TestDependenciesWithRecursiveTriggers: a database/sql handle whose
// connections turn recursive_triggers on (New takes a caller's handle)
// settles as Open's does: the cascade's own cancels do not run the
// triggers again.
func TestDependenciesWithRecursiveTriggers(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("sqlite", DSN(filepath.Join(t.TempDir(), "r.db"), DefaultBusyTimeout)+"&_pragma=recursive_triggers(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s, err := New(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	var on int
	if err := db.QueryRow("PRAGMA recursive_triggers").Scan(&on); err != nil || on != 1 {
		t.Fatalf("recursive_triggers is %d (%v); want 1", on, err)
	}
	// a ← b ← c, b ← d (run), a ← e (run)
	ps := []contract.InsertParams{job("root", "k"), job("deps", "k"), job("deps", "k"), job("deps", "k"), job("deps", "k")}
	ps[1].DependsOnIndex, ps[2].DependsOnIndex, ps[3].DependsOnIndex, ps[4].DependsOnIndex = []int{0}, []int{1}, []int{1}, []int{0}
	ps[3].OnDependencyFailure, ps[4].OnDependencyFailure = contract.DependencyRun, contract.DependencyRun
	got := insert(t, s, ps...)
	claimFinish(t, s, got[0].Job, contract.OutcomeDiscard, false)
	for i, want := range []struct {
		state contract.State
		ends  contract.DependencyEnds
	}{
		{contract.StateDiscarded, contract.DependencyEnds{}},
		{contract.StateCancelled, contract.DependencyEnds{Discarded: 1}},
		{contract.StateCancelled, contract.DependencyEnds{Cancelled: 1}},
		{contract.StateAvailable, contract.DependencyEnds{Cancelled: 1}},
		{contract.StateAvailable, contract.DependencyEnds{Discarded: 1}},
	} {
		j, err := s.Get(ctx, got[i].Job.ID)
		if err != nil {
			t.Fatal(err)
		}
		if j.State != want.state || j.DependencyEnds != want.ends || len(j.Errors) > 1 {
			t.Errorf("job %d: %s with ends %+v and %d error entries; want %s with %+v and at most one entry", i, j.State, j.DependencyEnds, len(j.Errors), want.state, want.ends)
		}
	}
}

// TestDependencyEdgesGoWithTheirJob: the edges of a job deleted for good
// are deleted with it; an archived job keeps them, and its DependsOn.
func TestDependencyEdgesGoWithTheirJob(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	root := insert(t, s, job("root", "k"))[0].Job
	gone, kept := job("deps", "k"), job("kept", "k")
	gone.DependsOn, kept.DependsOn = []int64{root.ID}, []int64{root.ID}
	kept.OnDependencyFailure = contract.DependencyRun
	res := insert(t, s, gone, kept)
	edges := func() int {
		var n int
		if err := s.DB().QueryRow("SELECT COUNT(*) FROM " + s.Prefix() + "job_deps").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if err := s.Delete(ctx, res[0].Job.ID); err != nil {
		t.Fatal(err)
	}
	if n := edges(); n != 1 {
		t.Fatalf("%d edges after the delete of a waiting job; want 1, the other job's", n)
	}
	claimFinish(t, s, root, contract.OutcomeComplete, false)
	claimFinish(t, s, res[1].Job, contract.OutcomeComplete, false)
	if n, err := s.Archive(ctx, contract.StateCompleted, t0.Add(time.Hour), 10); err != nil || n != 2 {
		t.Fatalf("archived %d jobs, %v; want 2", n, err)
	}
	if j, err := s.GetArchived(ctx, res[1].Job.ID); err != nil || len(j.DependsOn) != 1 || j.DependsOn[0] != root.ID {
		t.Fatalf("archived job read back: %+v, %v; want DependsOn [%d]", j, err, root.ID)
	}
	if n, err := s.PruneArchive(ctx, t0.Add(time.Hour), 10); err != nil || n != 2 {
		t.Fatalf("pruned %d archived jobs, %v; want 2", n, err)
	}
	if n := edges(); n != 0 {
		t.Fatalf("%d edges once every job is gone; want none", n)
	}
}

// TestDependencyEdgesGoWithTheirJobEveryWay: the shared scenario of the
// SQL stores (depstest.RunEdgesGone): an admin delete, a completion with
// Delete, Prune, and Archive then PruneArchive.
func TestDependencyEdgesGoWithTheirJobEveryWay(t *testing.T) {
	s := openTest(t)
	depstest.RunEdgesGone(t, s, func(t *testing.T) int {
		var n int
		if err := s.DB().QueryRow("SELECT COUNT(*) FROM " + s.Prefix() + "job_deps").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	})
}

// TestDependencyOnADuplicate: DependsOnIndex naming an input that was a
// duplicate depends on the job holding its unique key, whether an
// earlier input of the same call or a job from before; either releases
// the dependant when it completes.
func TestDependencyOnADuplicate(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	keyed := func(key string) contract.InsertParams {
		p := job("held", "k")
		p.UniqueKey = key
		return p
	}
	holder := insert(t, s, keyed("old"))[0].Job
	onOld := job("deps", "k")
	onOld.DependsOnIndex = []int{0}
	got := insert(t, s, keyed("old"), onOld)
	if !got[0].Duplicate || got[0].Job.ID != holder.ID || got[1].Job.State != contract.StateWaiting || !slices.Equal(got[1].Job.DependsOn, []int64{holder.ID}) {
		t.Fatalf("a job depending on a duplicate of job %d: %+v; want it waiting for the holder", holder.ID, got[1].Job)
	}
	p := job("deps", "k")
	p.DependsOnIndex = []int{1}
	res := insert(t, s, keyed("same"), keyed("same"), p)
	if !res[1].Duplicate || res[2].Job.State != contract.StateWaiting || !slices.Equal(res[2].Job.DependsOn, []int64{res[0].Job.ID}) {
		t.Fatalf("a job depending on a repeat of an earlier input's key: %+v; want it waiting for job %d", res[2].Job, res[0].Job.ID)
	}
	claimFinish(t, s, holder, contract.OutcomeComplete, false)
	claimFinish(t, s, res[0].Job, contract.OutcomeComplete, false)
	for _, id := range []int64{got[1].Job.ID, res[2].Job.ID} {
		if j, err := s.Get(ctx, id); err != nil || j.State != contract.StateAvailable {
			t.Fatalf("job %d after its dependency completed: %+v, %v; want available", id, j, err)
		}
	}
}
