package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/memory"
)

// bulkJobs enqueues n jobs of kind "k" in queue q with args {"n":i} and
// returns their ids in order.
func bulkJobs(t *testing.T, c *core.Client, q string, n int, opts *core.Options) []int64 {
	t.Helper()
	var ids []int64
	for i := range n {
		o := core.Options{Queue: q}
		if opts != nil {
			o = *opts
			o.Queue = q
		}
		res, err := c.EnqueueRaw(context.Background(), "k", []byte(fmt.Sprintf(`{"n":%d}`, i)), &o)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.Job.ID)
	}
	return ids
}

// discard claims and discards every due job of queue q.
func discard(t *testing.T, st *memory.Store, clock *core.ManualClock, q string) {
	t.Helper()
	ctx := context.Background()
	jobs, err := st.Claim(ctx, contract.ClaimParams{Queue: q, WorkerID: "w", Limit: 1000, Now: clock.Now(), LeaseUntil: clock.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	outs := make([]contract.Outcome, len(jobs))
	for i, j := range jobs {
		outs[i] = contract.Outcome{JobID: j.ID, WorkerID: "w", ClaimSeq: j.ClaimSeq, Attempt: j.Attempt, Kind: contract.OutcomeDiscard, At: clock.Now(),
			Error: &core.AttemptError{Attempt: j.Attempt, At: clock.Now(), Error: "boom"}}
	}
	if _, err := st.Finish(ctx, outs); err != nil {
		t.Fatal(err)
	}
}

func states(t *testing.T, st contract.Store, ids []int64) map[core.State]int {
	t.Helper()
	out := map[core.State]int{}
	for _, id := range ids {
		j, err := st.Get(context.Background(), id)
		if err != nil {
			out["gone"]++
			continue
		}
		out[j.State]++
	}
	return out
}

func TestApplyToMatchingDryRunCountsInBatches(t *testing.T) {
	c, st, _ := producerClient(t, nil)
	ctx := context.Background()
	a := bulkJobs(t, c, "a", 250, nil)
	bulkJobs(t, c, "b", 5, nil)
	res, err := c.ApplyToMatching(ctx, core.BulkDelete, core.ListParams{Queue: "a"}, core.BulkOptions{DryRun: true, BatchSize: 7})
	if err != nil {
		t.Fatal(err)
	}
	if res.Matched != 250 || res.Applied != 0 || res.Skipped != 0 || !slices.Equal(res.IDs, a[:core.BulkResultIDs]) {
		t.Fatalf("dry run = matched %d applied %d skipped %d ids %d (first %v); want 250 0 0 and the first 100 ids", res.Matched, res.Applied, res.Skipped, len(res.IDs), res.IDs[:3])
	}
	if got := states(t, st, a); got[core.StateAvailable] != 250 {
		t.Fatalf("a dry run changed jobs: %v", got)
	}
	res, err = c.ApplyToMatching(ctx, core.BulkDelete, core.ListParams{Queue: "a"}, core.BulkOptions{DryRun: true, Limit: 30, BatchSize: 7})
	if err != nil || res.Matched != 30 || !slices.Equal(res.IDs, a[:30]) {
		t.Fatalf("dry run with limit 30 = %+v, %v; want the 30 oldest", res, err)
	}
}

func TestApplyToMatchingRetriesDiscardedJobs(t *testing.T) {
	c, st, clock := producerClient(t, nil)
	ctx := context.Background()
	bad := bulkJobs(t, c, "mail", 12, nil)
	discard(t, st, clock, "mail")
	fresh := bulkJobs(t, c, "mail", 3, nil) // available: not matched
	clock.Add(time.Minute)
	var seen []int64
	res, err := c.ApplyToMatching(ctx, core.BulkRetry, core.ListParams{Queue: "mail", States: []core.State{core.StateDiscarded, core.StateRetryable}},
		core.BulkOptions{BatchSize: 5, OnJob: func(it core.BulkItem) {
			if it.Err != nil || it.Job == nil || it.Job.State != core.StateAvailable {
				t.Errorf("OnJob(%d) = job %+v err %v; want it available", it.ID, it.Job, it.Err)
			}
			seen = append(seen, it.ID)
		}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Matched != 12 || res.Applied != 12 || res.Skipped != 0 || !slices.Equal(res.IDs, bad) || !slices.Equal(seen, bad) {
		t.Fatalf("retry = %+v (OnJob saw %v); want the 12 discarded jobs retried", res, seen)
	}
	if got := states(t, st, bad); got[core.StateAvailable] != 12 {
		t.Fatalf("states after retry: %v", got)
	}
	j, _ := st.Get(ctx, bad[0])
	if !j.RunAt.Equal(contract.UTC(clock.Now())) || j.Attempt != 1 || j.MaxAttempts != core.DefaultMaxAttempts {
		t.Fatalf("a retried job has run_at %s attempt %d/%d; want now, attempts kept", j.RunAt, j.Attempt, j.MaxAttempts)
	}
	if got := states(t, st, fresh); got[core.StateAvailable] != 3 {
		t.Fatalf("jobs outside the filter changed: %v", got)
	}
}

func TestApplyToMatchingSkipsJobsThatChanged(t *testing.T) {
	c, st, _ := producerClient(t, nil)
	ctx := context.Background()
	ids := bulkJobs(t, c, "q", 4, &core.Options{RunAt: time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)})
	// While the action runs, job 2 is cancelled and job 3 deleted: they
	// no longer match (or exist) when their turn comes.
	var items []core.BulkItem
	res, err := c.ApplyToMatching(ctx, core.BulkCancel, core.ListParams{Queue: "q", States: []core.State{core.StateScheduled}},
		core.BulkOptions{OnJob: func(it core.BulkItem) {
			items = append(items, it)
			if it.ID == ids[0] {
				if _, err := c.CancelJob(ctx, ids[1]); err != nil {
					t.Error(err)
				}
				if err := c.DeleteJob(ctx, ids[2]); err != nil {
					t.Error(err)
				}
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Matched != 4 || res.Applied != 2 || res.Skipped != 2 || !slices.Equal(res.IDs, []int64{ids[0], ids[3]}) {
		t.Fatalf("cancel = %+v; want 4 matched, 2 applied, 2 skipped", res)
	}
	if !errors.Is(items[1].Err, core.ErrNoLongerMatches) || !errors.Is(items[2].Err, core.ErrNotFound) {
		t.Fatalf("skip reasons = %v, %v; want ErrNoLongerMatches (cancelled meanwhile), ErrNotFound (deleted)", items[1].Err, items[2].Err)
	}
	if got := states(t, st, ids); got[core.StateCancelled] != 3 || got["gone"] != 1 {
		t.Fatalf("states = %v", got)
	}
}

func TestApplyToMatchingRunNow(t *testing.T) {
	c, st, clock := producerClient(t, nil)
	ctx := context.Background()
	later := bulkJobs(t, c, "q", 3, &core.Options{RunAt: clock.Now().Add(time.Hour)})
	now := bulkJobs(t, c, "q", 2, nil)
	res, err := c.ApplyToMatching(ctx, core.BulkRunNow, core.ListParams{Queue: "q"}, core.BulkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Matched != 3 || res.Applied != 3 || !slices.Equal(res.IDs, later) {
		t.Fatalf("run_now = %+v; want the 3 scheduled jobs only", res)
	}
	for _, id := range later {
		j, _ := st.Get(ctx, id)
		if j.State != core.StateAvailable || !j.RunAt.Equal(contract.UTC(clock.Now())) || j.Attempt != 0 || j.MaxAttempts != core.DefaultMaxAttempts {
			t.Fatalf("job %d after run_now: state %s run_at %s attempt %d/%d; want available now, attempts untouched", id, j.State, j.RunAt, j.Attempt, j.MaxAttempts)
		}
	}
	if got := states(t, st, now); got[core.StateAvailable] != 2 {
		t.Fatalf("available jobs changed: %v", got)
	}
	_, err = c.ApplyToMatching(ctx, core.BulkRunNow, core.ListParams{States: []core.State{core.StateDiscarded}}, core.BulkOptions{})
	if !errors.Is(err, core.ErrInvalidFilter) {
		t.Fatalf("run_now of discarded jobs: err %v; want ErrInvalidFilter", err)
	}
}

func TestApplyToMatchingByIDsAndArgs(t *testing.T) {
	c, st, _ := producerClient(t, nil)
	ctx := context.Background()
	ids := bulkJobs(t, c, "q", 6, nil) // args {"n":0} … {"n":5}
	res, err := c.ApplyToMatching(ctx, core.BulkDelete, core.ListParams{Queue: "q"}, core.BulkOptions{IDs: []int64{ids[4], ids[1], ids[1], 9999}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Matched != 2 || res.Applied != 2 || !slices.Equal(res.IDs, []int64{ids[1], ids[4]}) {
		t.Fatalf("delete by ids = %+v; want ids %d and %d (missing ids are not matched, duplicates count once)", res, ids[1], ids[4])
	}
	res, err = c.ApplyToMatching(ctx, core.BulkDelete, core.ListParams{Queue: "other"}, core.BulkOptions{IDs: []int64{ids[0]}})
	if err != nil || res.Matched != 0 {
		t.Fatalf("ids outside the filter = %+v, %v; want none matched", res, err)
	}
	res, err = c.ApplyToMatching(ctx, core.BulkCancel, core.ListParams{ArgsContains: json.RawMessage(`{"n":3}`)}, core.BulkOptions{})
	if err != nil || res.Applied != 1 || res.IDs[0] != ids[3] {
		t.Fatalf("cancel by args = %+v, %v; want job %d", res, err, ids[3])
	}
	if got := states(t, st, ids); got["gone"] != 2 || got[core.StateCancelled] != 1 || got[core.StateAvailable] != 3 {
		t.Fatalf("states = %v", got)
	}
}

func TestApplyToMatchingSkipsRunningJobs(t *testing.T) {
	c, st, clock := producerClient(t, nil)
	ctx := context.Background()
	ids := bulkJobs(t, c, "q", 3, nil)
	if _, err := st.Claim(ctx, contract.ClaimParams{Queue: "q", WorkerID: "w", Limit: 1, Now: clock.Now(), LeaseUntil: clock.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	res, err := c.ApplyToMatching(ctx, core.BulkDelete, core.ListParams{Queue: "q"}, core.BulkOptions{})
	if err != nil || res.Matched != 3 || res.Applied != 2 || res.Skipped != 1 {
		t.Fatalf("delete with one running = %+v, %v; want 2 applied, the running one skipped", res, err)
	}
	if got := states(t, st, ids); got[core.StateRunning] != 1 || got["gone"] != 2 {
		t.Fatalf("states = %v", got)
	}
}

func TestApplyToMatchingRefusesBadInput(t *testing.T) {
	c, _, _ := producerClient(t, nil)
	ctx := context.Background()
	cases := []struct {
		action core.BulkAction
		p      core.ListParams
		opts   core.BulkOptions
	}{
		{"explode", core.ListParams{}, core.BulkOptions{}},
		{core.BulkRetry, core.ListParams{States: []core.State{"lost"}}, core.BulkOptions{}},
		{core.BulkRetry, core.ListParams{}, core.BulkOptions{Limit: core.MaxBulkJobs + 1}},
		{core.BulkRetry, core.ListParams{}, core.BulkOptions{Limit: -1}},
		{core.BulkRetry, core.ListParams{}, core.BulkOptions{IDs: []int64{0}}},
		{core.BulkRetry, core.ListParams{}, core.BulkOptions{IDs: make([]int64, core.MaxBulkIDs+1)}},
		{core.BulkRetry, core.ListParams{ArgsContains: []byte(`[1]`)}, core.BulkOptions{}},
		{core.BulkRunNow, core.ListParams{States: []core.State{core.StateScheduled, core.StateRunning}}, core.BulkOptions{}},
	}
	for _, cs := range cases {
		if _, err := c.ApplyToMatching(ctx, cs.action, cs.p, cs.opts); !errors.Is(err, core.ErrInvalidFilter) {
			t.Errorf("ApplyToMatching(%s, %+v, limit %d, %d ids) err = %v; want ErrInvalidFilter", cs.action, cs.p, cs.opts.Limit, len(cs.opts.IDs), err)
		}
	}
}

func TestParseArgsPattern(t *testing.T) {
	leaves, err := contract.ParseArgsPattern([]byte(`{"b":{"y":true,"x":"s"},"a":1.5}`))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range leaves {
		got = append(got, l.JSONPath()+"="+string(l.Value)+":"+l.Type())
	}
	want := []string{`$."a"=1.5:number`, `$."b"."x"="s":string`, `$."b"."y"=true:true`}
	if !slices.Equal(got, want) {
		t.Fatalf("leaves = %v; want %v", got, want)
	}
	if l, _ := contract.ParseArgsPattern([]byte(`{"n":7}`)); l[0].Number() != int64(7) {
		t.Fatalf("Number of 7 = %#v; want int64 7", l[0].Number())
	}
	if l, _ := contract.ParseArgsPattern([]byte(` {} `)); l != nil {
		t.Fatalf("{} = %v; want no leaves", l)
	}
	for _, ok := range []bool{
		contract.ArgsMatch([]byte(`{"a":1.50,"b":{"x":"s","y":true,"z":0}}`), leaves),
		!contract.ArgsMatch([]byte(`{"a":1.5,"b":{"x":"s","y":"true"}}`), leaves),
		!contract.ArgsMatch([]byte(`{"a":[1.5],"b":{"x":"s","y":true}}`), leaves),
		!contract.ArgsMatch([]byte(`{"backlog_enc":1,"kid":"k","ct":"AA"}`), []contract.ArgsLeaf{{Path: []string{"kid"}, Value: []byte(`"k"`)}}),
	} {
		if !ok {
			t.Fatal("ArgsMatch disagrees with jsonb containment")
		}
	}
}
