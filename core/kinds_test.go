package core_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
)

// workerClient builds a client that runs a handler for greetArgs' kind.
func workerClient(t *testing.T, mod func(*core.Config)) (*core.Client, contract.Store) {
	t.Helper()
	h := core.NewHandlers()
	core.Handle(h, func(context.Context, *core.TypedJob[greetArgs]) error { return nil })
	c, st := newClient(t, h, mod)
	return c, st
}

type otherArgs struct{}

func (otherArgs) Kind() string { return "other" }

func countJobs(t *testing.T, st contract.Store) int {
	t.Helper()
	js, err := st.List(context.Background(), core.ListParams{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return len(js)
}

func TestEnqueueUnknownKindRefused(t *testing.T) {
	c, st := workerClient(t, nil)
	ctx := context.Background()
	_, err := c.Enqueue(ctx, otherArgs{}, nil)
	if !errors.Is(err, core.ErrUnknownKind) || !strings.Contains(err.Error(), `"other"`) {
		t.Fatalf("Enqueue of an unknown kind: err %v, want ErrUnknownKind naming the kind", err)
	}
	if _, err := c.EnqueueRaw(ctx, "other", nil, nil); !errors.Is(err, core.ErrUnknownKind) {
		t.Fatalf("EnqueueRaw of an unknown kind: err %v", err)
	}
	if n := countJobs(t, st); n != 0 {
		t.Fatalf("%d jobs inserted, want none", n)
	}
	if _, err := c.Enqueue(ctx, greetArgs{Name: "x"}, nil); err != nil {
		t.Fatalf("Enqueue of a handled kind: %v", err)
	}
}

func TestEnqueueManyUnknownKindInsertsNothing(t *testing.T) {
	c, st := workerClient(t, nil)
	_, err := c.EnqueueMany(context.Background(), []core.InsertParams{
		{Kind: "greet"}, {Kind: "greet"}, {Kind: "nope"},
	})
	if !errors.Is(err, core.ErrUnknownKind) || !strings.Contains(err.Error(), `job 2`) || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("EnqueueMany: err %v, want ErrUnknownKind naming job 2 and its kind", err)
	}
	if n := countJobs(t, st); n != 0 {
		t.Fatalf("%d jobs inserted, want none of the batch", n)
	}
}

func TestEnqueueTxUnknownKindRefused(t *testing.T) {
	// Refused before the store is asked (the memory store would answer
	// ErrUnsupported: it has no transactions).
	c, st := workerClient(t, nil)
	_, err := c.EnqueueTx(context.Background(), nil, []core.InsertParams{{Kind: "nope"}})
	if !errors.Is(err, core.ErrUnknownKind) {
		t.Fatalf("EnqueueTx: err %v, want ErrUnknownKind", err)
	}
	if n := countJobs(t, st); n != 0 {
		t.Fatalf("%d jobs inserted", n)
	}
}

func TestAllowUnknownKinds(t *testing.T) {
	c, st := workerClient(t, func(cfg *core.Config) { cfg.AllowUnknownKinds = true })
	if _, err := c.EnqueueMany(context.Background(), []core.InsertParams{{Kind: "greet"}, {Kind: "elsewhere"}}); err != nil {
		t.Fatalf("EnqueueMany with AllowUnknownKinds: %v", err)
	}
	if n := countJobs(t, st); n != 2 {
		t.Fatalf("%d jobs inserted, want 2", n)
	}
}

func TestProducerEnqueuesAnyKind(t *testing.T) {
	c, st := newClient(t, nil, func(cfg *core.Config) { cfg.Queues = nil })
	if _, err := c.EnqueueRaw(context.Background(), "anything", nil, nil); err != nil {
		t.Fatalf("producer client: %v", err)
	}
	// An empty registry is no handler either.
	c2, _ := newClient(t, core.NewHandlers(), nil)
	if _, err := c2.EnqueueRaw(context.Background(), "anything", nil, nil); err != nil {
		t.Fatalf("client with an empty registry: %v", err)
	}
	if n := countJobs(t, st); n != 1 {
		t.Fatalf("%d jobs inserted, want 1", n)
	}
}

func TestHandleTwicePanics(t *testing.T) {
	mustPanic := func(name string, register func()) {
		t.Helper()
		defer func() {
			v := recover()
			msg, _ := v.(string)
			if !strings.Contains(msg, `"greet"`) || !strings.Contains(msg, "twice") {
				t.Fatalf("%s: panic %v, want one naming the kind registered twice", name, v)
			}
		}()
		register()
	}
	h := core.NewHandlers()
	h.HandleRaw("greet", func(context.Context, *core.Job) error { return nil })
	mustPanic("HandleRaw", func() { h.HandleRaw("greet", func(context.Context, *core.Job) error { return nil }) })
	mustPanic("Handle", func() {
		core.Handle(h, func(context.Context, *core.TypedJob[greetArgs]) error { return nil })
	})
	if got := h.Kinds(); len(got) != 1 || got[0] != "greet" {
		t.Fatalf("Kinds = %v", got)
	}
}

func TestHandlersHas(t *testing.T) {
	var nilH *core.Handlers
	if nilH.Has("greet") {
		t.Fatal("a nil registry has a handler")
	}
	h := core.NewHandlers()
	h.HandleRaw("greet", func(context.Context, *core.Job) error { return nil })
	if !h.Has("greet") || h.Has("other") {
		t.Fatal("Has does not match the registry")
	}
}

// TestDeclaredKind: a kind declared to run elsewhere is known to Enqueue,
// its retry policy is the one the engine (and the HTTP API, through
// RetryPolicy) applies to its failures, and this client does not run it:
// a job of it claimed here fails with ErrUnknownKind and is retried by
// that policy.
func TestDeclaredKind(t *testing.T) {
	h := core.NewHandlers()
	h.HandleRaw("local", func(context.Context, *core.Job) error { return nil })
	h.Declare("remote", core.WithRetry(core.DelayList{7 * time.Second}))
	c, _ := newClient(t, h, func(cfg *core.Config) { cfg.Retry = core.DelayList{time.Hour} })
	ctx := context.Background()
	if h.Has("remote") || !h.Known("remote") || strings.Join(h.Kinds(), ",") != "local" {
		t.Fatalf("Has %v Known %v Kinds %v; want a declared kind known but not handled here", h.Has("remote"), h.Known("remote"), h.Kinds())
	}
	if got := c.RetryPolicy("remote"); fmt.Sprint(got) != fmt.Sprint(core.DelayList{7 * time.Second}) {
		t.Fatalf("RetryPolicy(remote) = %v", got)
	}
	if got := c.RetryPolicy("local"); fmt.Sprint(got) != fmt.Sprint(core.DelayList{time.Hour}) {
		t.Fatalf("RetryPolicy(local) = %v; want the client's default", got)
	}
	if _, err := c.EnqueueRaw(ctx, "nope", nil, nil); !errors.Is(err, core.ErrUnknownKind) {
		t.Fatalf("enqueue of an undeclared kind: %v", err)
	}
	r, err := c.EnqueueRaw(ctx, "remote", nil, nil)
	if err != nil {
		t.Fatalf("enqueue of a declared kind: %v", err)
	}
	res, err := c.WorkJob(ctx, r.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(res.Err, core.ErrUnknownKind) || res.Job.State != core.StateRetryable ||
		len(res.Job.Errors) != 1 || res.Job.RunAt.Sub(res.Job.Errors[0].At) != 7*time.Second {
		t.Fatalf("a declared kind claimed here: err %v, job %+v; want ErrUnknownKind, retried in 7s", res.Err, res.Job)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("declaring a kind that has a handler did not panic")
		}
	}()
	h.Declare("local")
}

// TestKindsAnnouncedByWorkers: a started client that runs handlers
// announces its kinds in its registry record (core.WorkerKindsKey); a
// producer on the same store then refuses a kind no live worker handles
// and accepts the announced ones (core.Client.CheckKinds), and a worker
// declared dead no longer counts.
func TestKindsAnnouncedByWorkers(t *testing.T) {
	ctx := context.Background()
	worker, st := workerClient(t, nil)
	clock := core.NewManualClock(time.Now())
	producer, err := core.NewClient(st, core.Config{Logger: quietLogger(), MaintenanceInterval: -1, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	// Nothing announced yet: nothing to check against.
	if _, err := producer.EnqueueRaw(ctx, "typo", nil, nil); err != nil {
		t.Fatalf("before any worker announced a kind: %v", err)
	}
	if err := worker.Start(ctx); err != nil {
		t.Fatal(err)
	}
	ws, err := st.Workers(ctx)
	if err != nil || len(ws) != 1 {
		t.Fatalf("workers %v, %v", ws, err)
	}
	if got := core.WorkerKinds(ws[0]); len(got) != 1 || got[0] != "greet" {
		t.Fatalf("the worker announced %v (metadata %v), want [greet]", got, ws[0].Metadata)
	}
	producer.ForgetWorkerKinds()
	if _, err := producer.EnqueueRaw(ctx, "greet", nil, nil); err != nil {
		t.Fatalf("an announced kind: %v", err)
	}
	_, err = producer.EnqueueMany(ctx, []core.InsertParams{{Kind: "greet"}, {Kind: "typo"}})
	if !errors.Is(err, core.ErrUnknownKind) || !strings.Contains(err.Error(), `job 1: `) || !strings.Contains(err.Error(), `"typo"`) {
		t.Fatalf("a kind nobody handles: %v, want ErrUnknownKind naming job 1 and the kind", err)
	}
	// Past the dead-worker timeout the announcement no longer counts:
	// nothing is left to check against, so every kind goes in again.
	clock.Add(3 * time.Minute)
	producer.ForgetWorkerKinds()
	if _, err := producer.EnqueueRaw(ctx, "typo", nil, nil); err != nil {
		t.Fatalf("after the worker was declared dead: %v", err)
	}
}
