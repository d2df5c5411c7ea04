package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

var archiveTests = []test{
	{"archive/moves-exactly-what-prune-would-delete", testArchiveMovesWhatPruneDeletes},
	{"archive/non-final-state-is-an-invalid-argument", testArchiveNonFinal},
	{"archive/keeps-every-field", testArchiveKeepsEveryField},
	{"archive/moved-jobs-leave-the-jobs", testArchiveLeavesJobs},
	{"archive/key-held-as-after-prune", testArchiveKeyHeld},
	{"archive/prune-archive-takes-only-older-jobs", testPruneArchive},
	{"archive/concurrent-archivers-move-each-job-once", testArchiveConcurrent},
	{"archive/list-pages-in-order", testArchiveList},
}

// archiver returns s as a contract.Archiver, or skips the subtest.
func (e *env) archiver(s contract.Store) contract.Archiver {
	e.Helper()
	a, ok := s.(contract.Archiver)
	if !ok {
		e.Skip("the store does not implement contract.Archiver")
	}
	return a
}

// archive calls Archive on e's store and checks the count against limit.
func (e *env) archive(state contract.State, before time.Time, limit int) int {
	e.Helper()
	n, err := e.archiver(e.s).Archive(e.ctx, state, before, limit)
	if err != nil {
		e.Fatalf("Archive(%s, before %s, limit %d): unexpected error: %v", state, ts(before), limit, err)
	}
	if n > limit {
		e.Fatalf("Archive with limit %d reported %d moved", limit, n)
	}
	return n
}

// archived lists the archive with p.
func (e *env) archived(p contract.ListParams) []*contract.Job {
	e.Helper()
	jobs, err := e.archiver(e.s).ListArchived(e.ctx, p)
	if err != nil {
		e.Fatalf("ListArchived(%s): unexpected error: %v", describeList(p), err)
	}
	return jobs
}

// archivedAll pages through the archive with p (its Limit the page size)
// and returns the ids in the order read.
func (e *env) archivedAll(p contract.ListParams) []int64 {
	e.Helper()
	var out []int64
	for range 1000 {
		page := e.archived(p)
		if len(page) > p.Limit {
			e.Fatalf("ListArchived(%s) returned %d jobs; want at most Limit", describeList(p), len(page))
		}
		out = append(out, ids(page)...)
		if len(page) < p.Limit {
			return out
		}
		last := page[len(page)-1]
		p.AfterID, p.AfterRunAt = last.ID, last.RunAt
	}
	e.Fatalf("ListArchived paging with Limit %d did not end after 1000 pages: AfterID is not advancing", p.Limit)
	return nil
}

