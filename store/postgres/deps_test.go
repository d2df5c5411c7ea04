package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/internal/depstest"
	"github.com/backlogq/backlog/store/internal/upgradetest"
	"github.com/jackc/pgx/v5"
)

var depNow = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func depJob(queue string) contract.InsertParams {
	return contract.InsertParams{Queue: queue, Kind: "k", Args: json.RawMessage(`{}`), Priority: 5, MaxAttempts: 3, RunAt: depNow}
}

// claimFinish claims job id (the only due job of its queue) and applies
// outcome kind k to it.
func claimFinish(t *testing.T, s *Store, queue string, id int64, k contract.OutcomeKind) {
	t.Helper()
	ctx := context.Background()
	got, err := s.Claim(ctx, contract.ClaimParams{Queue: queue, WorkerID: "w", Limit: 1, Now: depNow, LeaseUntil: depNow.Add(time.Minute)})
	if err != nil || len(got) != 1 || got[0].ID != id {
		t.Fatalf("claim of queue %s: %d jobs, %v; want job %d", queue, len(got), err, id)
	}
	res, err := s.Finish(ctx, []contract.Outcome{{JobID: id, WorkerID: "w", ClaimSeq: got[0].ClaimSeq, Attempt: got[0].Attempt, Kind: k, At: depNow, RunAt: depNow}})
	if err != nil || !res[0].Applied {
		t.Fatalf("finish of job %d: %v %+v", id, err, res)
	}
}

// countStates returns the number of jobs of the store by state.
func countStates(t *testing.T, s *Store) map[string]int {
	t.Helper()
	rows, err := s.Pool().Query(context.Background(), "SELECT state, count(*) FROM "+s.Schema()+".jobs GROUP BY state")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			t.Fatal(err)
		}
		out[st] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDependencyChainCancels: cancelling the root of a chain of 10,000
