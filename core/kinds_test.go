package core_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
)

// workerClient builds a client that runs a handler for greetArgs' kind.
func workerClient(t *testing.T, mod func(*core.Config)) (*core.Client, core.Store) {
	t.Helper()
	h := core.NewHandlers()
	core.Handle(h, func(context.Context, *core.TypedJob[greetArgs]) error { return nil })
	c, st := newClient(t, h, mod)
	return c, st
}

type otherArgs struct{}

func (otherArgs) Kind() string { return "other" }

func countJobs(t *testing.T, st core.Store) int {
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