// testArchiveMovesWhatPruneDeletes is testPrune with Archive: per state,
// the jobs of that state finished before the cutoff move, the rest stay.
func testArchiveMovesWhatPruneDeletes(e *env) {
	e.archiver(e.s)
	old := finalJobs(e) // completed, cancelled, discarded at start
	e.advance(time.Hour)
	cutoff := e.now
	atCutoff := e.claimJob(e.job("q", "at-cutoff"), "w")
	e.apply(e.outcome(atCutoff, contract.OutcomeComplete))
	e.advance(time.Hour)
	newer := e.claimJob(e.job("q", "newer"), "w")
	e.apply(e.outcome(newer, contract.OutcomeComplete))
	pending := e.insertOne(e.job("q", "pending"))
	running := e.claimJob(e.job("r", "running"), "w")

	if n := e.archive(contract.StateCompleted, cutoff, 100); n != 1 {
		e.Errorf("Archive(completed, before %s) returned %d; want 1 (only the completed job finished before the cutoff)", ts(cutoff), n)
	}
	if got := ids(e.archived(contract.ListParams{})); !slices.Equal(got, []int64{old[0].ID}) {
		e.Fatalf("after Archive(completed, before %s) the archive holds %v; want [%d], the completed job finished before the cutoff", ts(cutoff), got, old[0].ID)
	}
	for _, j := range []*contract.Job{old[1], old[2], e.get(atCutoff.ID), e.get(newer.ID), e.get(pending.ID), e.get(running.ID)} {
		e.expectUnchanged(j, fmt.Sprintf("Archive(completed, before %s) of a %s job finished at %s", ts(cutoff), j.State, ts(j.FinishedAt)))
	}
	if n := e.archive(contract.StateDiscarded, cutoff, 100); n != 1 {
		e.Errorf("Archive(discarded) returned %d; want 1", n)
	}
	if n := e.archive(contract.StateCancelled, cutoff, 100); n != 1 {
		e.Errorf("Archive(cancelled) returned %d; want 1", n)
	}
	if n := e.archive(contract.StateCompleted, e.now.Add(time.Second), 100); n != 2 {
		e.Errorf("Archive(completed) with a later cutoff returned %d; want 2", n)
	}
	want := []int64{old[0].ID, old[1].ID, old[2].ID, atCutoff.ID, newer.ID}
	slices.Sort(want)
	if got := ids(e.archived(contract.ListParams{})); !slices.Equal(got, want) {
		e.Fatalf("the archive holds %v; want %v (every final job, each once)", got, want)
	}
	e.expectState(pending.ID, contract.StateAvailable, "Archive never touches jobs that are not final")
	e.expectState(running.ID, contract.StateRunning, "Archive never touches jobs that are not final")

	// The limit rule of Prune: a call returns limit while enough qualify.
	for range 25 {
		j := e.claimJob(e.job("many", "k"), "w")
		e.apply(e.outcome(j, contract.OutcomeComplete))
	}
	e.advance(time.Hour)
	var sizes []int
	for range 4 {
		sizes = append(sizes, e.archive(contract.StateCompleted, e.now, 10))
	}
	if !slices.Equal(sizes, []int{10, 10, 5, 0}) {
		e.Fatalf("four Archive calls with limit 10 over 25 old completed jobs returned %v; want [10 10 5 0]", sizes)
	}
}

func testArchiveNonFinal(e *env) {
	a := e.archiver(e.s)
	avail := e.insertOne(e.job("avail", "k"))
	run := e.claimJob(e.job("run", "k"), "w")
	e.advance(2 * time.Hour)
	for _, st := range []contract.State{contract.StateAvailable, contract.StateScheduled, contract.StateRunning, contract.StateRetryable, contract.State("bogus")} {
		n, err := a.Archive(e.ctx, st, e.now.Add(time.Hour), 100)
		e.expectInvalidArgument(err, fmt.Sprintf("Archive of state %q", st))
		if !errors.Is(err, contract.ErrInvalidState) {
			e.Fatalf("Archive of state %q returned error %s; want it to wrap core.ErrInvalidState as well", st, errMsg(err))
		}
		if n != 0 {
			e.Fatalf("Archive of state %q reported %d moved with its error; want 0", st, n)
		}
	}
	for _, j := range []*contract.Job{avail, run} {
		e.expectUnchanged(j, "an Archive of a state that is not final")
	}
	if got := e.archived(contract.ListParams{}); len(got) != 0 {
		e.Fatalf("an Archive of a state that is not final put jobs %v in the archive; want none", ids(got))
	}
}

