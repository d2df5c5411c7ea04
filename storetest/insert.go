package storetest

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
)

var insertTests = []test{
	{"insert/round-trips-every-field", testInsertRoundTrip},
	{"insert/nil-and-empty-collections-round-trip", testInsertNilAndEmpty},
	{"insert/state-follows-run-at", testInsertState},
	{"insert/ids-increase-in-insert-order", testInsertIDs},
	{"insert/batch-of-1000-jobs-in-one-call", testInsertBatch},
	{"insert/far-future-times-round-trip", testInsertTimeRange},
}

// zone is a non-UTC zone with a half-hour offset, to catch stores that drop
// or misapply offsets.
var zone = time.FixedZone("UTC+05:30", 5*3600+30*60)

func testInsertRoundTrip(e *env) {
	runAt := time.Date(2999, 12, 31, 22, 58, 57, 999999000, time.UTC)
	deadline := runAt.Add(time.Hour)
	p := contract.InsertParams{
		Queue:        "Q_1-a.b:c",
		Kind:         "résumé.send/✉ 日本語",
		Args:         json.RawMessage(`{ "b": [1, 2.5, "ü ✓ 😀", true],   "a": {"nested": null, "n": -7} }`),
		Priority:     3,
		MaxAttempts:  7,
		RunAt:        runAt.In(zone),
		Deadline:     deadline.In(zone),
		UniqueKey:    "ключ-🔑-Ünique",
		PartitionKey: "tenant-🏢-Ä",
		Tags:         []string{"tag-ä", "标签", "emoji-🚀"},
		Metadata:     map[string]string{"correlation-id": "abc-123", "ключ": "значение ✓", "empty": ""},
	}
	res, err := e.s.Insert(e.ctx, e.now.In(zone), []contract.InsertParams{p})
	if err != nil {
		e.Fatalf("Insert: unexpected error: %v", err)
	}
	if len(res) != 1 || res[0].Job == nil || res[0].Duplicate {
		e.Fatalf("Insert of one new job returned %+v; want one non-duplicate result holding the job", res)
	}
	if res[0].Job.ID <= 0 {
		e.Fatalf("Insert returned job id %d; ids are assigned by the store and positive", res[0].Job.ID)
	}
	want := &contract.Job{
		ID:           res[0].Job.ID,
		Queue:        p.Queue,
		Kind:         p.Kind,
		Args:         p.Args,
		Priority:     p.Priority,
		State:        contract.StateScheduled,
		MaxAttempts:  p.MaxAttempts,
		RunAt:        runAt,
		Deadline:     deadline,
		UniqueKey:    p.UniqueKey,
		PartitionKey: p.PartitionKey,
		Tags:         p.Tags,
		Metadata:     p.Metadata,
		CreatedAt:    e.now,
	}
	if d := diffJob(res[0].Job, want); len(d) > 0 {
		e.Errorf("the job returned by Insert differs from what was inserted (times handed in at UTC+05:30 must come back as the same instant in UTC):\n%s", lines(d))
	}
	if d := diffJob(e.get(want.ID), want); len(d) > 0 {
		e.Errorf("Get returns a job that differs from what was inserted (times handed in at UTC+05:30 must come back as the same instant in UTC):\n%s", lines(d))
	}

	// Other JSON shapes must survive too.
	for _, args := range []string{`[1,"two",{"three":3}]`, `"just a string"`, `12345.5`, `{}`} {
		q := e.job("shapes", "k")
		q.Args = json.RawMessage(args)
		j := e.insertOne(q)
		if msg := diffJSON(e.get(j.ID).Args, q.Args); msg != "" {
			e.Errorf("args %s did not round-trip: %s", args, msg)
		}
	}
}

func testInsertNilAndEmpty(e *env) {
	nilJob := e.job("q", "nil-collections")
	emptyJob := e.job("q", "empty-collections")
	emptyJob.Tags = []string{}
	emptyJob.Metadata = map[string]string{}
	jobs := e.insert(nilJob, emptyJob)
	for i, j := range jobs {
		got := e.get(j.ID)
		if len(got.Tags) != 0 || len(got.Metadata) != 0 {
			e.Errorf("job %d inserted with %s tags and metadata came back with Tags %q, Metadata %q; want none", j.ID, []string{"nil", "empty"}[i], got.Tags, got.Metadata)
		}
		if !got.Deadline.IsZero() {
			e.Errorf("job %d inserted without a deadline came back with Deadline %s; a zero Deadline means none and must round-trip as zero", j.ID, ts(got.Deadline))
		}
		if got.UniqueKey != "" {
			e.Errorf("job %d inserted without a unique key came back with UniqueKey %q", j.ID, got.UniqueKey)
		}
		if len(got.Errors) != 0 || len(got.Result) != 0 {
			e.Errorf("new job %d came back with Errors %+v and Result %q; want none", j.ID, got.Errors, got.Result)
		}
	}
}

