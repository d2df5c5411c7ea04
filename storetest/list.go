package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

var listTests = []test{
	{"list/filters-by-queue-state-and-kind", testListFilters},
	{"list/filters-by-worker", testListByWorker},
	{"list/args-contains", testListArgsContains},
	{"list/pages-forward-by-id", testListForward},
	{"list/pages-backward-by-id", testListBackward},
	{"list/pages-by-run-at", testListByRunAt},
	{"list/default-limit-is-100", testListDefaultLimit},
	{"list/page-bounded-by-bytes", testListPageBounded},
	{"stats/counts-jobs-per-queue-and-state", testStats},
}

var pruneTests = []test{
	{"prune/deletes-only-the-named-final-state-before-cutoff", testPrune},
	{"prune/respects-limit-so-callers-can-loop", testPruneLimit},
	{"prune/non-final-state-is-an-invalid-argument", testPruneNonFinal},
	{"prune/key-of-a-pruned-job-is-free-once-its-window-ends", testPruneFreesEndedHolds},
}

func testListFilters(e *env) {
	run := e.claimJob(e.job("a", "send"), "w")
	done := e.claimJob(e.job("b", "build"), "w")
	e.apply(e.outcome(done, contract.OutcomeComplete))
	a1 := e.insertOne(e.job("a", "send"))
	a2 := e.insertOne(e.job("a", "build"))
	b1 := e.insertOne(e.job("b", "send"))
	all := []int64{run.ID, done.ID, a1.ID, a2.ID, b1.ID}

	cases := []struct {
		p    contract.ListParams
		want []int64
	}{
		{contract.ListParams{}, all},
		{contract.ListParams{Queue: "a"}, []int64{run.ID, a1.ID, a2.ID}},
		{contract.ListParams{Kind: "send"}, []int64{run.ID, a1.ID, b1.ID}},
		{contract.ListParams{States: []contract.State{contract.StateRunning}}, []int64{run.ID}},
		{contract.ListParams{States: []contract.State{contract.StateAvailable, contract.StateCompleted}}, []int64{done.ID, a1.ID, a2.ID, b1.ID}},
		{contract.ListParams{Queue: "a", Kind: "send", States: []contract.State{contract.StateAvailable}}, []int64{a1.ID}},
		{contract.ListParams{Queue: "b", Kind: "send", States: []contract.State{contract.StateCompleted}}, nil},
		{contract.ListParams{Queue: "nope"}, nil},
	}
	for _, c := range cases {
		got := ids(e.list(c.p))
		if !slices.Equal(got, c.want) {
			e.Errorf("List(%s) returned ids %v; want %v (filters combine with AND; zero values mean any; ordered by id)", describeList(c.p), got, c.want)
		}
	}
	// The listed jobs are whole jobs, not summaries.
	if got := e.list(contract.ListParams{States: []contract.State{contract.StateRunning}}); len(got) == 1 {
		if d := diffJob(got[0], e.get(run.ID)); len(d) > 0 {
			e.Errorf("List returns job %d differently from Get:\n%s", run.ID, lines(d))
		}
	}
}

// testListByWorker: ListParams.WorkerID keeps the jobs a worker holds (the
// engine's check for claims whose reply was lost) and those it finished.
func testListByWorker(e *env) {
	mine := e.claimJob(e.job("q", "k"), "w-1")
	done := e.claimJob(e.job("q", "k"), "w-1")
	e.apply(e.outcome(done, contract.OutcomeComplete))
	e.claimJob(e.job("q", "k"), "w-2")
	e.insertOne(e.job("q", "k"))
	running := []contract.State{contract.StateRunning}
	if got := ids(e.list(contract.ListParams{WorkerID: "w-1", States: running})); !slices.Equal(got, []int64{mine.ID}) {
		e.Errorf("List(worker w-1, running) returned %v; want [%d]", got, mine.ID)
	}
	if got := ids(e.list(contract.ListParams{WorkerID: "w-1"})); !slices.Equal(got, []int64{mine.ID, done.ID}) {
		e.Errorf("List(worker w-1) returned %v; want [%d %d] (running and finished jobs keep their worker id)", got, mine.ID, done.ID)
	}
	if got := e.list(contract.ListParams{WorkerID: "W-1"}); len(got) != 0 {
		e.Errorf("List(worker W-1) returned %v; worker ids compare byte for byte", ids(got))
	}
}

func describeList(p contract.ListParams) string {
	s := fmt.Sprintf("Queue %q, States %v, Kind %q, AfterID %d, Desc %v, Limit %d", p.Queue, p.States, p.Kind, p.AfterID, p.Desc, p.Limit)
	if p.ArgsContains != nil {
		s += fmt.Sprintf(", ArgsContains %s", p.ArgsContains)
	}
	return s
}