// testArchiveKeepsEveryField: a job with every field set (args, tags,
// metadata, unique and partition keys, deadline, an error history with a
// cause, a result, every time) reads back from the archive as Get
// returned it before the move, times in UTC.
func testArchiveKeepsEveryField(e *env) {
	a := e.archiver(e.s)
	p := contract.InsertParams{
		Queue:        "Q_1-a.b:c",
		Kind:         "résumé.send/✉ 日本語",
		Args:         json.RawMessage(`{"b": [1, 2.5, "ü ✓ 😀", true], "a": {"nested": null, "n": -7}}`),
		Priority:     3,
		MaxAttempts:  7,
		RunAt:        e.now.In(zone),
		Deadline:     e.now.Add(48 * time.Hour).In(zone),
		UniqueKey:    "ключ-🔑-Ünique",
		UniqueFor:    time.Hour,
		PartitionKey: "tenant-🏢-Ä",
		Tags:         []string{"tag-ä", "标签"},
		Metadata:     map[string]string{"correlation-id": "abc-123", "ключ": "значение ✓", "empty": ""},
	}
	j := e.insertOne(p)
	first := e.claimTags(p.Queue, "w", 1, p.Tags...)
	if len(first) != 1 {
		e.Fatalf("setup: claim of the tagged job returned %d jobs", len(first))
	}
	o := e.outcome(first[0], contract.OutcomeRetry)
	o.Error = &contract.AttemptError{Attempt: 1, At: e.now, Error: "boom ✗", Cause: "handler-error"}
	e.apply(o)
	e.advance(time.Minute)
	second := e.claimTags(p.Queue, "w2", 1, p.Tags...)
	if len(second) != 1 {
		e.Fatalf("setup: second claim of the tagged job returned %d jobs", len(second))
	}
	e.advance(time.Second)
	done := e.outcome(second[0], contract.OutcomeComplete)
	done.Result = []byte(`{"ok":true,"bytes":"\u00e4"}`)
	e.apply(done)
	d := e.claimJob(e.job("plain", "k"), "w")
	od := e.outcome(d, contract.OutcomeDiscard)
	od.Error = &contract.AttemptError{Attempt: 1, At: e.now, Error: "permanent"}
	e.apply(od)

	want := []*contract.Job{e.get(j.ID), e.get(d.ID)}
	e.advance(time.Hour)
	if n := e.archive(contract.StateCompleted, e.now, 10); n != 1 {
		e.Fatalf("Archive(completed) moved %d jobs; want 1", n)
	}
	if n := e.archive(contract.StateDiscarded, e.now, 10); n != 1 {
		e.Fatalf("Archive(discarded) moved %d jobs; want 1", n)
	}
	listed := e.archived(contract.ListParams{})
	if len(listed) != 2 {
		e.Fatalf("ListArchived returned %d jobs; want the 2 archived", len(listed))
	}
	for i, w := range want {
		got, err := a.GetArchived(e.ctx, w.ID)
		if err != nil {
			e.Fatalf("GetArchived(%d) of an archived job: %v", w.ID, err)
		}
		if d := diffJob(got, w); len(d) > 0 {
			e.Errorf("GetArchived(%d) differs from the job Get returned before Archive:\n%s", w.ID, lines(d))
		}
		if d := diffJob(listed[i], w); len(d) > 0 {
			e.Errorf("ListArchived's job %d differs from the job Get returned before Archive:\n%s", w.ID, lines(d))
		}
	}
}

// testArchiveLeavesJobs: an archived job is gone from Get, List and
// Stats; a job that was never archived is not in the archive.
func testArchiveLeavesJobs(e *env) {
	a := e.archiver(e.s)
	done := e.claimJob(e.job("q", "k"), "w")
	e.apply(e.outcome(done, contract.OutcomeComplete))
	live := e.insertOne(e.job("q", "k"))
	e.advance(time.Hour)
	if n := e.archive(contract.StateCompleted, e.now, 10); n != 1 {
		e.Fatalf("Archive(completed) moved %d jobs; want 1", n)
	}
	if _, err := e.s.Get(e.ctx, done.ID); !errors.Is(err, contract.ErrNotFound) {
		e.Errorf("Get(%d) of an archived job returned %s; want an error wrapping core.ErrNotFound (a job is never in both tables)", done.ID, errMsg(err))
	}
	if got := ids(e.list(contract.ListParams{})); !slices.Equal(got, []int64{live.ID}) {
		e.Errorf("List after Archive returned %v; want only the live job %d", got, live.ID)
	}
	if st := e.stats()["q"].Counts; st[contract.StateCompleted] != 0 || st[contract.StateAvailable] != 1 {
		e.Errorf("Stats after Archive counts %v in queue q; want the 1 available job only (archived jobs are not counted)", st)
	}
	for _, id := range []int64{live.ID, missingID} {
		if _, err := a.GetArchived(e.ctx, id); !errors.Is(err, contract.ErrNotFound) {
			e.Errorf("GetArchived(%d) of a job not in the archive returned %s; want an error wrapping core.ErrNotFound", id, errMsg(err))
		}
	}
}

