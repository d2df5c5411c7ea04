package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
)

var closeTests = []test{
	{"close/calls-after-close-return-err-closed", testCallsAfterClose},
}

// The rules below each check one sentence of the contract.Store contract that
// names them ("storetest rule area/name"); they are listed with the other
// rules of their area.

// awaitCancels waits for a NotifyCancel naming each of jobs by id, in any
// order, ignoring other notifications.
func (e *env) awaitCancels(ch <-chan contract.Notification, jobs []*contract.Job, after string) {
	e.Helper()
	want := map[int64]bool{}
	for _, j := range jobs {
		want[j.ID] = true
	}
	timeout := time.NewTimer(notifyWait)
	defer timeout.Stop()
	var seen []contract.Notification
	for len(want) > 0 {
		select {
		case n, ok := <-ch:
			if !ok {
				e.Fatalf("the Listen channel closed while waiting for NotifyCancel after %s; it must stay open until the listener's context ends", after)
			}
			if n.Kind == contract.NotifyCancel && want[n.JobID] {
				delete(want, n.JobID)
				continue
			}
			seen = append(seen, n)
		case <-timeout.C:
			e.Fatalf("no NotifyCancel for job(s) %v arrived within %s after %s (saw %+v); a store that declares contract.Notifier must deliver one, with the job's id, for every cancel, whatever state the job was in", slices.Sorted(mapKeys(want)), notifyWait, after, seen)
		}
	}
}

