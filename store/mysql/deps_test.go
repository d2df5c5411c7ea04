package mysql

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/internal/depstest"
	"github.com/backlogq/backlog/storetest/dbtest"
)

// depsStore opens a migrated store on a database of its own.
func depsStore(t *testing.T, opts ...Option) *Store {
	t.Helper()
	s, err := Open(context.Background(), dbtest.MySQLDSN(t), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// finishOne claims the only due job of queue and finishes it with kind.
func finishOne(t *testing.T, s *Store, queue string, now time.Time, kind contract.OutcomeKind) *contract.Job {
	t.Helper()
	ctx := context.Background()
	got, err := s.Claim(ctx, contract.ClaimParams{Queue: queue, WorkerID: "w", Limit: 1, Now: now, LeaseUntil: now.Add(time.Minute)})
	if err != nil || len(got) != 1 {
		t.Fatalf("Claim of queue %s: %d jobs, %v; want 1", queue, len(got), err)
	}
	j := got[0]
	res, err := s.Finish(ctx, []contract.Outcome{{JobID: j.ID, WorkerID: "w", ClaimSeq: j.ClaimSeq, Attempt: j.Attempt, Kind: kind, At: now}})
	if err != nil || !res[0].Applied {
		t.Fatalf("Finish of job %d: %+v, %v", j.ID, res, err)
	}
	return j
}

// TestDependencyChainCancels: a failed root cancels a chain of 10,000
// steps in the transaction of its end, one settle round per step, with no
// recursion.
func TestDependencyChainCancels(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode")
	}
	const n = 10_000
	s := depsStore(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Microsecond)
	ps := make([]contract.InsertParams, n+1)
	for i := range ps {
		ps[i] = contract.InsertParams{Queue: "chain", Kind: "k", Args: []byte("{}"), MaxAttempts: 1, RunAt: now}
		if i > 0 {
			ps[i].DependsOnIndex = []int{i - 1}
		}
	}
	got, err := s.Insert(ctx, now, ps)
	if err != nil {
		t.Fatal(err)
	}
	if last := got[n].Job; last.State != contract.StateWaiting || last.WaitingFor != 1 || len(last.DependsOn) != 1 || last.DependsOn[0] != got[n-1].Job.ID {
		t.Fatalf("the chain's last job: state %s waiting for %d depends on %v; want waiting for 1, on job %d", last.State, last.WaitingFor, last.DependsOn, got[n-1].Job.ID)
	}
	start := time.Now()
	finishOne(t, s, "chain", now, contract.OutcomeDiscard)
	t.Logf("a discard that cancels a chain of %d: %s", n, time.Since(start))
	stats, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c := stats[0].Counts; c[contract.StateCancelled] != n || c[contract.StateWaiting] != 0 {
		t.Fatalf("after the root's discard: counts %v; want %d cancelled, none waiting", c, n)
	}
	j, err := s.Get(ctx, got[n].Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(j.Errors) != 1 || j.Errors[0].Cause != contract.CauseDependency || j.Errors[0].Error != fmt.Sprintf("dependency job %d ended cancelled", got[n-1].Job.ID) {
		t.Fatalf("the last step's errors: %+v", j.Errors)
	}
}

// TestDependencyManyEdges: a job depending on 100,000 jobs (a batch's
// callback) is inserted, read back whole, and counts the end of one.
func TestDependencyManyEdges(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode")
	}
	const n = contract.MaxDependencies
	s := depsStore(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Microsecond)
	ps := make([]contract.InsertParams, n)
	for i := range ps {
		ps[i] = contract.InsertParams{Queue: "batch", Kind: "k", Args: []byte("{}"), MaxAttempts: 1, RunAt: now, InWorkflow: true}
	}
	got, err := s.Insert(ctx, now, ps)
	if err != nil {
		t.Fatal(err)
	}
	cb := contract.InsertParams{Queue: "callback", Kind: "k", Args: []byte("{}"), MaxAttempts: 1, RunAt: now}
	for _, r := range got {
		cb.DependsOn = append(cb.DependsOn, r.Job.ID)
	}
	start := time.Now()
	res, err := s.Insert(ctx, now, []contract.InsertParams{cb})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("insert of a job with %d dependencies: %s", n, time.Since(start))
	j, err := s.Get(ctx, res[0].Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if j.State != contract.StateWaiting || j.WaitingFor != n || len(j.DependsOn) != n {
		t.Fatalf("the callback read back: state %s waiting for %d, %d dependencies; want waiting for %d", j.State, j.WaitingFor, len(j.DependsOn), n)
	}
	finishOne(t, s, "batch", now, contract.OutcomeComplete)
	j, err = s.Get(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if j.State != contract.StateWaiting || j.WaitingFor != n-1 || j.DependencyEnds.Completed != 1 || j.WorkflowID != 0 {
		t.Fatalf("the callback after one dependency completed: state %s waiting for %d ends %+v workflow %d; want waiting for %d, 1 completed, no workflow",
			j.State, j.WaitingFor, j.DependencyEnds, j.WorkflowID, n-1)
	}
	if b, _ := s.Get(ctx, got[5].Job.ID); b.WorkflowID != got[0].Job.ID {
		t.Fatalf("a batch job's workflow id %d; want %d", b.WorkflowID, got[0].Job.ID)
	}
}

// TestDependencyFinishWithoutDependants: a finish leaves the session's
// LAST_INSERT_ID() alone unless a job that ended has dependants (the
// update reports them through it, at no extra statement), and a finish
// of one that has settles them.
func TestDependencyFinishWithoutDependants(t *testing.T) {
	ctx := context.Background()
	dsn := dbtest.MySQLDSN(t)
	m, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	// One connection, so that the test reads the finishes' session.
	s, err := Open(ctx, dsn, WithMigrate(false), WithMaxOpenConns(1), WithNotifyInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Now().UTC().Truncate(time.Microsecond)
	if _, err := s.Insert(ctx, now, []contract.InsertParams{{Queue: "plain", Kind: "k", Args: []byte("{}"), MaxAttempts: 1, RunAt: now}}); err != nil {
		t.Fatal(err)
	}
	lastID := func() int64 {
		var id int64
		if err := s.db.QueryRowContext(ctx, "SELECT LAST_INSERT_ID()").Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	before := lastID()
	j := finishOne(t, s, "plain", now, contract.OutcomeComplete)
	if got := lastID(); got != before {
		t.Fatalf("LAST_INSERT_ID() is %d after the finish of job %d without dependants; want %d as before", got, j.ID, before)
	}
	got, err := s.Insert(ctx, now, []contract.InsertParams{
		{Queue: "dep", Kind: "k", Args: []byte("{}"), MaxAttempts: 1, RunAt: now},
		{Queue: "after", Kind: "k", Args: []byte("{}"), MaxAttempts: 1, RunAt: now, DependsOnIndex: []int{0}},
	})
	if err != nil {
		t.Fatal(err)
	}
	finishOne(t, s, "dep", now, contract.OutcomeComplete)
	if a, err := s.Get(ctx, got[1].Job.ID); err != nil || a.State != contract.StateAvailable {
		t.Fatalf("the dependant after its dependency completed: %+v, %v; want available", a, err)
	}
}

// TestDependencyEdgesGoWithTheirJob: a job's dependency edges are deleted
// with it however it leaves the jobs table for good (Config.DeleteEdges,
// finishDelete), and kept while it is archived (depstest.RunEdgesGone),
// with MariaDB's and MySQL's statement forms.
func TestDependencyEdgesGoWithTheirJob(t *testing.T) {
	for _, noReturning := range []bool{false, true} {
		t.Run(fmt.Sprintf("noReturning=%v", noReturning), func(t *testing.T) {
			s := depsStore(t, func(c *config) { c.noReturning = noReturning })
			depstest.RunEdgesGone(t, s, func(t *testing.T) int {
				var n int
				if err := s.DB().QueryRow("SELECT COUNT(*) FROM " + s.Prefix() + "job_deps").Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			})
		})
	}
}
