package client_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/backlogq/backlog/adapters/httpapi/client"
	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/store/memory"
)

// QueueLimits reads what SetQueueLimits stored; setting needs the admin
// role, reading the producer role.
func TestQueueLimits(t *testing.T) {
	t.Parallel()
	s := startServer(t, memory.New(), core.Config{}, false)
	ctx := context.Background()
	l, err := s.producer.QueueLimits(ctx, "mail")
	if err != nil || !l.IsZero() {
		t.Fatalf("fresh queue: %+v, %v", l, err)
	}
	want := core.QueueLimits{MaxRunning: 5, MaxRunningPerKind: map[string]int{"bulk": 2}, MaxRunningPerPartition: 1}
	if _, err := s.producer.SetQueueLimits(ctx, "mail", want); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("producer sets limits: %v, want ErrForbidden", err)
	}
	got, err := s.admin.SetQueueLimits(ctx, "mail", want)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("set: %+v, %v", got, err)
	}
	if got, err := s.producer.QueueLimits(ctx, "mail"); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("read back: %+v, %v", got, err)
	}
	if _, err := s.admin.SetQueueLimits(ctx, "mail", core.QueueLimits{MaxRunning: -1}); !errors.Is(err, client.ErrInvalidRequest) {
		t.Fatalf("negative limit: %v, want ErrInvalidRequest", err)
	}
	if _, err := s.producer.QueueLimits(ctx, "bad queue!"); !errors.Is(err, client.ErrInvalidRequest) {
		t.Fatalf("bad name: %v, want ErrInvalidRequest", err)
	}
	if got, err := s.admin.SetQueueLimits(ctx, "mail", core.QueueLimits{}); err != nil || !got.IsZero() {
		t.Fatalf("clear: %+v, %v", got, err)
	}
}

// A submission carries its partition key, unique scope and hold window,
// and the job comes back with its partition key.
func TestSubmitPartitionAndUniqueScope(t *testing.T) {
	t.Parallel()
	s := startServer(t, memory.New(), core.Config{}, false)
	ctx := context.Background()
	r, err := s.producer.Submit(ctx, client.SubmitRequest{
		Kind: "a", PartitionKey: "acme", UniqueKey: "k", UniqueScope: "kind", UniqueFor: time.Hour,
	})
	if err != nil || r.Job.PartitionKey != "acme" || r.Job.CoreJob().PartitionKey != "acme" {
		t.Fatalf("submit: %+v, %v", r, err)
	}
	// Scope kind: the same key under another kind is another job.
	r2, err := s.producer.Submit(ctx, client.SubmitRequest{Kind: "b", UniqueKey: "k", UniqueScope: "kind"})
	if err != nil || r2.Duplicate {
		t.Fatalf("other kind: %+v, %v", r2, err)
	}
	// The hold window: once the first job is cancelled, its key stays held.
	if _, err := s.admin.CancelJob(ctx, r.Job.ID); err != nil {
		t.Fatal(err)
	}
	r3, err := s.producer.Submit(ctx, client.SubmitRequest{Kind: "a", UniqueKey: "k", UniqueScope: "kind"})
	if err != nil || !r3.Duplicate || r3.Job.ID != r.Job.ID {
		t.Fatalf("resubmit within the hold window: %+v, %v", r3, err)
	}
	if _, err := s.producer.Submit(ctx, client.SubmitRequest{Kind: "a", UniqueKey: "x", UniqueScope: "galaxy"}); !errors.Is(err, client.ErrInvalidRequest) && !errors.Is(err, core.ErrInvalidJob) {
		t.Fatalf("bad scope: %v", err)
	}
}

// Workers reports the process id of an in-process worker's record.
func TestWorkersPID(t *testing.T) {
	t.Parallel()
	st := memory.New()
	s := startServer(t, st, core.Config{}, false)
	ctx := context.Background()
	now := time.Now().UTC()
	if err := st.RegisterWorker(ctx, core.WorkerInfo{ID: "h-7-a", Host: "h", PID: 7, Queues: []string{"default"}, StartedAt: now, HeartbeatAt: now}); err != nil {
		t.Fatal(err)
	}
	ws, err := s.admin.Workers(ctx)
	if err != nil || len(ws) != 1 || ws[0].PID != 7 || ws[0].Name != "h" {
		t.Fatalf("workers: %+v, %v", ws, err)
	}
}
