package core_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/memory"
)

// newWorkClient builds a client that is never started, with no queues, on a
// fresh memory store, for WorkJob.
func newWorkClient(t *testing.T, h *core.Handlers, mod func(*core.Config)) (*core.Client, *memory.Store) {
	t.Helper()
	st := memory.New()
	t.Cleanup(func() { _ = st.Close() })
	cfg := core.Config{Handlers: h, Logger: quietLogger(), MaintenanceInterval: -1}
	if mod != nil {
		mod(&cfg)
	}
	c, err := core.NewClient(st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, st
}

func TestWorkJobAppliesTheEnginesOutcomes(t *testing.T) {
	h := core.NewHandlers()
	h.HandleRaw("ok", func(ctx context.Context, j *core.Job) error {
		return core.RecordRawResult(ctx, []byte(`{"done":true}`))
	})
	h.HandleRaw("fail", func(context.Context, *core.Job) error { return errors.New("boom") }, core.WithRetry(core.DelayList{time.Minute}))
	h.HandleRaw("snooze", func(context.Context, *core.Job) error { return core.Snooze(time.Hour) })
	h.HandleRaw("cancel", func(context.Context, *core.Job) error { return core.Cancel(errors.New("not wanted")) })
	h.HandleRaw("perm", func(context.Context, *core.Job) error { return core.Permanent(errors.New("bad input")) })
	h.HandleRaw("step1", func(context.Context, *core.Job) error { return core.Continue("step2", []byte(`{"n":2}`), time.Time{}) })
	h.HandleRaw("panic", func(context.Context, *core.Job) error { panic("kaboom") })
	h.HandleRaw("slow", func(ctx context.Context, j *core.Job) error { <-ctx.Done(); return ctx.Err() }, core.WithTimeout(10*time.Millisecond))

	var mu sync.Mutex
	var events []core.EventKind
	var order []string
	c, _ := newWorkClient(t, h, func(cfg *core.Config) {
		cfg.Observers = []core.Observer{core.ObserverFunc(func(e core.Event) {
			mu.Lock()
			events = append(events, e.Kind)
			mu.Unlock()
		})}
		cfg.Middleware = []core.Middleware{func(next core.HandlerFunc) core.HandlerFunc {
			return func(ctx context.Context, j *core.Job) error {
				mu.Lock()
				order = append(order, "mw:"+j.Kind)
				mu.Unlock()
				return next(ctx, j)
			}
		}}
	})
	ctx := context.Background()
	work := func(kind string, opts *core.Options) *core.WorkResult {
		t.Helper()
		r, err := c.EnqueueRaw(ctx, kind, []byte(`{"a":1}`), opts)
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.WorkJob(ctx, r.Job.ID)
		if err != nil {
			t.Fatalf("WorkJob(%s): %v", kind, err)
		}
		if res.Claimed.State != core.StateRunning || res.Claimed.Attempt != 1 || res.Claimed.WorkerID != c.WorkerID() {
			t.Fatalf("%s: claimed %+v", kind, res.Claimed)
		}
		return res
	}

	res := work("ok", nil)
	if res.Err != nil || !res.Applied || res.Outcome != contract.OutcomeComplete || res.Event != core.EventJobCompleted ||
		res.Job.State != core.StateCompleted || string(res.Job.Result) != `{"done":true}` {
		t.Fatalf("ok: %+v job %+v", res, res.Job)
	}
	res = work("fail", nil)
	if res.Err == nil || res.Err.Error() != "boom" || res.Outcome != contract.OutcomeRetry || res.Job.State != core.StateRetryable ||
		len(res.Job.Errors) != 1 || res.Job.Errors[0].Error != "boom" || res.Job.RunAt.Sub(res.Job.Errors[0].At) != time.Minute {
		t.Fatalf("fail: %+v job %+v", res, res.Job)
	}
	res = work("fail", &core.Options{MaxAttempts: 1})
	if res.Outcome != contract.OutcomeDiscard || res.Job.State != core.StateDiscarded {
		t.Fatalf("fail, last attempt: %+v job %+v", res, res.Job)
	}
	res = work("snooze", nil)
	if res.Outcome != contract.OutcomeSnooze || res.Job.State != core.StateScheduled || res.Job.Attempt != 0 {
		t.Fatalf("snooze: %+v job %+v", res, res.Job)
	}
	res = work("cancel", nil)
	if res.Outcome != contract.OutcomeCancel || res.Job.State != core.StateCancelled || !strings.Contains(res.Job.Errors[0].Error, "not wanted") {
		t.Fatalf("cancel: %+v job %+v", res, res.Job)
	}
	res = work("perm", nil)
	if res.Outcome != contract.OutcomeDiscard || res.Job.State != core.StateDiscarded || res.Job.Attempt != 1 {
		t.Fatalf("permanent: %+v job %+v", res, res.Job)
	}
	res = work("panic", nil)
	if res.Outcome != contract.OutcomeRetry || !strings.Contains(res.Job.Errors[0].Error, "kaboom") {
		t.Fatalf("panic: %+v job %+v", res, res.Job)
	}
	res = work("slow", nil)
	var te *core.TimeoutError
	if !errors.As(res.Err, &te) || res.Outcome != contract.OutcomeRetry || !strings.Contains(res.Job.Errors[0].Error, "timed out after 10ms") {
		t.Fatalf("timeout: %+v job %+v", res, res.Job)
	}

	// Continue: the next step is due now and another WorkJob runs it.
	h.HandleRaw("step2", func(ctx context.Context, j *core.Job) error { return core.RecordRawResult(ctx, j.Args) })
	res = work("step1", nil)
	if res.Outcome != contract.OutcomeContinue || res.Job.Kind != "step2" || res.Job.State != core.StateAvailable {
		t.Fatalf("continue: %+v job %+v", res, res.Job)
	}
	res, err := c.WorkJob(ctx, res.Job.ID)
	if err != nil || res.Job.State != core.StateCompleted || string(res.Job.Result) != `{"n":2}` {
		t.Fatalf("step2: %v %+v", err, res)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(order) != 10 || order[0] != "mw:ok" {
		t.Fatalf("middleware saw %v", order)
	}
	var claimed, completed int
	for _, e := range events {
		switch e {
		case core.EventJobClaimed:
			claimed++
		case core.EventJobCompleted:
			completed++
		}
	}
	if claimed != 10 || completed != 2 {
		t.Fatalf("events: %d claimed, %d completed: %v", claimed, completed, events)
	}
}

func TestWorkJobRefusesJobsItCannotRun(t *testing.T) {
	h := core.NewHandlers()
	h.HandleRaw("ok", func(context.Context, *core.Job) error { return nil })
	clock := core.NewManualClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	c, st := newWorkClient(t, h, func(cfg *core.Config) { cfg.Clock = clock })
	ctx := context.Background()

	if _, err := c.WorkJob(ctx, 12345); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("missing job: %v", err)
	}
	r, err := c.EnqueueRaw(ctx, "ok", nil, &core.Options{RunAt: clock.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WorkJob(ctx, r.Job.ID); !errors.Is(err, core.ErrNotDue) {
		t.Fatalf("scheduled job: %v", err)
	}
	if j, _ := st.Get(ctx, r.Job.ID); j.State != core.StateScheduled || j.Attempt != 0 || j.ClaimSeq != 0 {
		t.Fatalf("refused job was touched: %+v", j)
	}
	clock.Add(time.Hour)
	res, err := c.WorkJob(ctx, r.Job.ID)
	if err != nil || res.Job.State != core.StateCompleted || !res.Job.FinishedAt.Equal(clock.Now()) {
		t.Fatalf("after the clock moved: %v %+v", err, res)
	}
	if _, err := c.WorkJob(ctx, r.Job.ID); !errors.Is(err, core.ErrInvalidState) {
		t.Fatalf("completed job: %v", err)
	}

	r, _ = c.EnqueueRaw(ctx, "ok", nil, &core.Options{Queue: "held"})
	if err := c.PauseQueue(ctx, "held"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WorkJob(ctx, r.Job.ID); !errors.Is(err, core.ErrNotClaimed) {
		t.Fatalf("paused queue: %v", err)
	}
}

func TestWorkJobHandsBackJobsClaimedAhead(t *testing.T) {
	h := core.NewHandlers()
	h.HandleRaw("ok", func(context.Context, *core.Job) error { return nil })
	c, st := newWorkClient(t, h, nil)
	ctx := context.Background()
	var ids []int64
	for i := 0; i < 3; i++ {
		r, err := c.EnqueueRaw(ctx, "ok", nil, &core.Options{Priority: 1 + i})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.Job.ID)
	}
	var before []*core.Job
	for _, id := range ids[:2] {
		j, _ := st.Get(ctx, id)
		before = append(before, j)
	}
	res, err := c.WorkJob(ctx, ids[2])
	if err != nil || res.Job.State != core.StateCompleted {
		t.Fatalf("WorkJob: %v %+v", err, res)
	}
	for i, id := range ids[:2] {
		j, _ := st.Get(ctx, id)
		if j.State != core.StateAvailable || j.Attempt != 0 || len(j.Errors) != 0 || !j.RunAt.Equal(before[i].RunAt) {
			t.Fatalf("job %d claimed ahead was not handed back untouched: %+v", id, j)
		}
	}
	if len(c.Running()) != 0 {
		t.Fatalf("executions left tracked: %v", c.Running())
	}
}

func TestWorkJobDeletedByRetentionAndUnknownKind(t *testing.T) {
	h := core.NewHandlers()
	h.HandleRaw("ok", func(context.Context, *core.Job) error { return nil })
	c, _ := newWorkClient(t, h, func(cfg *core.Config) {
		cfg.Retention = &core.Retention{Completed: 0, Cancelled: time.Hour, Discarded: time.Hour}
		cfg.AllowUnknownKinds = true
	})
	ctx := context.Background()
	r, _ := c.EnqueueRaw(ctx, "ok", nil, nil)
	res, err := c.WorkJob(ctx, r.Job.ID)
	if err != nil || res.Job != nil || res.Outcome != contract.OutcomeComplete || !res.Applied {
		t.Fatalf("retention zero: %v %+v", err, res)
	}
	r, _ = c.EnqueueRaw(ctx, "nobody", nil, nil)
	res, err = c.WorkJob(ctx, r.Job.ID)
	if err != nil || !errors.Is(res.Err, core.ErrUnknownKind) || res.Job.State != core.StateRetryable {
		t.Fatalf("unknown kind: %v %+v", err, res)
	}
}

func TestWorkJobCancelledWhileRunningWritesNothing(t *testing.T) {
	h := core.NewHandlers()
	var c *core.Client
	h.HandleRaw("self", func(ctx context.Context, j *core.Job) error {
		if _, err := c.CancelJob(ctx, j.ID); err != nil {
			return err
		}
		<-ctx.Done()
		return ctx.Err()
	})
	c, _ = newWorkClient(t, h, nil)
	ctx := context.Background()
	r, _ := c.EnqueueRaw(ctx, "self", nil, nil)
	res, err := c.WorkJob(ctx, r.Job.ID)
	if err != nil || res.Outcome != "" || res.Applied || res.Job.State != core.StateCancelled || res.Err == nil {
		t.Fatalf("cancelled while running: %v %+v", err, res)
	}
	if len(c.Running()) != 0 {
		t.Fatal("execution left tracked")
	}
}

func TestWorkJobOpensSealedArgsAndSealsTheResult(t *testing.T) {
	k := mustKeyring(t, "k1", map[string][]byte{"k1": testKey(1)})
	h := core.NewHandlers()
	h.HandleRaw("echo", func(ctx context.Context, j *core.Job) error { return core.RecordRawResult(ctx, j.Args) })
	c, _ := newWorkClient(t, h, func(cfg *core.Config) {
		cfg.Encryption = &core.Encryption{Keys: k, Results: true}
	})
	ctx := context.Background()
	r, err := c.EnqueueRaw(ctx, "echo", []byte(`{"secret":1}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.WorkJob(ctx, r.Job.ID)
	if err != nil || res.Err != nil || res.Job.State != core.StateCompleted {
		t.Fatalf("WorkJob: %v %+v", err, res)
	}
	if strings.Contains(string(res.Job.Result), "secret") {
		t.Fatalf("result stored in clear: %s", res.Job.Result)
	}
	if b, err := k.OpenResult("echo", res.Job.Result); err != nil || string(b) != `{"secret":1}` {
		t.Fatalf("opened result %s, %v", b, err)
	}
}
