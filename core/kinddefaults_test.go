package core_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
)

func TestKindMaxAttempts(t *testing.T) {
	h := core.NewHandlers()
	h.Declare("remote", core.WithMaxAttempts(3))
	h.Declare("exact", core.WithRetries(time.Second, 2*time.Second))
	h.Declare("none", core.WithRetries())
	c, _ := newClient(t, h, func(cfg *core.Config) { cfg.Queues = nil })
	ctx := context.Background()
	for kind, want := range map[string]int{"remote": 3, "exact": 3, "none": 1} {
		if got := c.MaxAttempts(kind); got != want {
			t.Errorf("MaxAttempts(%q) = %d, want %d", kind, got, want)
		}
		res, err := c.EnqueueRaw(ctx, kind, nil, nil)
		if err != nil || res.Job.MaxAttempts != want {
			t.Fatalf("EnqueueRaw(%q): max attempts %d, err %v; want %d", kind, res.Job.MaxAttempts, err, want)
		}
		res2, err := c.EnqueueMany(ctx, []core.InsertParams{{Kind: kind}})
		if err != nil || res2[0].Job.MaxAttempts != want {
			t.Fatalf("EnqueueMany(%q): err %v", kind, err)
		}
	}
	// A job's own attempts win.
	res, err := c.EnqueueRaw(ctx, "remote", nil, &core.Options{MaxAttempts: 7})
	if err != nil || res.Job.MaxAttempts != 7 {
		t.Fatalf("own MaxAttempts: %+v, err %v", res.Job, err)
	}
	if got := c.MaxAttempts("undeclared"); got != core.DefaultMaxAttempts {
		t.Fatalf("MaxAttempts of an undeclared kind = %d", got)
	}
	// WithRetries is the kind's retry policy too: N delays, N retries.
	if p, ok := c.RetryPolicy("exact").(core.DelayList); !ok || len(p) != 2 || p[1] != 2*time.Second {
		t.Fatalf("RetryPolicy(exact) = %#v", c.RetryPolicy("exact"))
	}
}

func TestWithRetriesRetriesNTimes(t *testing.T) {
	// A handler whose kind retries exactly twice runs three times, then
	// its job is discarded, attempts exhausted.
	h := core.NewHandlers()
	var mu sync.Mutex
	runs := 0
	h.HandleRaw("flaky", func(context.Context, *core.Job) error {
		mu.Lock()
		runs++
		mu.Unlock()
		return context.DeadlineExceeded
	}, core.WithRetries(0, 0))
	c, st := newClient(t, h, nil)
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := c.EnqueueRaw(ctx, "flaky", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	j := waitState(t, st, res.Job.ID, core.StateDiscarded)
	mu.Lock()
	defer mu.Unlock()
	if runs != 3 || j.Attempt != 3 || j.MaxAttempts != 3 {
		t.Fatalf("%d runs, attempt %d of %d: want 3 of 3", runs, j.Attempt, j.MaxAttempts)
	}
}
