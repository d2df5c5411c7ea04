package storetest

import (
	"context"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

var notifyTests = []test{
	{"notify/insert-of-due-job-wakes-listener", testNotifyInsert},
	{"notify/pause-and-resume-notify", testNotifyPause},
	{"notify/channel-closes-when-context-ends", testNotifyClose},
	{"notify/tx-insert-committed-after-a-later-insert-wakes-listener", testNotifyLateCommit},
	{"notify/every-cancel-notifies", testNotifyEveryCancel},
	{"notify/batch-insert-notifies-every-queue", testNotifyBatchEveryQueue},
	{"notify/rolled-back-tx-insert-sends-nothing", testNotifyTxRollback},
}

// notifyWait bounds the real time the suite waits for a notification.
const notifyWait = 5 * time.Second

// listen starts a listener on the store's Notifier, skipping when the store
// has none.
func (e *env) listen(ctx context.Context) <-chan contract.Notification {
	e.Helper()
	n, ok := e.s.(contract.Notifier)
	if !ok {
		e.Skip("the store does not implement contract.Notifier")
	}
	ch, err := n.Listen(ctx)
	if err != nil {
		e.Fatalf("Listen: unexpected error: %v", err)
	}
	if ch == nil {
		e.Fatal("Listen returned a nil channel and a nil error")
	}
	return ch
}

// await waits for a notification of kind k about queue, ignoring others.
func (e *env) await(ch <-chan contract.Notification, k contract.NotificationKind, queue, after string) {
	e.Helper()
	timeout := time.NewTimer(notifyWait)
	defer timeout.Stop()
	var seen []contract.Notification
	for {
		select {
		case n, ok := <-ch:
			if !ok {
				e.Fatalf("the Listen channel closed while waiting for a %q notification for queue %q after %s; it must stay open until the listener's context ends", k, queue, after)
			}
			if n.Kind == k && n.Queue == queue {
				return
			}
			seen = append(seen, n)
		case <-timeout.C:
			e.Fatalf("no %q notification for queue %q arrived within %s after %s (saw %+v); a store that declares contract.Notifier must deliver it", k, queue, notifyWait, after, seen)
		}
	}
}

func testNotifyInsert(e *env) {
	ch := e.listen(e.ctx)
	e.insertOne(e.job("wake-me", "k"))
	e.await(ch, contract.NotifyInsert, "wake-me", "an Insert of a due job")
	// A second insert wakes it again.
	e.insertOne(e.job("wake-me-too", "k"))
	e.await(ch, contract.NotifyInsert, "wake-me-too", "a second Insert of a due job")
}

func testNotifyPause(e *env) {
	ch := e.listen(e.ctx)
	e.pause("q")
	e.await(ch, contract.NotifyPause, "q", "PauseQueue(\"q\")")
	e.resume("q")
	e.await(ch, contract.NotifyResume, "q", "ResumeQueue(\"q\")")
}

// testNotifyLateCommit: a job inserted inside a transaction that commits
// only after a later insert (outside it) has committed still wakes the
// listener, at its commit. A store that finds inserts by reading ids above
// the highest it has read (auto-increment ids are handed out at insert time
// but become visible at commit) must not skip the lower id of the
// transaction that was still open when it read past it.
func testNotifyLateCommit(e *env) {
	ti := e.txInserter()
	ch := e.listen(e.ctx)
	tx, commit, rollback := e.begin()
	committed := false
	defer func() {
		if !committed {
			_ = rollback()
		}
	}()
	e.insertTx(ti, tx, e.job("late", "k"))

	// The later insert, outside the transaction. On a single-writer
	// database it waits for the transaction (the commits then come in the
	// order of the inserts); elsewhere it commits first, and its own
	// notification proves the listener has read past the open transaction.
	done := make(chan error, 1)
	go func() {
		_, err := e.s.Insert(e.ctx, e.now, []contract.InsertParams{e.job("early", "k")})
		done <- err
	}()
	var waiting bool
	select {
	case err := <-done:
		if err != nil {
			e.Fatalf("Insert outside an open transaction: unexpected error: %v", err)
		}
		e.await(ch, contract.NotifyInsert, "early", "an Insert committed while an earlier InsertTx was still open")
	case <-time.After(time.Second):
		waiting = true
	}
	if err := commit(); err != nil {
		e.Fatalf("commit: %v", err)
	}
	committed = true
	if waiting {
		if err := <-done; err != nil {
			e.Fatalf("Insert outside a transaction that then committed: unexpected error: %v", err)
		}
	}
	e.await(ch, contract.NotifyInsert, "late", "the commit of an InsertTx that came before a later, already committed Insert")
}

func testNotifyClose(e *env) {
	ctx, cancel := context.WithCancel(e.ctx)
	ch := e.listen(ctx)
	cancel()
	timeout := time.NewTimer(notifyWait)
	defer timeout.Stop()
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-timeout.C:
			e.Fatalf("the Listen channel was still open %s after its context was cancelled; Listen must close it when ctx ends", notifyWait)
		}
	}
}