// awaitQueues waits for a notification of kind k for each of queues, in
// any order, ignoring others.
func (e *env) awaitQueues(ch <-chan contract.Notification, k contract.NotificationKind, queues []string, after string) {
	e.Helper()
	want := map[string]bool{}
	for _, q := range queues {
		want[q] = true
	}
	timeout := time.NewTimer(notifyWait)
	defer timeout.Stop()
	var seen []contract.Notification
	for len(want) > 0 {
		select {
		case n, ok := <-ch:
			if !ok {
				e.Fatalf("the Listen channel closed while waiting for %q notifications after %s; it must stay open until the listener's context ends", k, after)
			}
			if n.Kind == k && want[n.Queue] {
				delete(want, n.Queue)
				continue
			}
			seen = append(seen, n)
		case <-timeout.C:
			e.Fatalf("no %q notification for queue(s) %q arrived within %s after %s (saw %+v); a store that declares contract.Notifier must deliver one for every queue that got due jobs", k, slices.Sorted(mapKeys(want)), notifyWait, after, seen)
		}
	}
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// testNotifyEveryCancel: Cancel sends a NotifyCancel whatever the state of
// the job it cancels, not only for running ones.
func testNotifyEveryCancel(e *env) {
	ch := e.listen(e.ctx)
	avail := e.insertOne(e.job("cancel-avail", "k"))
	schedP := e.job("cancel-sched", "k")
	schedP.RunAt = e.now.Add(time.Hour)
	sched := e.insertOne(schedP)
	run := e.claimJob(e.job("cancel-run", "k"), "w")
	for _, j := range []*contract.Job{avail, sched, run} {
		if _, err := e.s.Cancel(e.ctx, j.ID, e.now); err != nil {
			e.Fatalf("Cancel(%d) of a %s job: unexpected error: %v", j.ID, j.State, err)
		}
	}
	e.awaitCancels(ch, []*contract.Job{avail, sched, run}, "Cancel of an available, a scheduled and a running job")
}

// testNotifyBatchEveryQueue: one Insert with due jobs in several queues
// wakes the listeners of every one of them.
func testNotifyBatchEveryQueue(e *env) {
	ch := e.listen(e.ctx)
	later := e.job("batch-c", "k")
	later.RunAt = e.now.Add(time.Hour)
	e.insert(later, e.job("batch-a", "k"), e.job("batch-b", "k"), e.job("batch-a", "k"), e.job("batch-d", "k"))
	e.awaitQueues(ch, contract.NotifyInsert, []string{"batch-a", "batch-b", "batch-d"}, "one Insert with due jobs in queues batch-a, batch-b and batch-d")
}

// testNotifyTxRollback: an InsertTx whose transaction rolls back wakes no
// listener: the notification goes with the commit, or not at all.
func testNotifyTxRollback(e *env) {
	ti := e.txInserter()
	ch := e.listen(e.ctx)
	tx, _, rollback := e.begin()
	e.insertTx(ti, tx, e.job("rolled-back", "k"))
	if err := rollback(); err != nil {
		e.Fatalf("rollback: %v", err)
	}
	// A later insert outside any transaction: its notification comes
	// after any the rolled-back insert might have sent.
	e.insertOne(e.job("after-rollback", "k"))
	timeout := time.NewTimer(notifyWait)
	defer timeout.Stop()
	marker := false
	var grace <-chan time.Time
	for {
		select {
		case n, ok := <-ch:
			if !ok {
				e.Fatal("the Listen channel closed; it must stay open until the listener's context ends")
			}
			if n.Kind == contract.NotifyInsert && n.Queue == "rolled-back" {
				e.Fatalf("a NotifyInsert for queue \"rolled-back\" arrived, but its only insert was an InsertTx that was rolled back; a store sends the insert notification of a transactional insert only if the transaction commits")
			}
			if n.Kind == contract.NotifyInsert && n.Queue == "after-rollback" && !marker {
				marker = true
				grace = time.After(300 * time.Millisecond)
			}
		case <-grace:
			return
		case <-timeout.C:
			if !marker {
				e.Fatalf("no NotifyInsert for queue \"after-rollback\" arrived within %s after an Insert of a due job; a store that declares contract.Notifier must deliver it", notifyWait)
			}
			return
		}
	}
}

// expectInvalidArgument fails unless err wraps core.ErrInvalidArgument.
func (e *env) expectInvalidArgument(err error, call string) {
	e.Helper()
	if !errors.Is(err, contract.ErrInvalidArgument) {
		e.Fatalf("%s returned error %s; want an error wrapping core.ErrInvalidArgument (an argument the engine never produces) that changes nothing", call, errMsg(err))
	}
}

func testClaimLimitBelowOne(e *env) {
	j := e.insertOne(e.job("q", "k"))
	for _, limit := range []int{0, -1} {
		got, err := e.s.Claim(e.ctx, contract.ClaimParams{Queue: "q", WorkerID: "w", Limit: limit, Now: e.now, LeaseUntil: e.now.Add(lease)})
		e.expectInvalidArgument(err, fmt.Sprintf("Claim with Limit %d", limit))
		if len(got) != 0 {
			e.Fatalf("Claim with Limit %d returned %d jobs with its error; want none", limit, len(got))
		}
		e.expectUnchanged(j, fmt.Sprintf("a Claim with Limit %d", limit))
	}
}

func testPruneNonFinal(e *env) {
	avail := e.insertOne(e.job("avail", "k"))
	schedP := e.job("sched", "k")
	schedP.RunAt = e.now.Add(3 * time.Hour)
	sched := e.insertOne(schedP)
	run := e.claimJob(e.job("run", "k"), "w")
	retry := e.claimJob(e.job("retry", "k"), "w")
	e.apply(e.outcome(retry, contract.OutcomeRetry))
	retry = e.get(retry.ID)
	e.advance(2 * time.Hour)
	for _, st := range []contract.State{contract.StateAvailable, contract.StateScheduled, contract.StateRunning, contract.StateRetryable, contract.State("bogus")} {
		n, err := e.s.Prune(e.ctx, st, e.now.Add(time.Hour), 100)
		e.expectInvalidArgument(err, fmt.Sprintf("Prune of state %q", st))
		if !errors.Is(err, contract.ErrInvalidState) {
			e.Fatalf("Prune of state %q returned error %s; want it to wrap core.ErrInvalidState as well", st, errMsg(err))
		}
		if n != 0 {
			e.Fatalf("Prune of state %q reported %d deleted with its error; want 0", st, n)
		}
	}
	for _, j := range []*contract.Job{avail, sched, run, retry} {
		e.expectUnchanged(j, "a Prune of a state that is not final")
	}
}

func testFinishUnknownKind(e *env) {
	insertMany(e, "q", 2)
	got := e.claim("q", "w", 2)
	if len(got) != 2 {
		e.Fatalf("setup: claimed %d of 2", len(got))
	}
	good := e.outcome(got[0], contract.OutcomeComplete)
	bad := e.outcome(got[1], contract.OutcomeKind("explode"))
	res, err := e.s.Finish(e.ctx, []contract.Outcome{good, bad})
	e.expectInvalidArgument(err, "Finish of a batch with an outcome of unknown kind \"explode\"")
	if len(res) != 0 {
		e.Fatalf("Finish with an outcome of unknown kind returned results %+v with its error; want none", res)
	}
	e.expectUnchanged(got[0], "a Finish whose batch holds an outcome of unknown kind (the whole batch fails before any outcome applies)")
	e.expectUnchanged(got[1], "a Finish with an outcome of unknown kind")
}

// testRescueOldestLeaseFirst: Rescue with a limit takes the expired leases
// in LeaseUntil order (then id), not in id order.
func testRescueOldestLeaseFirst(e *env) {
	insertMany(e, "q", 4)
	// Claimed in id order, with leases in another order: ids 1..4 get
	// leases ending +20 s, +0 s, +10 s and +0 s after the base.
	base := e.now.Add(lease)
	var jobs []*contract.Job
	for _, d := range []time.Duration{20 * time.Second, 0, 10 * time.Second, 0} {
		c := e.claimWith(contract.ClaimParams{Queue: "q", WorkerID: "w", Limit: 1, Now: e.now, LeaseUntil: base.Add(d)})
		if len(c) != 1 {
			e.Fatalf("setup: claim returned %d jobs; want 1", len(c))
		}
		jobs = append(jobs, c[0])
	}
	want := []*contract.Job{jobs[1], jobs[3], jobs[2], jobs[0]}
	e.now = base.Add(time.Minute)
	var order []int64
	for range want {
		got := e.rescue(1)
		if len(got) != 1 {
			e.Fatalf("Rescue with limit 1 returned %d jobs after %v; want 1 (expired leases remain)", len(got), order)
		}
		order = append(order, got[0].ID)
	}
	if !slices.Equal(order, ids(want)) {
		e.Fatalf("Rescue with limit 1, called four times, took jobs %v (leases %s, %s, %s, %s by id); want %v: the oldest lease first, then id",
			order, ts(jobs[0].LeaseUntil), ts(jobs[1].LeaseUntil), ts(jobs[2].LeaseUntil), ts(jobs[3].LeaseUntil), ids(want))
	}
}

// testRescueWorkersIDOrder: RescueWorkers with a limit takes the jobs of
// all dead workers in job id order, not worker by worker.
func testRescueWorkersIDOrder(e *env) {
	for _, w := range []string{"w-a", "w-b", "w-c"} {
		e.register(e.worker(w))
	}
	var jobs []*contract.Job
	for _, w := range []string{"w-b", "w-c", "w-a", "w-b"} {
		jobs = append(jobs, e.claimJob(e.job("q", "k"), w))
	}
	e.advance(time.Minute)
	var order []int64
	for range jobs {
		got := e.rescueWorkers(e.now, 1)
		if len(got) != 1 {
			e.Fatalf("RescueWorkers with limit 1 returned %d jobs after %v; want 1 (jobs of dead workers remain)", len(got), order)
		}
		order = append(order, got[0].ID)
	}
	if !slices.Equal(order, ids(jobs)) {
		e.Fatalf("RescueWorkers with limit 1, called four times, took jobs %v (held by w-b, w-c, w-a, w-b in id order); want %v: jobs in id order across all dead workers", order, ids(jobs))
	}
}

func testRateStatesSorted(e *env) {
	ql := e.limiter(e.s)
	r := contract.RateLimit{Starts: 100, Per: time.Minute}
	e.setLimits("rated", contract.QueueLimits{Rate: r, RatePerKind: map[string]contract.RateLimit{"b": r, "a": r, "B": r}, RatePerPartition: r})
	for _, kp := range [][2]string{{"b", "z"}, {"a", "y"}, {"B", "Z"}, {"a", "z"}} {
		e.insertOne(e.jobIn("rated", kp[0], kp[1]))
	}
	if got := e.claim("rated", "w", 10); len(got) != 4 {
		e.Fatalf("setup: claimed %d of 4 jobs under a rate of 100 a minute", len(got))
	}
	states, err := ql.QueueRateStates(e.ctx, "rated", e.now)
	if err != nil {
		e.Fatalf("QueueRateStates: unexpected error: %v", err)
	}
	groups := make([]string, len(states))
	for i, st := range states {
		groups[i] = st.Group
	}
	if len(groups) < 2 || !slices.IsSorted(groups) || len(slices.Compact(slices.Clone(groups))) != len(groups) {
		e.Fatalf("QueueRateStates returned groups %q; want every group in use (queue, three kinds, three partitions), once each, sorted by group in byte order", groups)
	}
}

// testPruneFreesEndedHolds: a pruned job's key is free once its hold has
// ended, whether it had a window or not.
func testPruneFreesEndedHolds(e *env) {
	var ps []contract.InsertParams
	var jobs []*contract.Job
	for _, k := range []struct {
		key       string
		uniqueFor time.Duration
	}{{"no-window", 0}, {"short-window", time.Minute}} {
		p := uniqueJob(e, k.key, "k")
		p.UniqueFor = k.uniqueFor
		ps = append(ps, p)
		j := e.claimJob(p, "w")
		e.apply(e.outcome(j, contract.OutcomeComplete))
		jobs = append(jobs, j)
	}
	e.advance(2 * time.Minute)
	if n := e.prune(contract.StateCompleted, e.now, 100); n != 2 {
		e.Fatalf("Prune(completed, before now) deleted %d jobs; want the 2 completed ones", n)
	}
	for i, p := range ps {
		e.expectFresh(p, fmt.Sprintf("job %d held the key until %s (UniqueFor %s after it completed) and was then pruned: the key is free", jobs[i].ID, ts(start.Add(p.UniqueFor)), p.UniqueFor))
	}
}

// testCallsAfterClose: every method of a closed store returns an error
// wrapping core.ErrClosed, and never panics.
func testCallsAfterClose(e *env) {
	s := e.s
	j := e.insertOne(e.job("q", "k"))
	run := e.claimJob(e.job("q2", "k"), "w")
	e.register(e.worker("w"))
	if err := s.Close(); err != nil {
		e.Fatalf("Close: unexpected error: %v", err)
	}
	decide := e.decide(core.CauseLeaseExpired)
	o := e.outcome(run, contract.OutcomeComplete)
	calls := []struct {
		name string
		fn   func() error
	}{
		{"Insert", func() error { _, err := s.Insert(e.ctx, e.now, []contract.InsertParams{e.job("q", "k")}); return err }},
		{"Claim", func() error {
			_, err := s.Claim(e.ctx, contract.ClaimParams{Queue: "q", WorkerID: "w", Limit: 1, Now: e.now, LeaseUntil: e.now.Add(lease)})
			return err
		}},
		{"Finish", func() error { _, err := s.Finish(e.ctx, []contract.Outcome{o}); return err }},
		{"ExtendLeases", func() error { _, err := s.ExtendLeases(e.ctx, "w", leases(run), e.now.Add(time.Hour)); return err }},
		{"Rescue", func() error { _, err := s.Rescue(e.ctx, e.now.Add(time.Hour), 10, decide); return err }},
		{"RescueWorkers", func() error {
			_, err := s.RescueWorkers(e.ctx, e.now.Add(time.Hour), e.now.Add(time.Hour), 10, decide)
			return err
		}},
		{"DiscardExpired", func() error { _, err := s.DiscardExpired(e.ctx, e.now, 10); return err }},
		{"Prune", func() error { _, err := s.Prune(e.ctx, contract.StateCompleted, e.now, 10); return err }},
		{"Get", func() error { _, err := s.Get(e.ctx, j.ID); return err }},
		{"List", func() error { _, err := s.List(e.ctx, contract.ListParams{}); return err }},
		{"Stats", func() error { _, err := s.Stats(e.ctx); return err }},
		{"Cancel", func() error { _, err := s.Cancel(e.ctx, j.ID, e.now); return err }},
		{"Retry", func() error { _, err := s.Retry(e.ctx, j.ID, e.now); return err }},
		{"Delete", func() error { return s.Delete(e.ctx, j.ID) }},
		{"PauseQueue", func() error { return s.PauseQueue(e.ctx, "q", e.now) }},
		{"ResumeQueue", func() error { return s.ResumeQueue(e.ctx, "q", e.now) }},
		{"RegisterWorker", func() error { return s.RegisterWorker(e.ctx, e.worker("w2")) }},
		{"DeregisterWorker", func() error { return s.DeregisterWorker(e.ctx, "w") }},
		{"Workers", func() error { _, err := s.Workers(e.ctx); return err }},
		{"Worker", func() error { _, err := s.Worker(e.ctx, "w"); return err }},
		{"RemoveDeadWorkers", func() error { _, err := s.RemoveDeadWorkers(e.ctx, e.now.Add(time.Hour)); return err }},
	}
	if n, ok := s.(contract.Notifier); ok {
		calls = append(calls, struct {
			name string
			fn   func() error
		}{"Listen", func() error { _, err := n.Listen(e.ctx); return err }})
	}
	if l, ok := s.(contract.QueueLimiter); ok {
		calls = append(calls, struct {
			name string
			fn   func() error
		}{"QueueLimits", func() error { _, err := l.QueueLimits(e.ctx, "q"); return err }})
	}
	if st, ok := s.(contract.Settings); ok {
		calls = append(calls, struct {
			name string
			fn   func() error
		}{"Setting", func() error { _, err := st.Setting(e.ctx, "k"); return err }})
	}
	var bad []string
	for _, c := range calls {
		err, panicked := func() (err error, p any) {
			defer func() { p = recover() }()
			return c.fn(), nil
		}()
		switch {
		case panicked != nil:
			bad = append(bad, fmt.Sprintf("%s panicked: %v", c.name, panicked))
		case !errors.Is(err, contract.ErrClosed):
			bad = append(bad, fmt.Sprintf("%s returned %s", c.name, errMsg(err)))
		}
	}
	if len(bad) > 0 {
		e.Fatalf("after Close, every method must return an error wrapping core.ErrClosed, never panic:\n%s", lines(bad))
	}
	if err := s.Close(); err != nil {
		e.Fatalf("a second Close returned %v; want nil", err)
	}
}

// testExtendNonUTC: ExtendLeases keeps the instant of a non-UTC until and
// returns it in UTC.
func testExtendNonUTC(e *env) {
	j := e.claimJob(e.job("q", "k"), "w")
	until := e.now.Add(time.Hour + 7*time.Microsecond).In(time.FixedZone("UTC-7", -7*3600))
	n, err := e.s.ExtendLeases(e.ctx, "w", leases(j), until)
	if err != nil || n != 1 {
		e.Fatalf("ExtendLeases of the worker's one running job = %d, %v; want 1, nil", n, err)
	}
	check := func(got *contract.Job, via string) {
		e.Helper()
		if !got.LeaseUntil.Equal(until) || got.LeaseUntil.Location() != time.UTC {
			e.Fatalf("%s returned LeaseUntil %s after ExtendLeases to %s; want the same instant in UTC (a store returns every time in UTC, whatever location it was handed)", via, ts(got.LeaseUntil), ts(until))
		}
	}
	check(e.get(j.ID), "Get")
	listed := e.list(contract.ListParams{Queue: "q", States: []contract.State{contract.StateRunning}})
	if len(listed) != 1 {
		e.Fatalf("List of running jobs returned %d; want 1", len(listed))
	}
	check(listed[0], "List")
	// The lease ends at that instant, whatever the location it came in:
	// a second before it, Rescue leaves the job alone; a second after,
	// it takes it.
	e.now = until.UTC().Add(-time.Second)
	if got := e.rescue(10); len(got) != 0 {
		e.Fatalf("Rescue at %s took job %d, whose lease ExtendLeases set to %s, a second later; a store keeps the instant it is handed, whatever its location", ts(e.now), got[0].ID, ts(until))
	}
	e.now = until.UTC().Add(time.Second)
	if got := e.rescue(10); len(got) != 1 || got[0].ID != j.ID {
		e.Fatalf("Rescue at %s returned %v; want job %d, whose lease ExtendLeases set to %s, a second earlier", ts(e.now), ids(got), j.ID, ts(until))
	}
}

// testStatsOnlyPersistedPauses: Stats shows a queue paused exactly while
// a PauseQueue is in force, on every handle.
func testStatsOnlyPersistedPauses(e *env) {
	e.insertOne(e.job("never-paused", "k"))
	e.insertOne(e.job("resumed", "k"))
	e.pause("resumed")
	e.resume("resumed")
	e.insertOne(e.job("paused", "k"))
	e.pause("paused")
	notPaused := []string{"never-paused", "resumed"}
	if _, ok := e.s.(contract.QueueLimiter); ok {
		lim := contract.QueueLimits{MaxRunning: 2, Rate: contract.RateLimit{Starts: 5, Per: time.Minute}}
		e.setLimits("limited", lim)
		e.insertOne(e.job("limited", "k"))
		e.setLimits("limited-empty", lim)
		notPaused = append(notPaused, "limited", "limited-empty")
	}
	check := func(s contract.Store, handle string) {
		e.Helper()
		st, err := s.Stats(e.ctx)
		if err != nil {
			e.Fatalf("Stats (%s): unexpected error: %v", handle, err)
		}
		m := map[string]contract.QueueStats{}
		for _, q := range st {
			m[q.Queue] = q
		}
		for _, q := range notPaused {
			if m[q].Paused {
				e.Fatalf("Stats (%s) shows queue %q paused; want Paused only while a persisted PauseQueue is in force (never paused, resumed, or with only QueueLimits stored)", handle, q)
			}
		}
		if p, ok := m["paused"]; !ok || !p.Paused || p.Counts[contract.StateAvailable] != 1 {
			e.Fatalf("Stats (%s) entry for queue \"paused\": %+v (listed %v); want Paused=true with its 1 available job (the pause is persisted)", handle, p, ok)
		}
	}
	check(e.s, "this handle")
	if e.f.Reopen != nil {
		other := e.f.Reopen(e.T, e.s)
		check(other, "a second handle")
		if err := other.ResumeQueue(e.ctx, "paused", e.now); err != nil {
			e.Fatalf("ResumeQueue on a second handle: %v", err)
		}
		notPaused = append(notPaused, "paused")
		for _, s := range []contract.Store{e.s, other} {
			st, err := s.Stats(e.ctx)
			if err != nil {
				e.Fatalf("Stats: %v", err)
			}
			for _, q := range st {
				if q.Paused {
					e.Fatalf("Stats shows queue %q paused after the only pause was resumed on a second handle; a pause is persisted, not kept per handle (%s)", q.Queue, strings.Join(notPaused, ", "))
				}
			}
		}
	}
}
