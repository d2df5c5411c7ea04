package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/core/storekit"
)

// testListPageBounded: contract.PageLister.ListPage returns what List returns
// for the same parameters (filters, order, cursor, limit), cut after the
// first job at which the args and results read (storekit.JobWeight summed)
// reach maxBytes: at least one job, and none after the one that reached
// the budget. maxBytes <= 0 sets no bound. Optional: skipped for stores
// without the capability.
func testListPageBounded(e *env) {
	pl, ok := e.s.(contract.PageLister)
	if !ok {
		e.Skip("the store does not implement contract.PageLister")
	}
	pad := func(n int) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"pad":%q}`, strings.Repeat("x", n)))
	}
	// Jobs of queue "p" of very different weights, run_at out of id order,
	// the first one completed with a result, jobs of another queue between
	// them, and last 20 small ones: more than a store that reads a page in
	// statements may read in its first.
	done := e.claimJob(e.job("p", "k"), "w")
	o := e.outcome(done, contract.OutcomeComplete)
	o.Result = []byte(strings.Repeat("r", 2500))
	e.apply(o)
	var jobs []*contract.Job
	sizes := []int{10, 3000, 200, 5000, 40, 1000}
	for range 20 {
		sizes = append(sizes, 30)
	}
	for i, n := range sizes {
		p := e.job("p", "k")
		p.Args = pad(n)
		p.RunAt = e.now.Add(time.Duration((i*7)%5) * time.Minute)
		jobs = append(jobs, e.insertOne(p))
		o := e.job("other", "k")
		o.Args = pad(4000)
		e.insertOne(o)
	}

	for _, p := range []contract.ListParams{
		{Queue: "p"},
		{Queue: "p", Desc: true},
		{Queue: "p", ByRunAt: true},
		{Queue: "p", ByRunAt: true, Desc: true},
		{Queue: "p", ByRunAt: true, AfterID: jobs[3].ID, AfterRunAt: jobs[3].RunAt},
		{Queue: "p", AfterID: jobs[1].ID, Limit: 3},
	} {
		all := e.list(p)
		if len(all) == 0 {
			e.Fatalf("List(%s) returned no jobs; the fixture has some", describeList(p))
		}
		for _, maxBytes := range []int{-1, 0, 1, storekit.JobWeight(all[0]), storekit.JobWeight(all[0]) + 1, 6000, 9500, 1 << 30} {
			want := wantPage(all, maxBytes)
			got, err := pl.ListPage(e.ctx, p, maxBytes)
			if err != nil {
				e.Fatalf("ListPage(%s, %d): %v", describeList(p), maxBytes, err)
			}
			if !slices.Equal(ids(got), ids(want)) {
				e.Errorf("ListPage(%s, maxBytes %d) returned %v (weights %v); want %v: List's jobs %v (weights %v) cut after the first job at which args and results reach maxBytes",
					describeList(p), maxBytes, ids(got), weights(got), ids(want), ids(all), weights(all))
				continue
			}
			for i := range got {
				if d := diffJob(got[i], all[i]); len(d) > 0 {
					e.Errorf("ListPage returns job %d differently from List:\n%s", got[i].ID, lines(d))
				}
			}
		}
	}
	if _, err := pl.ListPage(e.ctx, contract.ListParams{ArgsContains: []byte(`[1]`)}, 100); !errors.Is(err, contract.ErrInvalidFilter) {
		e.Errorf("ListPage with the args pattern [1] returned %v; want an error wrapping core.ErrInvalidFilter, as List", err)
	}
}

// wantPage is the rule of ListPage computed from List's answer.
func wantPage(all []*contract.Job, maxBytes int) []*contract.Job {
	if maxBytes <= 0 {
		return all
	}
	size := 0
	for i, j := range all {
		size += len(j.Args) + len(j.Result)
		if size >= maxBytes {
			return all[:i+1]
		}
	}
	return all
}

func weights(jobs []*contract.Job) []int {
	out := make([]int, len(jobs))
	for i, j := range jobs {
		out[i] = storekit.JobWeight(j)
	}
	return out
}