// steps cancels every step in the cancel's transaction, without
// recursion (the settle trigger runs one level per round of its loop).
func TestDependencyChainCancels(t *testing.T) {
	s := newTestStore(t)
	ctx := context.Background()
	const n = 10_000
	ps := make([]contract.InsertParams, n)
	for i := range ps {
		ps[i] = depJob("chain")
		if i > 0 {
			ps[i].DependsOnIndex = []int{i - 1}
		}
	}
	start := time.Now()
	res, err := s.Insert(ctx, depNow, ps)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("insert of a chain of %d: %v", n, time.Since(start))
	if c := countStates(t, s); c["waiting"] != n-1 || c["available"] != 1 {
		t.Fatalf("after the insert: %v; want %d waiting and the root available", c, n-1)
	}
	start = time.Now()
	if _, err := s.Cancel(ctx, res[0].Job.ID, depNow); err != nil {
		t.Fatal(err)
	}
	t.Logf("cancel of the root: %v", time.Since(start))
	if c := countStates(t, s); c["cancelled"] != n {
		t.Fatalf("after the root's cancel: %v; want all %d cancelled", c, n)
	}
	last, err := s.Get(ctx, res[n-1].Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(last.Errors) != 1 || last.Errors[0].Cause != contract.CauseDependency ||
		last.Errors[0].Error != "dependency job "+strconv.FormatInt(res[n-2].Job.ID, 10)+" ended cancelled" ||
		!last.FinishedAt.Equal(depNow) || last.WaitingFor != 0 || last.DependencyEnds != (contract.DependencyEnds{Cancelled: 1}) {
		t.Fatalf("the chain's last step: %+v", last)
	}
}

// TestDependencyManyEdges: a batch of 100,000 jobs and a callback that
// depends on all of them, in one Insert call; the callback waits for
// 100,000 and reads its dependencies back whole, and a job inserted later
// may depend on 100,000 jobs by id.
func TestDependencyManyEdges(t *testing.T) {
	if testing.Short() {
		t.Skip("100,000 edges")
	}
	s := newTestStore(t)
	ctx := context.Background()
	const n = contract.MaxDependencies
	ps := make([]contract.InsertParams, n+1)
	for i := range n {
		ps[i] = depJob("batch")
		ps[i].InWorkflow = true
	}
	ps[n] = depJob("callback")
	ps[n].Step = "callback"
	ps[n].OnDependencyFailure = contract.DependencyRun
	ps[n].DependsOnIndex = make([]int, n)
	for i := range n {
		ps[n].DependsOnIndex[i] = i
	}
	start := time.Now()
	res, err := s.Insert(ctx, depNow, ps)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("insert of %d jobs and a callback depending on them: %v", n, time.Since(start))
	cb := res[n].Job
	if cb.State != contract.StateWaiting || cb.WaitingFor != n || len(cb.DependsOn) != n || cb.WorkflowID != res[0].Job.ID {
		t.Fatalf("the callback: state %s waiting for %d, %d dependencies, workflow %d; want waiting for %d, workflow %d",
			cb.State, cb.WaitingFor, len(cb.DependsOn), cb.WorkflowID, n, res[0].Job.ID)
	}
	got, err := s.Get(ctx, cb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.DependsOn, cb.DependsOn) {
		t.Fatalf("Get returned %d dependencies; want the %d inserted", len(got.DependsOn), n)
	}
	ids := make([]int64, n)
	for i := range n {
		ids[i] = res[i].Job.ID
	}
	p := depJob("later")
	p.DependsOn = ids
	start = time.Now()
	later, err := s.Insert(ctx, depNow, []contract.InsertParams{p})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("insert of a job depending on %d jobs by id: %v", n, time.Since(start))
	if later[0].Job.WaitingFor != n {
		t.Fatalf("the later job waits for %d; want %d", later[0].Job.WaitingFor, n)
	}
}

// TestDependencyNotifications: a release sends the insert notification
// of the released job's queue, and the jobs a cascade cancels are in
// finish notifications, when the change commits.
func TestDependencyNotifications(t *testing.T) {
	s := newTestStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// a ← b (released); root2 ← c ← d (cancelled)
	a, b, root2, c, d := depJob("root"), depJob("released"), depJob("root2"), depJob("x"), depJob("x")
	b.DependsOnIndex, c.DependsOnIndex, d.DependsOnIndex = []int{0}, []int{0}, []int{1}
	res, err := s.Insert(ctx, depNow, []contract.InsertParams{root2, c, d})
	if err != nil {
		t.Fatal(err)
	}
	cascade := []int64{res[1].Job.ID, res[2].Job.ID}
	res2, err := s.Insert(ctx, depNow, []contract.InsertParams{a, b})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := s.Listen(ctx)
	if err != nil {
		t.Fatal(err)
	}
	claimFinish(t, s, "root", res2[0].Job.ID, contract.OutcomeComplete)
	claimFinish(t, s, "root2", res[0].Job.ID, contract.OutcomeDiscard)
	var inserted bool
	var finished []int64
	heardAll := func() bool {
		return slices.Contains(finished, cascade[0]) && slices.Contains(finished, cascade[1])
	}
	for !inserted || !heardAll() {
		select {
		case n, ok := <-ch:
			if !ok {
				t.Fatal("listen channel closed")
			}
			switch {
			case n.Kind == contract.NotifyInsert && n.Queue == "released":
				inserted = true
			case n.Kind == contract.NotifyFinish:
				finished = append(finished, n.JobID)
			}
		case <-ctx.Done():
			t.Fatalf("heard the insert of queue released: %v, finishes %v; want the insert and the finishes of %v, cancelled by the cascade", inserted, finished, cascade)
		}
	}
}

// TestDependencyCompleteTx: a completion in the caller's transaction
// releases the dependant when it commits, and not when it rolls back.
func TestDependencyCompleteTx(t *testing.T) {
	s := newTestStore(t)
	ctx := context.Background()
	a, b := depJob("a"), depJob("b")
	b.DependsOnIndex = []int{0}
	res, err := s.Insert(ctx, depNow, []contract.InsertParams{a, b})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Claim(ctx, contract.ClaimParams{Queue: "a", WorkerID: "w", Limit: 1, Now: depNow, LeaseUntil: depNow.Add(time.Minute)})
	if err != nil || len(got) != 1 {
		t.Fatalf("claim: %v %d", err, len(got))
	}
	o := contract.Outcome{JobID: got[0].ID, WorkerID: "w", ClaimSeq: got[0].ClaimSeq, Attempt: got[0].Attempt, Kind: contract.OutcomeComplete, At: depNow}
	for _, commit := range []bool{false, true} {
		err := pgx.BeginFunc(ctx, s.Pool(), func(tx pgx.Tx) error {
			if err := s.CompleteTx(ctx, tx, o); err != nil {
				return err
			}
			if !commit {
				return errors.New("roll back")
			}
			return nil
		})
		if commit != (err == nil) {
			t.Fatalf("CompleteTx (commit %v): %v", commit, err)
		}
		j, err := s.Get(ctx, res[1].Job.ID)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]contract.State{false: contract.StateWaiting, true: contract.StateAvailable}[commit]; j.State != want {
			t.Fatalf("dependant after a CompleteTx that was committed: %v: state %s; want %s", commit, j.State, want)
		}
	}
}

