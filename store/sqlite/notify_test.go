package sqlite_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/sqlite"
)

// Notifications must cross store handles (as they cross processes): the
// listener's handle sees inserts, pauses and cancels committed by another.
func TestListenSeesOtherHandlesCommits(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	path := filepath.Join(t.TempDir(), "n.db")
	a, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	ch, err := a.Listen(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := func(kind contract.NotificationKind, queue string) contract.Notification {
		t.Helper()
		for {
			select {
			case n, ok := <-ch:
				if !ok {
					t.Fatal("listener channel closed")
				}
				if n.Kind == kind && n.Queue == queue {
					return n
				}
			case <-ctx.Done():
				t.Fatalf("no %s notification for queue %q", kind, queue)
			}
		}
	}
	now := contract.UTC(time.Now())
	res, err := b.Insert(ctx, now, []contract.InsertParams{{Queue: "mail", Kind: "k", Args: []byte(`{}`), Priority: 5, MaxAttempts: 3, RunAt: now}})
	if err != nil {
		t.Fatal(err)
	}
	want(contract.NotifyInsert, "mail")
	if err := b.PauseQueue(ctx, "mail", now); err != nil {
		t.Fatal(err)
	}
	want(contract.NotifyPause, "mail")
	if err := b.ResumeQueue(ctx, "mail", now); err != nil {
		t.Fatal(err)
	}
	want(contract.NotifyResume, "mail")
	if _, err := b.Cancel(ctx, res[0].Job.ID, now); err != nil {
		t.Fatal(err)
	}
	if n := want(contract.NotifyCancel, "mail"); n.JobID != res[0].Job.ID {
		t.Fatalf("cancel notification for job %d, want %d", n.JobID, res[0].Job.ID)
	}
}

func TestListenUnsupportedWhenDisabled(t *testing.T) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "n.db"), sqlite.WithNotifyInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Listen(ctx); !errors.Is(err, contract.ErrUnsupported) {
		t.Fatalf("Listen with notifications off: %v, want ErrUnsupported", err)
	}
	m, err := sqlite.Open(ctx, ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.Listen(ctx); !errors.Is(err, contract.ErrUnsupported) {
		t.Fatalf("Listen on :memory:: %v, want ErrUnsupported", err)
	}
}
