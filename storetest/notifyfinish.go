package storetest

import (
	"slices"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

var notifyFinishTests = []test{
	{"notify/finish-notifies-final-jobs", testNotifyFinishFinal},
	{"notify/finish-tx-notifies-on-commit-only", testNotifyFinishTx},
	{"notify/delete-notifies-finish", testNotifyFinishDelete},
}

// finishNotifier skips unless the store declares contract.FinishNotifier
// and says it notifies finishes in its configuration.
func (e *env) finishNotifier() {
	e.Helper()
	fn, ok := e.s.(contract.FinishNotifier)
	if !ok {
		e.Skip("the store does not implement contract.FinishNotifier")
	}
	if !fn.NotifiesFinish() {
		e.Skip("the store does not notify finishes in this configuration (NotifiesFinish is false)")
	}
}

// awaitFinishes waits for a NotifyFinish naming each of ids, in any order,
// and fails on one naming an id of never; it ignores other notifications.
// Once every wanted id arrived it keeps reading until a NotifyInsert for
// queue marker (inserted by the caller after the changes) so that a
// notification for an id of never sent before the marker is seen.
func (e *env) awaitFinishes(ch <-chan contract.Notification, ids, never []int64, marker, after string) {
	e.Helper()
	want := map[int64]bool{}
	for _, id := range ids {
		want[id] = true
	}
	markerSeen := false
	timeout := time.NewTimer(notifyWait)
	defer timeout.Stop()
	var seen []contract.Notification
	for len(want) > 0 || !markerSeen {
		select {
		case n, ok := <-ch:
			if !ok {
				e.Fatalf("the Listen channel closed while waiting for NotifyFinish after %s; it must stay open until the listener's context ends", after)
			}
			switch {
			case n.Kind == contract.NotifyFinish && slices.Contains(never, n.JobID):
				e.Fatalf("a NotifyFinish for job %d arrived after %s, but that job did not reach a final state (or its change was not committed); a FinishNotifier notifies only committed finishes", n.JobID, after)
			case n.Kind == contract.NotifyFinish:
				delete(want, n.JobID)
			case n.Kind == contract.NotifyInsert && n.Queue == marker:
				markerSeen = true
			default:
				seen = append(seen, n)
			}
		case <-timeout.C:
			e.Fatalf("after %s: NotifyFinish still missing for job(s) %v within %s (marker insert seen: %v; other notifications: %+v); a store that declares contract.FinishNotifier must send one for every job made final", after, slices.Sorted(mapKeys(want)), notifyWait, markerSeen, seen)
		}
	}
}

// testNotifyFinishFinal: one Finish with outcomes of every kind notifies
// exactly the jobs it made final (completed, completed and deleted,
// cancelled, discarded), not those it retried or snoozed, nor one whose
// fence failed.
func testNotifyFinishFinal(e *env) {
	e.finishNotifier()
	ch := e.listen(e.ctx)
	var final, other []int64
	var os []contract.Outcome
	add := func(k contract.OutcomeKind, del, isFinal bool) {
		j := e.claimJob(e.job("fin", "k"), "w")
		o := e.outcome(j, k)
		o.Delete = del
		if k == contract.OutcomeRetry || k == contract.OutcomeSnooze {
			o.RunAt = e.now.Add(time.Hour)
		}
		os = append(os, o)
		if isFinal {
			final = append(final, j.ID)
		} else {
			other = append(other, j.ID)
		}
	}
	add(contract.OutcomeComplete, false, true)
	add(contract.OutcomeComplete, true, true)
	add(contract.OutcomeCancel, false, true)
	add(contract.OutcomeDiscard, false, true)
	add(contract.OutcomeRetry, false, false)
	add(contract.OutcomeSnooze, false, false)
	// A completion whose fence fails changes nothing and notifies nothing.
	stale := e.claimJob(e.job("fin", "k"), "w")
	bad := e.outcome(stale, contract.OutcomeComplete)
	bad.WorkerID = "someone-else"
	os = append(os, bad)
	other = append(other, stale.ID)
	res := e.finish(os...)
	for i, r := range res[:len(res)-1] {
		if !r.Applied {
			e.Fatalf("Finish outcome %d (%s of job %d) was not applied; its fence holds", i, os[i].Kind, r.JobID)
		}
	}
	e.insertOne(e.job("fin-marker", "k"))
	e.awaitFinishes(ch, final, other, "fin-marker", "one Finish that completed (twice, once deleting the row), cancelled and discarded jobs")
}

// testNotifyFinishTx: a CompleteTx notifies its job's finish when the
// transaction commits, never when it rolls back.
func testNotifyFinishTx(e *env) {
	e.finishNotifier()
	tc := e.txCompleter()
	ch := e.listen(e.ctx)
	rolled := e.claimJob(e.job("fintx", "k"), "w")
	tx, _, rollback := e.begin()
	if err := tc.CompleteTx(e.ctx, tx, e.outcome(rolled, contract.OutcomeComplete)); err != nil {
		_ = rollback()
		e.Fatalf("CompleteTx of a running job: unexpected error: %v", err)
	}
	if err := rollback(); err != nil {
		e.Fatalf("rollback: %v", err)
	}
	done := e.claimJob(e.job("fintx", "k"), "w")
	tx, commit, rollback := e.begin()
	if err := tc.CompleteTx(e.ctx, tx, e.outcome(done, contract.OutcomeComplete)); err != nil {
		_ = rollback()
		e.Fatalf("CompleteTx of a running job: unexpected error: %v", err)
	}
	if err := commit(); err != nil {
		e.Fatalf("commit: %v", err)
	}
	e.insertOne(e.job("fintx-marker", "k"))
	e.awaitFinishes(ch, []int64{done.ID}, []int64{rolled.ID}, "fintx-marker", "a committed CompleteTx and a rolled-back one")
}

// testNotifyFinishDelete: Delete of a job notifies its finish, so that a
// waiter learns it is gone.
func testNotifyFinishDelete(e *env) {
	e.finishNotifier()
	ch := e.listen(e.ctx)
	j := e.insertOne(e.job("findel", "k"))
	if err := e.s.Delete(e.ctx, j.ID); err != nil {
		e.Fatalf("Delete(%d): unexpected error: %v", j.ID, err)
	}
	e.insertOne(e.job("findel-marker", "k"))
	e.awaitFinishes(ch, []int64{j.ID}, nil, "findel-marker", "Delete of a job")
}
