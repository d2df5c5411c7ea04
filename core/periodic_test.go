package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/memory"
)

// periodicClient is a client over st with one periodic job and a manual
// clock; it is never started: the test drives EnqueuePeriodic.
func periodicClient(t *testing.T, st contract.Store, clock core.Clock, pj core.PeriodicJob) *core.Client {
	t.Helper()
	c, err := core.NewClient(st, core.Config{
		Logger: quietLogger(), Clock: clock, MaintenanceInterval: -1, Periodic: []core.PeriodicJob{pj},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Any number of nodes may enqueue an occurrence: exactly one job exists
// for it, and a node that looks again after the job completed (and its
// row was deleted) does not enqueue it twice.
func TestPeriodicOneJobPerOccurrence(t *testing.T) {
	ctx := context.Background()
	// A store without MutableSettings: nodes look back half the hold, and
	// only the unique keys' holds keep occurrences from running twice.
	st := plainStore{memory.New()}
	clock := core.NewManualClock(time.Date(2026, 3, 1, 10, 0, 0, 500_000_000, time.UTC))
	pj := core.PeriodicJob{Name: "tick", Schedule: "@every 1s", Kind: "tick"}
	nodes := []*core.Client{periodicClient(t, st, clock, pj), periodicClient(t, st, clock, pj), periodicClient(t, st, clock, pj)}
	total := 0
	for range 10 {
		for _, n := range nodes {
			created, err := n.EnqueuePeriodic(ctx)
			if err != nil {
				t.Fatal(err)
			}
			total += created
		}
		clock.Add(time.Second)
	}
	jobs, err := st.List(ctx, core.ListParams{Kind: "tick", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != total {
		t.Fatalf("%d jobs, %d reported created", len(jobs), total)
	}
	seen := map[string]bool{}
	for _, j := range jobs {
		at := j.Metadata[core.PeriodicMetadataAt]
		if seen[at] {
			t.Fatalf("two jobs for the occurrence %s", at)
		}
		seen[at] = true
		if j.Metadata[core.PeriodicMetadataName] != "tick" || !j.RunAt.Equal(mustTime(t, at)) {
			t.Fatalf("job %+v", j)
		}
	}
	// Complete every job with a completed retention of zero (the row is
	// deleted): the holds stay, nothing is enqueued again.
	now := clock.Now()
	claimed, err := st.Claim(ctx, contract.ClaimParams{Queue: core.DefaultQueue, WorkerID: "w", Limit: 1000, Now: now, LeaseUntil: now.Add(time.Minute)})
	if err != nil || len(claimed) != len(jobs) {
		t.Fatalf("claimed %d of %d: %v", len(claimed), len(jobs), err)
	}
	var outs []contract.Outcome
	for _, j := range claimed {
		outs = append(outs, contract.Outcome{JobID: j.ID, WorkerID: "w", ClaimSeq: j.ClaimSeq, Attempt: j.Attempt, Kind: contract.OutcomeComplete, At: now, Delete: true})
	}
	if _, err := st.Finish(ctx, outs); err != nil {
		t.Fatal(err)
	}
	if left, _ := st.List(ctx, core.ListParams{Kind: "tick"}); len(left) != 0 {
		t.Fatalf("%d rows left", len(left))
	}
	clock.Add(-time.Second)
	for _, n := range nodes {
		if created, err := n.EnqueuePeriodic(ctx); err != nil || created != 0 {
			t.Fatalf("after the rows were deleted: created %d, %v", created, err)
		}
	}
}

// plainStore hides a store's optional capabilities.
type plainStore struct{ contract.Store }

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return at
}

func TestPeriodicConfigErrors(t *testing.T) {
	st := memory.New()
	for _, pj := range []core.PeriodicJob{
		{Name: "", Schedule: "@daily", Kind: "k"},
		{Name: "x", Schedule: "not cron", Kind: "k"},
		{Name: "x", Schedule: "@daily", Kind: ""},
		{Name: "x", Schedule: "@daily", Kind: "k", Options: core.Options{UniqueKey: "u"}},
		{Name: "x", Schedule: "@daily", Kind: "k", Missed: "sometimes"},
		{Name: "x", Schedule: "@daily", Kind: "k", Args: []byte("{")},
	} {
		if _, err := core.NewClient(st, core.Config{Periodic: []core.PeriodicJob{pj}}); err == nil {
			t.Errorf("%+v: no error", pj)
		}
	}
	dup := core.PeriodicJob{Name: "x", Schedule: "@daily", Kind: "k"}
	if _, err := core.NewClient(st, core.Config{Periodic: []core.PeriodicJob{dup, dup}}); err == nil {
		t.Error("a name configured twice: no error")
	}
	// A client with handlers refuses a periodic kind it cannot run.
	h := core.NewHandlers()
	h.HandleRaw("other", func(context.Context, *core.Job) error { return nil })
	_, err := core.NewClient(st, core.Config{Handlers: h, Periodic: []core.PeriodicJob{dup}})
	if !errors.Is(err, core.ErrUnknownKind) {
		t.Errorf("unknown kind: %v", err)
	}
}

func TestPeriodicUnknownName(t *testing.T) {
	c := periodicClient(t, memory.New(), core.SystemClock{}, core.PeriodicJob{Name: "a", Schedule: "@daily", Kind: "k"})
	if err := c.PausePeriodic(context.Background(), "b"); !errors.Is(err, core.ErrUnknownPeriodic) {
		t.Fatalf("pause of an unknown name: %v", err)
	}
	if _, err := c.RunPeriodicNow(context.Background(), "b"); !errors.Is(err, core.ErrUnknownPeriodic) {
		t.Fatalf("run of an unknown name: %v", err)
	}
	r, err := c.RunPeriodicNow(context.Background(), "a")
	if err != nil || r.Job.Metadata[core.PeriodicMetadataName] != "a" || r.Job.UniqueKey != "" {
		t.Fatalf("run now: %+v %v", r.Job, err)
	}
}

// A pause stops every node from enqueueing; a resume runs the next
// occurrence, not those that fell during the pause. The last run is
// recorded in the store.
func TestPeriodicPauseResumeAndLastRun(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	clock := core.NewManualClock(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC))
	pj := core.PeriodicJob{Name: "m", Schedule: "* * * * *", Kind: "k", Missed: core.MissedRunEach}
	a, b := periodicClient(t, st, clock, pj), periodicClient(t, st, clock, pj)
	if n, err := a.EnqueuePeriodic(ctx); err != nil || n != 1 {
		t.Fatalf("first round: %d, %v", n, err)
	}
	list, err := b.PeriodicJobs(ctx)
	if err != nil || len(list) != 1 {
		t.Fatal(list, err)
	}
	if p := list[0]; p.Paused || !p.LastRunAt.Equal(clock.Now()) || p.LastJobID == 0 || !p.NextRunAt.Equal(clock.Now().Add(time.Minute)) {
		t.Fatalf("status: %+v", p)
	}
	if err := a.PausePeriodic(ctx, "m"); err != nil {
		t.Fatal(err)
	}
	clock.Add(10 * time.Minute)
	if n, err := b.EnqueuePeriodic(ctx); err != nil || n != 0 {
		t.Fatalf("paused: enqueued %d, %v", n, err)
	}
	if list, _ := b.PeriodicJobs(ctx); !list[0].Paused || !list[0].NextRunAt.IsZero() {
		t.Fatalf("paused status: %+v", list[0])
	}
	clock.Add(30 * time.Second)
	if err := b.ResumePeriodic(ctx, "m"); err != nil {
		t.Fatal(err)
	}
	if n, err := a.EnqueuePeriodic(ctx); err != nil || n != 0 {
		t.Fatalf("just resumed (the 10:10 occurrence fell during the pause): enqueued %d, %v", n, err)
	}
	clock.Add(30 * time.Second)
	if n, err := a.EnqueuePeriodic(ctx); err != nil || n != 1 {
		t.Fatalf("next occurrence after the resume: enqueued %d, %v", n, err)
	}
	if list, _ := b.PeriodicJobs(ctx); !list[0].LastRunAt.Equal(clock.Now()) {
		t.Fatalf("last run after the resume: %+v", list[0])
	}
}