// testListArgsContains: ListParams.ArgsContains keeps the jobs whose args
// contain the pattern (jsonb containment without arrays, see
// contract.ParseArgsPattern), combines with the other filters and paging, and
// never matches sealed args.
func testListArgsContains(e *env) {
	ins := func(args string) int64 {
		e.Helper()
		p := e.job("q", "k")
		p.Args = json.RawMessage(args)
		return e.insertOne(p).ID
	}
	a := ins(`{"customer":42,"plan":"pro","flags":{"beta":true,"region":"eu"},"note":null}`)
	b := ins(`{"customer":42.0,"plan":"free","flags":{"beta":false}}`)
	c := ins(`{"customer":"42","plan":"pro","tags":["pro","x"]}`)
	d := ins(`{"customer":[42],"plan":["pro"],"flags":{"beta":[true]}}`)
	f := ins(`{"Customer":42,"plan":"Pro","flags":"beta"}`)
	g := ins(`[{"customer":42}]`)
	h := ins(`{"plan":"pr\u00f6 \"x\"","nested":{"deep":{"deeper":{"n":-1.5e3}}}}`)
	// A sealed envelope (core.Keyring): its kid and ct must not be found.
	dotted := ins(`{"a.b":{"c d":1,"$x[0]":"y"}}`)
	sealed := ins(`{"backlog_enc":1,"kid":"k1","ct":"AAAA"}`)
	other := e.job("other", "k")
	other.Args = json.RawMessage(`{"customer":42}`)
	o := e.insertOne(other).ID
	_ = g

	cases := []struct {
		pattern string
		want    []int64
	}{
		{`{"customer":42}`, []int64{a, b, o}},
		{`{"customer":42.00}`, []int64{a, b, o}},
		{`{"customer":"42"}`, []int64{c}},
		{`{"plan":"pro"}`, []int64{a, c}},
		{`{"plan":"pro","customer":42}`, []int64{a}},
		{`{"flags":{"beta":true}}`, []int64{a}},
		{`{"flags":{"beta":false}}`, []int64{b}},
		{`{"flags":{"region":"eu","beta":true}}`, []int64{a}},
		{`{"note":null}`, []int64{a}},
		{`{"missing":null}`, nil},
		{`{"plan":"prö \"x\""}`, []int64{h}},
		{`{"nested":{"deep":{"deeper":{"n":-1500}}}}`, []int64{h}},
		{`{"a.b":{"c d":1.0,"$x[0]":"y"}}`, []int64{dotted}},
		{`{"a":{"b":{"c d":1}}}`, nil},
		{`{"kid":"k1"}`, nil},
		{`{"ct":"AAAA","kid":"k1"}`, nil},
		{`{}`, []int64{a, b, c, d, f, g, h, dotted, sealed, o}},
	}
	for _, cs := range cases {
		p := contract.ListParams{ArgsContains: []byte(cs.pattern)}
		if got := ids(e.list(p)); !slices.Equal(got, cs.want) {
			e.Errorf("List(ArgsContains %s) returned ids %v; want %v (a scalar equals only a scalar of the same type and value at the same path, numbers by value, never inside an array; sealed args never match; {} matches everything)", cs.pattern, got, cs.want)
		}
	}
	// With the other filters, and paged.
	if got := ids(e.list(contract.ListParams{Queue: "q", ArgsContains: []byte(`{"customer":42}`)})); !slices.Equal(got, []int64{a, b}) {
		e.Errorf("List(Queue \"q\", ArgsContains {\"customer\":42}) returned %v; want %v (filters combine with AND)", got, []int64{a, b})
	}
	if got := pageAll(e, contract.ListParams{ArgsContains: []byte(`{"customer":42}`), Limit: 1}); !slices.Equal(got, []int64{a, b, o}) {
		e.Errorf("paging List(ArgsContains {\"customer\":42}) with Limit 1 returned %v; want %v", got, []int64{a, b, o})
	}
	if got := ids(e.list(contract.ListParams{ArgsContains: []byte(`{"customer":42}`), Desc: true, AfterID: o})); !slices.Equal(got, []int64{b, a}) {
		e.Errorf("List(ArgsContains {\"customer\":42}, Desc, AfterID %d) returned %v; want %v", o, got, []int64{b, a})
	}
	// Patterns no store can answer alike are refused, with ErrInvalidFilter.
	for _, bad := range []string{`[1]`, `"x"`, `{"a":[1]}`, `{"a":{}}`, `{"backlog_enc":1}`, `{"a\"b":1}`, `{`, `{"n":1e999}`} {
		if _, err := e.s.List(e.ctx, contract.ListParams{ArgsContains: []byte(bad)}); !errors.Is(err, contract.ErrInvalidFilter) {
			e.Errorf("List(ArgsContains %s) returned error %v; want one wrapping core.ErrInvalidFilter (contract.ParseArgsPattern refuses it)", bad, err)
		}
	}
}