// TestDependencyStdlibTx: InsertTx on a *sql.Tx of pgx's stdlib driver
// inserts a dependant, which Cancel then cancels.
func TestDependencyStdlibTx(t *testing.T) {
	s := newTestStore(t)
	ctx := context.Background()
	db := stdlibDB(s)
	defer db.Close()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, b := depJob("a"), depJob("b")
	b.DependsOnIndex, b.Step = []int{0}, "b"
	res, err := s.InsertTx(ctx, tx, depNow, []contract.InsertParams{a, b})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if j := res[1].Job; j.State != contract.StateWaiting || j.WaitingFor != 1 || j.WorkflowID != j.ID {
		t.Fatalf("InsertTx on a *sql.Tx: %+v", j)
	}
	j, err := s.Cancel(ctx, res[1].Job.ID, depNow)
	if err != nil {
		t.Fatal(err)
	}
	if j.State != contract.StateCancelled {
		t.Fatalf("a waiting job cancelled: state %s; want cancelled", j.State)
	}
}

// TestDependencyOnDuplicate: a job that names by index an input whose
// unique key is held depends on the holder.
func TestDependencyOnDuplicate(t *testing.T) {
	s := newTestStore(t)
	ctx := context.Background()
	holder := depJob("u")
	holder.UniqueKey = "k1"
	first, err := s.Insert(ctx, depNow, []contract.InsertParams{holder})
	if err != nil {
		t.Fatal(err)
	}
	dup, after := depJob("u"), depJob("after")
	dup.UniqueKey = "k1"
	after.DependsOnIndex = []int{0}
	res, err := s.Insert(ctx, depNow, []contract.InsertParams{dup, after})
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].Duplicate || !slices.Equal(res[1].Job.DependsOn, []int64{first[0].Job.ID}) || res[1].Job.State != contract.StateWaiting {
		t.Fatalf("insert after the holder: duplicate %v, dependant %+v; want it waiting for the holder %d", res[0].Duplicate, res[1].Job, first[0].Job.ID)
	}
	claimFinish(t, s, "u", first[0].Job.ID, contract.OutcomeComplete)
	if j, err := s.Get(ctx, res[1].Job.ID); err != nil || j.State != contract.StateAvailable {
		t.Fatalf("the dependant after the holder completed: %+v %v", j, err)
	}

	// A key repeated within the call: the input repeating it stands for
	// the first one's job.
	one, again, after2 := depJob("u2"), depJob("u2"), depJob("after2")
	one.UniqueKey, again.UniqueKey = "k2", "k2"
	after2.DependsOnIndex = []int{1}
	res, err = s.Insert(ctx, depNow, []contract.InsertParams{one, again, after2})
	if err != nil {
		t.Fatal(err)
	}
	if !res[1].Duplicate || !slices.Equal(res[2].Job.DependsOn, []int64{res[0].Job.ID}) {
		t.Fatalf("a job naming the repeat of a key of its call: duplicate %v, depends on %v; want [%d]", res[1].Duplicate, res[2].Job.DependsOn, res[0].Job.ID)
	}
	claimFinish(t, s, "u2", res[0].Job.ID, contract.OutcomeComplete)
	if j, err := s.Get(ctx, res[2].Job.ID); err != nil || j.State != contract.StateAvailable {
		t.Fatalf("the dependant after the key's first job completed: %+v %v", j, err)
	}
}

// TestDependencySettleTriggersSkipOrdinaryJobs: the only triggers on
// jobs are the two settle triggers, AFTER triggers whose WHEN clauses
// test has_dependants, and the edges trigger, an AFTER DELETE trigger
// whose WHEN clause tests dep_count, so finishing or deleting jobs
// without dependencies or dependants never calls a function (and no
// BEFORE row trigger makes every update fetch and lock its row first).
func TestDependencySettleTriggersSkipOrdinaryJobs(t *testing.T) {
	s := newTestStore(t)
	ctx := context.Background()
	var when []string
	rows, err := s.Pool().Query(ctx, "SELECT pg_get_triggerdef(oid) FROM pg_trigger WHERE tgrelid = $1::regclass AND NOT tgisinternal", s.Schema()+".jobs")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var def string
		if err := rows.Scan(&def); err != nil {
			t.Fatal(err)
		}
		when = append(when, def)
	}
	var settle, edges int
	for _, def := range when {
		switch {
		case strings.Contains(def, "settle_dependants"):
			settle++
			if !strings.Contains(def, "AFTER") || !strings.Contains(def, "WHEN ((old.has_dependants") {
				t.Fatalf("trigger %q is not an AFTER trigger testing has_dependants first", def)
			}
		case strings.Contains(def, "dependency_edges_gone"):
			edges++
			if !strings.Contains(def, "AFTER DELETE") || !strings.Contains(def, "WHEN ((old.dep_count > 0))") {
				t.Fatalf("trigger %q is not an AFTER DELETE trigger testing dep_count", def)
			}
		default:
			t.Fatalf("unknown trigger on jobs: %q", def)
		}
	}
	if settle != 2 || edges != 1 {
		t.Fatalf("triggers on jobs: %q; want the two settle triggers and the edges trigger", when)
	}
}