// testArchiveKeyHeld: for unique keys an archived job is a pruned one:
// its key stays held until FinishedAt + UniqueFor, a key without a window
// is free at once, and an ended hold lets a new job in.
func testArchiveKeyHeld(e *env) {
	e.archiver(e.s)
	windowed := uniqueJob(e, "archived-window", "k")
	windowed.UniqueFor = time.Hour
	w := e.claimJob(windowed, "w")
	e.apply(e.outcome(w, contract.OutcomeComplete))
	bare := uniqueJob(e, "archived-bare", "k")
	b := e.claimJob(bare, "w")
	e.apply(e.outcome(b, contract.OutcomeComplete))
	e.advance(time.Minute)
	if n := e.archive(contract.StateCompleted, e.now, 10); n != 2 {
		e.Fatalf("Archive(completed) moved %d jobs; want 2", n)
	}
	got := e.expectHeldBy(windowed, w.ID, fmt.Sprintf("job %d completed a minute ago with UniqueFor 1h and was archived: the key stays held until %s as after Prune", w.ID, ts(w.FinishedAt.Add(time.Hour))))
	e.expectGoneHolder(got, w)
	e.expectFresh(bare, fmt.Sprintf("job %d had no unique window and was archived: its key is free, as after Prune", b.ID))
	e.advance(2 * time.Hour)
	e.archive(contract.StateCompleted, e.now, 10)
	e.expectFresh(windowed, fmt.Sprintf("the window of archived job %d ended at %s", w.ID, ts(w.FinishedAt.Add(time.Hour))))
}

// testPruneArchive: PruneArchive deletes archived jobs finished before
// its cutoff, whatever their state, never later ones, and respects its
// limit.
func testPruneArchive(e *env) {
	a := e.archiver(e.s)
	old := finalJobs(e)
	e.advance(time.Hour)
	cutoff := e.now
	var newer []*contract.Job
	for range 25 {
		j := e.claimJob(e.job("q", "newer"), "w")
		e.apply(e.outcome(j, contract.OutcomeComplete))
		newer = append(newer, j)
	}
	e.advance(time.Hour)
	for _, st := range []contract.State{contract.StateCompleted, contract.StateCancelled, contract.StateDiscarded} {
		e.archive(st, e.now, 100)
	}
	n, err := a.PruneArchive(e.ctx, cutoff, 100)
	if err != nil || n != len(old) {
		e.Fatalf("PruneArchive(before %s) returned %d, %v; want %d (the completed, cancelled and discarded jobs finished before it)", ts(cutoff), n, err, len(old))
	}
	if got := ids(e.archived(contract.ListParams{})); !slices.Equal(got, ids(newer)) {
		e.Fatalf("after PruneArchive(before %s) the archive holds %v; want the %d jobs finished after it", ts(cutoff), got, len(newer))
	}
	var sizes []int
	for range 4 {
		n, err := a.PruneArchive(e.ctx, e.now, 10)
		if err != nil {
			e.Fatalf("PruneArchive(limit 10): %v", err)
		}
		sizes = append(sizes, n)
	}
	if !slices.Equal(sizes, []int{10, 10, 5, 0}) {
		e.Fatalf("four PruneArchive calls with limit 10 over 25 archived jobs returned %v; want [10 10 5 0]", sizes)
	}
}