// pageAll walks every page of p and returns the ids in the order seen.
func pageAll(e *env, p contract.ListParams) []int64 {
	e.Helper()
	var out []int64
	for range 100 {
		page := ids(e.list(p))
		if len(page) > p.Limit {
			e.Fatalf("List(%s) returned %d jobs; want at most Limit", describeList(p), len(page))
		}
		out = append(out, page...)
		if len(page) < p.Limit {
			return out
		}
		p.AfterID = page[len(page)-1]
	}
	e.Fatalf("List paging with Limit %d did not end after 100 pages: AfterID is not advancing", p.Limit)
	return nil
}

func testListForward(e *env) {
	jobs := insertMany(e, "q", 23)
	e.insertOne(e.job("other", "k"))
	want := ids(jobs)
	if got := pageAll(e, contract.ListParams{Queue: "q", Limit: 5}); !slices.Equal(got, want) {
		e.Fatalf("paging forward through queue \"q\" with Limit 5 (AfterID = last id of the previous page) returned %v; want %v, each id once, ascending", got, want)
	}
	if got := ids(e.list(contract.ListParams{Queue: "q", Limit: 3, AfterID: want[10]})); !slices.Equal(got, want[11:14]) {
		e.Fatalf("List(AfterID %d, Limit 3) returned %v; want %v (ids after the cursor, ascending)", want[10], got, want[11:14])
	}
}

func testListBackward(e *env) {
	jobs := insertMany(e, "q", 23)
	want := ids(jobs)
	slices.Reverse(want)
	if got := pageAll(e, contract.ListParams{Queue: "q", Limit: 5, Desc: true}); !slices.Equal(got, want) {
		e.Fatalf("paging backward with Desc and Limit 5 (AfterID = last id of the previous page) returned %v; want %v, each id once, descending", got, want)
	}
	if got := ids(e.list(contract.ListParams{Queue: "q", Limit: 3, Desc: true, AfterID: want[10]})); !slices.Equal(got, want[11:14]) {
		e.Fatalf("List(Desc, AfterID %d, Limit 3) returned %v; want %v (ids below the cursor, descending)", want[10], got, want[11:14])
	}
}

func testListDefaultLimit(e *env) {
	jobs := insertMany(e, "q", 150)
	got := ids(e.list(contract.ListParams{}))
	if !slices.Equal(got, ids(jobs[:100])) {
		e.Fatalf("List with Limit 0 over 150 jobs returned %d ids (first %v); want the first 100 by id (Limit 0 means 100)", len(got), got[:min(len(got), 3)])
	}
}

func testStats(e *env) {
	if st := e.stats(); len(st) != 0 {
		e.Fatalf("Stats of an empty store returned %v; want no queues (is Factory.New returning a fresh store?)", st)
	}
	insertMany(e, "zeta", 3)
	sched := e.job("alpha", "k")
	sched.RunAt = e.now.Add(time.Hour)
	e.insert(sched, sched)
	insertMany(e, "alpha", 4)
	got := e.claim("alpha", "w", 3)
	e.apply(e.outcome(got[0], contract.OutcomeComplete))
	e.apply(e.outcome(got[1], contract.OutcomeRetry))
	e.pause("mid")

	st, err := e.s.Stats(e.ctx)
	if err != nil {
		e.Fatalf("Stats: %v", err)
	}
	var names []string
	for _, q := range st {
		names = append(names, q.Queue)
	}
	if !slices.Equal(names, []string{"alpha", "mid", "zeta"}) {
		e.Fatalf("Stats listed queues %q; want [\"alpha\" \"mid\" \"zeta\"]: every queue with jobs or a pause, ordered by name", names)
	}
	want := map[string]map[contract.State]int{
		"alpha": {contract.StateScheduled: 2, contract.StateAvailable: 1, contract.StateRunning: 1, contract.StateCompleted: 1, contract.StateRetryable: 1},
		"mid":   {},
		"zeta":  {contract.StateAvailable: 3},
	}
	for _, q := range st {
		for _, s := range contract.AllStates {
			if q.Counts[s] != want[q.Queue][s] {
				e.Errorf("Stats for queue %q counts %d %s; want %d (all counts: %v)", q.Queue, q.Counts[s], s, want[q.Queue][s], q.Counts)
			}
		}
		if q.Paused != (q.Queue == "mid") {
			e.Errorf("Stats for queue %q has Paused=%v; want %v", q.Queue, q.Paused, q.Queue == "mid")
		}
	}
}