// TestDependencyCascadeGraph: a failed root cancels the jobs under the
// cancel policy below it, once each however many paths lead to them,
// counting one end; the jobs under the run policy count every cancelled
// dependency and are released, and what waits for them keeps waiting.
func TestDependencyCascadeGraph(t *testing.T) {
	s := newTestStore(t)
	ctx := context.Background()
	// a ← b, a ← c, (b, c) ← d, d ← r (run), (b, c) ← r2 (run), r2 ← e
	ps := make([]contract.InsertParams, 7)
	for i := range ps {
		ps[i] = depJob("g")
	}
	ps[0].Queue = "g-root"
	ps[1].DependsOnIndex, ps[2].DependsOnIndex, ps[3].DependsOnIndex = []int{0}, []int{0}, []int{1, 2}
	ps[4].DependsOnIndex, ps[4].OnDependencyFailure = []int{3}, contract.DependencyRun
	ps[5].DependsOnIndex, ps[5].OnDependencyFailure = []int{1, 2}, contract.DependencyRun
	ps[6].DependsOnIndex = []int{5}
	res, err := s.Insert(ctx, depNow, ps)
	if err != nil {
		t.Fatal(err)
	}
	claimFinish(t, s, "g-root", res[0].Job.ID, contract.OutcomeDiscard)
	want := []struct {
		state contract.State
		ends  contract.DependencyEnds
		dep   int
	}{
		{contract.StateDiscarded, contract.DependencyEnds{}, -1},
		{contract.StateCancelled, contract.DependencyEnds{Discarded: 1}, 0},
		{contract.StateCancelled, contract.DependencyEnds{Discarded: 1}, 0},
		{contract.StateCancelled, contract.DependencyEnds{Cancelled: 1}, 1},
		{contract.StateAvailable, contract.DependencyEnds{Cancelled: 1}, -1},
		{contract.StateAvailable, contract.DependencyEnds{Cancelled: 2}, -1},
		{contract.StateWaiting, contract.DependencyEnds{}, -1},
	}
	for i, w := range want {
		j, err := s.Get(ctx, res[i].Job.ID)
		if err != nil {
			t.Fatal(err)
		}
		if j.State != w.state || j.DependencyEnds != w.ends {
			t.Fatalf("job %d of the graph: state %s, ends %+v; want %s, %+v", i, j.State, j.DependencyEnds, w.state, w.ends)
		}
		if w.dep >= 0 {
			if n := len(j.Errors); n != 1 || !strings.HasSuffix(j.Errors[0].Error, " "+strconv.FormatInt(res[w.dep].Job.ID, 10)+" ended "+map[bool]string{true: "discarded", false: "cancelled"}[w.dep == 0]) {
				t.Fatalf("job %d of the graph: errors %+v; want one naming job %d", i, j.Errors, res[w.dep].Job.ID)
			}
		}
	}
}

// TestDependencyEdgesGoWithTheirJob: a job's dependency edges are deleted
// with it however it leaves the jobs table for good (the triggers of
// schema version 19), and kept while it is archived
// (depstest.RunEdgesGone).
func TestDependencyEdgesGoWithTheirJob(t *testing.T) {
	s := newTestStore(t)
	depstest.RunEdgesGone(t, s, func(t *testing.T) int {
		var n int
		if err := s.Pool().QueryRow(context.Background(), "SELECT count(*) FROM "+s.Schema()+".job_deps").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	})
}

// TestMigrateUpgradeDependencyEdges runs upgradetest.RunDependencyEdges
// from the schema below version 19: versions 19 (the triggers) and 20
// forget the edges of jobs already gone and keep the others.
func TestMigrateUpgradeDependencyEdges(t *testing.T) {
	upgradetest.RunDependencyEdges(t, upgradeBackend(t), 19)
}