// testArchiveConcurrent: archivers on two handles (when Factory.Reopen is
// set) move every job exactly once: the counts add up, the archive holds
// each job once, and the jobs table holds none of them.
func testArchiveConcurrent(e *env) {
	const jobs = 300
	insertMany(e, "q", jobs)
	for {
		got := e.claim("q", "w", 100)
		if len(got) == 0 {
			break
		}
		outs := make([]contract.Outcome, len(got))
		for i, j := range got {
			outs[i] = e.outcome(j, contract.OutcomeComplete)
		}
		e.finish(outs...)
	}
	e.advance(time.Hour)
	archivers := []contract.Archiver{e.archiver(e.s)}
	if e.f.Reopen != nil {
		archivers = append(archivers, e.archiver(e.f.Reopen(e.T, e.s)))
	}
	ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
	defer cancel()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		moved int
		errs  []error
	)
	for i := range 4 {
		a := archivers[i%len(archivers)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				n, err := a.Archive(ctx, contract.StateCompleted, e.now, 20)
				mu.Lock()
				moved += n
				if err != nil {
					errs = append(errs, err)
				}
				mu.Unlock()
				if err != nil || n == 0 {
					return
				}
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		e.Fatalf("concurrent Archive calls failed: %v", errs)
	}
	if moved != jobs {
		e.Errorf("concurrent Archive calls reported %d jobs moved in all; want %d, each job once", moved, jobs)
	}
	got := e.archivedAll(contract.ListParams{Limit: 100})
	seen := make(map[int64]bool, len(got))
	for _, id := range got {
		if seen[id] {
			e.Fatalf("job %d is in the archive twice after concurrent Archive calls", id)
		}
		seen[id] = true
	}
	if len(got) != jobs {
		e.Errorf("the archive holds %d jobs after concurrent Archive calls; want %d", len(got), jobs)
	}
	if left := e.list(contract.ListParams{Queue: "q"}); len(left) != 0 {
		e.Errorf("the jobs still hold %d archived jobs (first %d); want none: a job is never in both", len(left), left[0].ID)
	}
}

// testArchiveList: ListArchived filters, orders and pages as List does:
// by id forward and backward, by (run_at, id), and with the default limit.
func testArchiveList(e *env) {
	e.archiver(e.s)
	var all []*contract.Job
	for i, d := range []time.Duration{5, 1, 3, 1, 4, 3, 2, 1, 6, 2, 5} {
		p := e.job("a", "k")
		if i%4 == 3 {
			p.Queue = "b"
		}
		p.RunAt = e.now.Add(-d * time.Minute)
		j := e.claimJob(p, "w")
		e.apply(e.outcome(j, contract.OutcomeComplete))
		all = append(all, e.get(j.ID))
	}
	e.insertOne(e.job("a", "live")) // not archived
	e.advance(time.Hour)
	e.archive(contract.StateCompleted, e.now, 100)

	var inA []*contract.Job
	for _, j := range all {
		if j.Queue == "a" {
			inA = append(inA, j)
		}
	}
	want := ids(inA)
	if got := e.archivedAll(contract.ListParams{Queue: "a", Limit: 3}); !slices.Equal(got, want) {
		e.Errorf("paging the archive of queue a by id with Limit 3 returned %v; want %v", got, want)
	}
	rev := slices.Clone(want)
	slices.Reverse(rev)
	if got := e.archivedAll(contract.ListParams{Queue: "a", Limit: 3, Desc: true}); !slices.Equal(got, rev) {
		e.Errorf("paging the archive of queue a by id with Desc and Limit 3 returned %v; want %v", got, rev)
	}
	byRun := slices.Clone(inA)
	slices.SortFunc(byRun, func(a, b *contract.Job) int {
		if c := a.RunAt.Compare(b.RunAt); c != 0 {
			return c
		}
		return int(a.ID - b.ID)
	})
	if got := e.archivedAll(contract.ListParams{Queue: "a", Limit: 2, ByRunAt: true}); !slices.Equal(got, ids(byRun)) {
		e.Errorf("paging the archive of queue a by run_at with Limit 2 returned %v; want %v", got, ids(byRun))
	}
	if got := e.archived(contract.ListParams{States: []contract.State{contract.StateCancelled}}); len(got) != 0 {
		e.Errorf("ListArchived of cancelled jobs returned %v; want none", ids(got))
	}
	if got := e.archived(contract.ListParams{Kind: "live"}); len(got) != 0 {
		e.Errorf("ListArchived returned the live job %v; want only archived jobs", ids(got))
	}
	if _, err := e.archiver(e.s).ListArchived(e.ctx, contract.ListParams{ArgsContains: []byte(`[1]`)}); !errors.Is(err, contract.ErrInvalidFilter) {
		e.Errorf("ListArchived with ArgsContains [1] returned %s; want an error wrapping core.ErrInvalidFilter", errMsg(err))
	}
}