// prune calls Prune and fails on error.
func (e *env) prune(state contract.State, before time.Time, limit int) int {
	e.Helper()
	n, err := e.s.Prune(e.ctx, state, before, limit)
	if err != nil {
		e.Fatalf("Prune(%s, before %s, limit %d): unexpected error: %v", state, ts(before), limit, err)
	}
	if n > limit {
		e.Fatalf("Prune with limit %d reported %d deleted", limit, n)
	}
	return n
}

func testPrune(e *env) {
	old := finalJobs(e) // completed, cancelled, discarded at start
	e.advance(time.Hour)
	cutoff := e.now
	atCutoff := e.claimJob(e.job("q", "at-cutoff"), "w")
	e.apply(e.outcome(atCutoff, contract.OutcomeComplete))
	e.advance(time.Hour)
	newer := e.claimJob(e.job("q", "newer"), "w")
	e.apply(e.outcome(newer, contract.OutcomeComplete))
	pending := e.insertOne(e.job("q", "pending"))

	if n := e.prune(contract.StateCompleted, cutoff, 100); n != 1 {
		e.Errorf("Prune(completed, before %s) returned %d; want 1 (only the completed job finished before the cutoff)", ts(cutoff), n)
	}
	if _, err := e.s.Get(e.ctx, old[0].ID); err == nil {
		e.Errorf("completed job %d, finished before the cutoff, survived Prune", old[0].ID)
	}
	for _, j := range []*contract.Job{old[1], old[2], e.get(atCutoff.ID), e.get(newer.ID), e.get(pending.ID)} {
		e.expectUnchanged(j, fmt.Sprintf("Prune(completed, before %s) of a %s job finished at %s", ts(cutoff), j.State, ts(j.FinishedAt)))
	}
	if n := e.prune(contract.StateDiscarded, cutoff, 100); n != 1 {
		e.Errorf("Prune(discarded) returned %d; want 1", n)
	}
	if n := e.prune(contract.StateCancelled, cutoff, 100); n != 1 {
		e.Errorf("Prune(cancelled) returned %d; want 1", n)
	}
	if n := e.prune(contract.StateCompleted, e.now.Add(time.Second), 100); n != 2 {
		e.Errorf("Prune(completed) with a later cutoff returned %d; want 2", n)
	}
	e.expectState(pending.ID, contract.StateAvailable, "Prune never touches jobs that are not final")
}

func testPruneLimit(e *env) {
	jobs := insertMany(e, "q", 25)
	got := e.claim("q", "w", 25)
	outs := make([]contract.Outcome, len(got))
	for i, j := range got {
		outs[i] = e.outcome(j, contract.OutcomeComplete)
	}
	e.finish(outs...)
	e.advance(time.Hour)
	var sizes []int
	for range 4 {
		sizes = append(sizes, e.prune(contract.StateCompleted, e.now, 10))
	}
	if !slices.Equal(sizes, []int{10, 10, 5, 0}) {
		e.Fatalf("four Prune calls with limit 10 over %d old completed jobs returned %v; want [10 10 5 0]", len(jobs), sizes)
	}
}

// testListByRunAt: with ByRunAt, List orders by (run_at, id), forward and
// backward, and pages with the (AfterRunAt, AfterID) cursor through jobs
// sharing a run_at, filters applied.
func testListByRunAt(e *env) {
	var want []*contract.Job
	for i, d := range []time.Duration{5, 1, 3, 1, 4, 3, 2, 1} {
		p := e.job("sched", "k")
		p.RunAt = e.now.Add(d * time.Hour)
		if i == 7 {
			p.Queue = "other" // filtered out
		}
		j := e.insertOne(p)
		if i != 7 {
			want = append(want, j)
		}
	}
	slices.SortFunc(want, func(a, b *contract.Job) int {
		if c := a.RunAt.Compare(b.RunAt); c != 0 {
			return c
		}
		return int(a.ID - b.ID)
	})
	page := func(desc bool) []*contract.Job {
		var got []*contract.Job
		p := contract.ListParams{Queue: "sched", States: []contract.State{contract.StateScheduled}, ByRunAt: true, Desc: desc, Limit: 2}
		for range 10 {
			jobs := e.list(p)
			if len(jobs) == 0 {
				break
			}
			got = append(got, jobs...)
			last := jobs[len(jobs)-1]
			p.AfterID, p.AfterRunAt = last.ID, last.RunAt
		}
		return got
	}
	if got := page(false); !slices.Equal(ids(got), ids(want)) {
		e.Fatalf("List ByRunAt in pages of 2 returned %v; want %v (run_at, then id)", ids(got), ids(want))
	}
	rev := slices.Clone(want)
	slices.Reverse(rev)
	if got := page(true); !slices.Equal(ids(got), ids(rev)) {
		e.Fatalf("List ByRunAt Desc in pages of 2 returned %v; want %v", ids(got), ids(rev))
	}
}