func testInsertState(e *env) {
	cases := []struct {
		name  string
		runAt time.Time
		want  contract.State
	}{
		{"an hour ago", e.now.Add(-time.Hour), contract.StateAvailable},
		{"exactly now", e.now, contract.StateAvailable},
		{"1µs after now", e.now.Add(time.Microsecond), contract.StateScheduled},
		{"in an hour", e.now.Add(time.Hour), contract.StateScheduled},
	}
	for _, c := range cases {
		p := e.job("q", "k")
		p.RunAt = c.runAt
		j := e.insertOne(p)
		for _, got := range []*contract.Job{j, e.get(j.ID)} {
			if got.State != c.want {
				e.Errorf("job inserted at now=%s with RunAt %s (%s) has state %q; want %q (scheduled when RunAt is after now, otherwise available)", ts(e.now), ts(c.runAt), c.name, got.State, c.want)
			}
			if got.Attempt != 0 {
				e.Errorf("new job %d has Attempt %d; want 0 before the first claim", got.ID, got.Attempt)
			}
			if d := diffTime("CreatedAt", got.CreatedAt, e.now); len(d) > 0 {
				e.Errorf("new job %d: %s (CreatedAt is the now passed to Insert)", got.ID, d[0])
			}
			if !got.AttemptedAt.IsZero() || !got.FinishedAt.IsZero() || !got.LeaseUntil.IsZero() || got.WorkerID != "" {
				e.Errorf("new job %d has AttemptedAt %s, FinishedAt %s, LeaseUntil %s, WorkerID %q; want all unset", got.ID, ts(got.AttemptedAt), ts(got.FinishedAt), ts(got.LeaseUntil), got.WorkerID)
			}
		}
	}
}

func testInsertIDs(e *env) {
	var all []*contract.Job
	for _, n := range []int{5, 1, 3} {
		batch := make([]contract.InsertParams, n)
		for i := range batch {
			batch[i] = e.job("q", "k")
		}
		all = append(all, e.insert(batch...)...)
	}
	for i := 1; i < len(all); i++ {
		if all[i].ID <= all[i-1].ID {
			e.Fatalf("Insert assigned ids %v across three calls; ids must increase in insert order (within a batch in input order)", ids(all))
		}
	}
}

func testInsertBatch(e *env) {
	const n = 1000
	batch := make([]contract.InsertParams, n)
	for i := range batch {
		batch[i] = e.job("bulk", "k")
		batch[i].Args = json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))
	}
	jobs := e.insert(batch...)
	for i, j := range jobs {
		if msg := diffJSON(j.Args, batch[i].Args); msg != "" {
			e.Fatalf("Insert of %d jobs: result %d holds args %s; want %s (results must be in input order)", n, i, j.Args, batch[i].Args)
		}
		if i > 0 && j.ID <= jobs[i-1].ID {
			e.Fatalf("Insert of %d jobs: result %d has id %d after id %d; ids must increase in input order", n, i, j.ID, jobs[i-1].ID)
		}
	}
	if got := e.stats()["bulk"].Counts[contract.StateAvailable]; got != n {
		e.Fatalf("after inserting %d due jobs in one call, Stats counts %d available in the queue; want %d", n, got, n)
	}
}

// testInsertTimeRange: the bounds of the engine's time range,
// core.MaxTime (9999-12-31T23:59:59.999999Z) and core.MinTime
// (1970-01-01T00:00:00Z), are stored and read back to the microsecond as
// run_at, deadline and the due time of an outcome, and order claims like
// any other times.
func testInsertTimeRange(e *env) {
	far := e.job("range", "far")
	far.RunAt, far.Deadline = core.MaxTime, core.MaxTime
	early := e.job("range", "early")
	early.RunAt, early.Deadline = core.MinTime, core.MaxTime
	now := e.job("range", "now")
	jobs := e.insert(far, early, now)
	for i, want := range []contract.InsertParams{far, early, now} {
		for what, j := range map[string]*contract.Job{"Insert": jobs[i], "Get": e.get(jobs[i].ID)} {
			if !j.RunAt.Equal(want.RunAt) || !j.Deadline.Equal(want.Deadline) {
				e.Errorf("%s of job %q returns run_at %s, deadline %s; want %s, %s (the bounds of core's time range must round-trip to the microsecond)",
					what, want.Kind, j.RunAt.Format(time.RFC3339Nano), j.Deadline.Format(time.RFC3339Nano), want.RunAt.Format(time.RFC3339Nano), want.Deadline.Format(time.RFC3339Nano))
			}
		}
	}
	if st := e.get(jobs[0].ID).State; st != contract.StateScheduled {
		e.Errorf("a job due at core.MaxTime is %s; want scheduled", st)
	}
	listed, err := e.s.List(e.ctx, contract.ListParams{Queue: "range"})
	if err != nil {
		e.Fatalf("List: unexpected error: %v", err)
	}
	if len(listed) != 3 || !listed[0].RunAt.Equal(core.MaxTime) || !listed[0].Deadline.Equal(core.MaxTime) {
		e.Fatalf("List of the range queue returned %d jobs (first run_at %v); want 3, the first due at core.MaxTime", len(listed), listed)
	}
	// Claim order: run_at core.MinTime comes before e.now; core.MaxTime is
	// never due.
	claimed := e.claim("range", "w", 10)
	if len(claimed) != 2 || claimed[0].ID != jobs[1].ID || claimed[1].ID != jobs[2].ID {
		e.Fatalf("Claim of the range queue returned %d jobs; want the job due at core.MinTime, then the one due now", len(claimed))
	}
	o := e.outcome(claimed[0], contract.OutcomeSnooze)
	o.RunAt = core.MaxTime
	e.apply(o)
	if j := e.get(jobs[1].ID); !j.RunAt.Equal(core.MaxTime) || j.State != contract.StateScheduled {
		e.Errorf("a job snoozed to core.MaxTime reads run_at %s, state %s; want %s, scheduled", j.RunAt.Format(time.RFC3339Nano), j.State, core.MaxTime.Format(time.RFC3339Nano))
	}
}
