package core_test

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/internal/syncbuf"
	"github.com/backlogq/backlog/store/memory"
)

// cutNotifier is a memory store's notifications behind a switch: while
// down, Listen fails as it does when the database cannot be reached.
type cutNotifier struct {
	st    *memory.Store
	down  atomic.Bool
	tries atomic.Int32
}

func (n *cutNotifier) Listen(ctx context.Context) (<-chan contract.Notification, error) {
	n.tries.Add(1)
	if n.down.Load() {
		return nil, errCut
	}
	return n.st.Listen(ctx)
}

// TestListenerOutageLoggedOnce: a listener that cannot reach the store
// logs the outage once when it starts and once when it ends, not every
// retry (a 29 s outage logged 99 warnings per worker), and still gets
// the notifications once it listens again.
func TestListenerOutageLoggedOnce(t *testing.T) {
	st := memory.New()
	n := &cutNotifier{st: st}
	n.down.Store(true)
	var logs syncbuf.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	notes := make(chan contract.Notification, 16)
	done := make(chan error, 1)
	go func() {
		done <- core.FollowNotifications(ctx, n, log, "test: ", time.Second, nil, func(note contract.Notification) { notes <- note }, func() {})
	}()
	for n.tries.Load() < 5 {
		time.Sleep(10 * time.Millisecond)
	}
	n.down.Store(false)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "listening for notifications again") {
		if time.Now().After(deadline) {
			t.Fatalf("the end of the outage was not logged:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if c := strings.Count(logs.String(), "level=WARN"); c != 1 {
		t.Fatalf("%d warnings for one outage of %d failed listens; want 1:\n%s", c, n.tries.Load()-1, logs.String())
	}
	now := time.Now().UTC()
	if _, err := st.Insert(ctx, now.Add(time.Second), []core.InsertParams{mustInsert(t, "k", now)}); err != nil {
		t.Fatal(err)
	}
	select {
	case note := <-notes:
		if note.Kind != contract.NotifyInsert {
			t.Fatalf("notification %+v; want an insert", note)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no notification after the listener came back")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("FollowNotifications returned %v when its context ended; want nil", err)
	}
}

func mustInsert(t *testing.T, kind string, now time.Time) core.InsertParams {
	t.Helper()
	p, err := core.NewInsertRaw(kind, nil, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// handNotifier is a memory store whose notifications the test sends.
type handNotifier struct {
	*memory.Store
	ch chan contract.Notification
}

func (n *handNotifier) Listen(ctx context.Context) (<-chan contract.Notification, error) {
	out := make(chan contract.Notification)
	go func() {
		defer close(out) // when ctx ends, as the contract asks
		for {
			select {
			case <-ctx.Done():
				return
			case note := <-n.ch:
				select {
				case out <- note:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, nil
}

// TestStaleCancelNotificationDoesNotStopANewExecution: a NotifyCancel that
// arrives after the job was retried and claimed again (a late delivery)
// must not stop the new execution, whose work would be thrown away and
// whose job would stay running until its lease ran out; a notification of
// a cancel the store holds stops the handler.
func TestStaleCancelNotificationDoesNotStopANewExecution(t *testing.T) {
	for _, cancelled := range []bool{false, true} {
		st := &handNotifier{Store: memory.New(), ch: make(chan contract.Notification, 4)}
		release := make(chan struct{})
		var stopped atomic.Int32
		c := leaseClient(t, st, func(ctx context.Context, j *core.Job) error {
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				stopped.Add(1)
				return ctx.Err()
			}
		}, func(cfg *core.Config) { cfg.LeaseDuration, cfg.HeartbeatInterval = 5*time.Second, time.Second })
		ctx := context.Background()
		r, err := c.EnqueueRaw(ctx, "k", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		waitState(t, st, r.Job.ID, core.StateRunning)
		if cancelled { // another node's cancel, committed in the store
			if _, err := st.Cancel(ctx, r.Job.ID, time.Now().UTC()); err != nil {
				t.Fatal(err)
			}
		}
		st.ch <- contract.Notification{Kind: contract.NotifyCancel, JobID: r.Job.ID}
		deadline := time.Now().Add(500 * time.Millisecond)
		for stopped.Load() == 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if got := stopped.Load() == 1; got != cancelled {
			t.Fatalf("cancel committed in the store %v: handler stopped %v; want %v", cancelled, got, cancelled)
		}
		close(release)
		if !cancelled {
			waitState(t, st, r.Job.ID, core.StateCompleted)
		}
	}
}
