package core_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/memory"
)

type greetArgs struct {
	Name string `json:"name"`
}

func (greetArgs) Kind() string { return "greet" }

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newClient builds a client on a fresh memory store with fast timings.
func newClient(t *testing.T, h *core.Handlers, mod func(*core.Config)) (*core.Client, *memory.Store) {
	t.Helper()
	st := memory.New()
	cfg := core.Config{
		Queues:              map[string]core.QueueConfig{core.DefaultQueue: {MaxWorkers: 10}},
		Handlers:            h,
		Logger:              quietLogger(),
		PollInterval:        time.Hour, // wake-ups must come from enqueues, not polls
		MaintenanceInterval: -1,
	}
	if mod != nil {
		mod(&cfg)
	}
	c, err := core.NewClient(st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Stop(ctx)
		_ = st.Close()
	})
	return c, st
}

// waitFor polls the store until job id reaches a final state (or state s).
func waitState(t *testing.T, st contract.Store, id int64, want core.State) *core.Job {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		j, err := st.Get(context.Background(), id)
		if err == nil && j.State == want {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %d: want state %s, have %+v (err %v)", id, want, j, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestEnqueueValidation(t *testing.T) {
	c, _ := newClient(t, nil, func(c *core.Config) { c.Queues = nil; c.MaxArgsBytes = 100 })
	ctx := context.Background()
	cases := []struct {
		name string
		kind string
		args string
		opts *core.Options
		want string
	}{
		{"empty kind", "", `{}`, nil, "kind is empty"},
		{"priority low", "k", `{}`, &core.Options{Priority: 11}, "priority 11 is outside 1..10"},
		{"priority negative", "k", `{}`, &core.Options{Priority: -1}, "priority -1"},
		{"bad json", "k", `{"a":`, nil, "not valid JSON"},
		{"too large", "k", `"` + strings.Repeat("x", 200) + `"`, nil, "over the limit of 100"},
		{"bad queue", "k", `{}`, &core.Options{Queue: "a b"}, "queue name"},
		{"bad attempts", "k", `{}`, &core.Options{MaxAttempts: -2}, "max attempts"},
		{"deadline before run", "k", `{}`, &core.Options{RunAt: time.Now().Add(time.Hour), Deadline: time.Now()}, "deadline"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.EnqueueRaw(ctx, tc.kind, []byte(tc.args), tc.opts)
			if !errors.Is(err, core.ErrInvalidJob) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want ErrInvalidJob mentioning %q, got %v", tc.want, err)
			}
		})
	}
	list, _ := c.Store().List(ctx, core.ListParams{})
	if len(list) != 0 {
		t.Fatalf("invalid jobs were inserted: %d", len(list))
	}
	// One bad job in a batch inserts nothing and names the index.
	good, _ := core.NewInsertRaw("k", nil, nil, time.Now())
	_, err := c.EnqueueMany(ctx, []core.InsertParams{good, {Kind: ""}})
	if err == nil || !strings.Contains(err.Error(), "job 1") {
		t.Fatalf("want error naming job 1, got %v", err)
	}
	list, _ = c.Store().List(ctx, core.ListParams{})
	if len(list) != 0 {
		t.Fatalf("a failed batch inserted %d jobs", len(list))
	}
}

func TestEnqueueDefaultsAndUnique(t *testing.T) {
	c, _ := newClient(t, nil, func(c *core.Config) { c.Queues = nil })
	ctx := context.Background()
	r1, err := c.Enqueue(ctx, greetArgs{Name: "a"}, &core.Options{UniqueKey: "greet:a"})
	if err != nil {
		t.Fatal(err)
	}
	j := r1.Job
	if j.Queue != "default" || j.Priority != 5 || j.MaxAttempts != 20 || j.State != core.StateAvailable || j.Kind != "greet" {
		t.Fatalf("defaults not applied: %+v", j)
	}
	r2, err := c.Enqueue(ctx, greetArgs{Name: "b"}, &core.Options{UniqueKey: "greet:a"})
	if err != nil || !r2.Duplicate || r2.Job.ID != j.ID {
		t.Fatalf("duplicate: want existing job %d, got %+v err %v", j.ID, r2, err)
	}
	r3, _ := c.Enqueue(ctx, greetArgs{}, &core.Options{Delay: time.Hour})
	if r3.Job.State != core.StateScheduled {
		t.Fatalf("delayed job state %s", r3.Job.State)
	}
}

func TestTypedHandlerCompletesWithResult(t *testing.T) {
	h := core.NewHandlers()
	core.Handle(h, func(ctx context.Context, j *core.TypedJob[greetArgs]) error {
		return core.RecordResult(ctx, map[string]string{"hello": j.Args.Name})
	})
	c, st := newClient(t, h, func(c *core.Config) { c.Retention = &core.Retention{Completed: time.Hour} })
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r, err := c.Enqueue(context.Background(), greetArgs{Name: "ada"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	j := waitState(t, st, r.Job.ID, core.StateCompleted)
	if string(j.Result) != `{"hello":"ada"}` || j.Attempt != 1 || j.FinishedAt.IsZero() {
		t.Fatalf("completed job: %+v result %s", j, j.Result)
	}
	// PollInterval is an hour: only the in-process wake-up can have run it.
	if time.Since(start) > 5*time.Second {
		t.Fatalf("job took %s: enqueue did not wake the producer", time.Since(start))
	}
}

func TestRetryThenDiscardWithHistory(t *testing.T) {
	h := core.NewHandlers()
	h.HandleRaw("flaky", func(ctx context.Context, j *core.Job) error {
		return fmt.Errorf("boom %d", j.Attempt)
	}, core.WithRetry(core.DelayList{0}))
	c, st := newClient(t, h, func(c *core.Config) { c.PollInterval = 10 * time.Millisecond })
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	r, _ := c.EnqueueRaw(context.Background(), "flaky", nil, &core.Options{MaxAttempts: 3})
	j := waitState(t, st, r.Job.ID, core.StateDiscarded)
	if j.Attempt != 3 || len(j.Errors) != 3 {
		t.Fatalf("want 3 attempts and 3 errors, got %d and %d", j.Attempt, len(j.Errors))
	}
	for i, e := range j.Errors {
		if e.Attempt != i+1 || e.Error != fmt.Sprintf("boom %d", i+1) {
			t.Fatalf("error %d: %+v", i, e)
		}
	}
}

func TestUnknownKindRetriesThenDiscards(t *testing.T) {
	c, st := newClient(t, core.NewHandlers(), func(c *core.Config) {
		c.PollInterval = 10 * time.Millisecond
		c.Retry = core.DelayList{0}
	})
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	r, _ := c.EnqueueRaw(context.Background(), "nobody-knows", nil, &core.Options{MaxAttempts: 2})
	j := waitState(t, st, r.Job.ID, core.StateDiscarded)
	if len(j.Errors) != 2 || !strings.Contains(j.Errors[0].Error, "no handler registered") {
		t.Fatalf("errors: %+v", j.Errors)
	}
}

func TestPanicIsRecoveredWithStack(t *testing.T) {
	h := core.NewHandlers()
	h.HandleRaw("panics", func(ctx context.Context, j *core.Job) error { panic("kaboom") })
	c, st := newClient(t, h, nil)
	_ = c.Start(context.Background())
	r, _ := c.EnqueueRaw(context.Background(), "panics", nil, &core.Options{MaxAttempts: 1})
	j := waitState(t, st, r.Job.ID, core.StateDiscarded)
	e := j.Errors[0]
	if !strings.Contains(e.Error, "kaboom") || !strings.Contains(e.Trace, "client_test.go") {
		t.Fatalf("panic entry: %+v", e)
	}
}

func TestSnoozeCancelPermanentContinue(t *testing.T) {
	var snoozed atomic.Int32
	h := core.NewHandlers()
	h.HandleRaw("snooze", func(ctx context.Context, j *core.Job) error {
		if snoozed.Add(1) == 1 {
			return core.Snooze(0)
		}
		return nil
	})
	h.HandleRaw("cancel", func(ctx context.Context, j *core.Job) error { return core.Cancel(errors.New("not wanted")) })
	h.HandleRaw("perm", func(ctx context.Context, j *core.Job) error { return core.Permanent(errors.New("bad input")) })
	h.HandleRaw("step1", func(ctx context.Context, j *core.Job) error {
		return core.Continue("step2", []byte(`{"n":2}`), time.Time{})
	})
	h.HandleRaw("step2", func(ctx context.Context, j *core.Job) error {
		return core.RecordRawResult(ctx, j.Args)
	})
	c, st := newClient(t, h, func(c *core.Config) {
		c.PollInterval = 10 * time.Millisecond
		c.Retention = &core.Retention{Completed: time.Hour}
	})
	_ = c.Start(context.Background())
	ctx := context.Background()
	rs, _ := c.EnqueueRaw(ctx, "snooze", nil, nil)
	rc, _ := c.EnqueueRaw(ctx, "cancel", nil, nil)
	rp, _ := c.EnqueueRaw(ctx, "perm", nil, nil)
	rw, _ := c.EnqueueRaw(ctx, "step1", nil, nil)

	if j := waitState(t, st, rs.Job.ID, core.StateCompleted); j.Attempt != 1 {
		t.Fatalf("snooze used an attempt: attempt %d", j.Attempt)
	}
	if j := waitState(t, st, rc.Job.ID, core.StateCancelled); len(j.Errors) != 1 || !strings.Contains(j.Errors[0].Error, "not wanted") {
		t.Fatalf("cancel: %+v", j.Errors)
	}
	if j := waitState(t, st, rp.Job.ID, core.StateDiscarded); j.Attempt != 1 {
		t.Fatalf("permanent retried: attempt %d", j.Attempt)
	}
	j := waitState(t, st, rw.Job.ID, core.StateCompleted)
	if j.Kind != "step2" || string(j.Result) != `{"n":2}` || j.Attempt != 1 {
		t.Fatalf("continue: %+v result %s", j, j.Result)
	}
}

func TestKindTimeout(t *testing.T) {
	h := core.NewHandlers()
	h.HandleRaw("slow", func(ctx context.Context, j *core.Job) error {
		<-ctx.Done()
		return ctx.Err()
	}, core.WithTimeout(20*time.Millisecond))
	c, st := newClient(t, h, nil)
	_ = c.Start(context.Background())
	r, _ := c.EnqueueRaw(context.Background(), "slow", nil, &core.Options{MaxAttempts: 1})
	j := waitState(t, st, r.Job.ID, core.StateDiscarded)
	if !strings.Contains(j.Errors[0].Error, "timed out after 20ms") {
		t.Fatalf("timeout entry: %+v", j.Errors[0])
	}
}

func TestMaxWorkersBoundsConcurrency(t *testing.T) {
	var cur, peak atomic.Int32
	h := core.NewHandlers()
	h.HandleRaw("work", func(ctx context.Context, j *core.Job) error {
		n := cur.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(5 * time.Millisecond)
		cur.Add(-1)
		return nil
	})
	c, st := newClient(t, h, func(c *core.Config) {
		c.Queues = map[string]core.QueueConfig{"q": {MaxWorkers: 3}}
		c.Retention = &core.Retention{Completed: time.Hour}
	})
	_ = c.Start(context.Background())
	var ps []core.InsertParams
	for range 60 {
		p, _ := core.NewInsertRaw("work", nil, &core.Options{Queue: "q"}, time.Now())
		ps = append(ps, p)
	}
	res, err := c.EnqueueMany(context.Background(), ps)
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, st, res[len(res)-1].Job.ID, core.StateCompleted)
	for _, r := range res {
		waitState(t, st, r.Job.ID, core.StateCompleted)
	}
	if peak.Load() > 3 {
		t.Fatalf("ran %d jobs at once with MaxWorkers 3", peak.Load())
	}
}

func TestPauseStopsClaiming(t *testing.T) {
	h := core.NewHandlers()
	h.HandleRaw("k", func(ctx context.Context, j *core.Job) error { return nil })
	c, st := newClient(t, h, func(c *core.Config) {
		c.PollInterval = 10 * time.Millisecond
		c.Retention = &core.Retention{Completed: time.Hour}
	})
	ctx := context.Background()
	if err := c.PauseQueue(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	_ = c.Start(ctx)
	r, _ := c.EnqueueRaw(ctx, "k", nil, nil)
	time.Sleep(100 * time.Millisecond)
	if j, _ := st.Get(ctx, r.Job.ID); j.State != core.StateAvailable {
		t.Fatalf("paused queue ran a job: state %s", j.State)
	}
	if err := c.ResumeQueue(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	waitState(t, st, r.Job.ID, core.StateCompleted)
}

func TestHardStopHandsBackWithoutAttempt(t *testing.T) {
	started := make(chan struct{})
	h := core.NewHandlers()
	h.HandleRaw("long", func(ctx context.Context, j *core.Job) error {
		close(started)
		<-ctx.Done()
		if !core.ErrShutdown(context.Cause(ctx)) {
			return errors.New("wrong cause")
		}
		return ctx.Err()
	})
	c, st := newClient(t, h, nil)
	_ = c.Start(context.Background())
	r, _ := c.EnqueueRaw(context.Background(), "long", nil, nil)
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := c.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop: want deadline exceeded (hard stop), got %v", err)
	}
	j, _ := st.Get(context.Background(), r.Job.ID)
	if j.State != core.StateAvailable || j.Attempt != 0 || len(j.Errors) != 0 {
		t.Fatalf("handed-back job: state %s attempt %d errors %d", j.State, j.Attempt, len(j.Errors))
	}
}

func TestSoftStopWaitsForRunningJobs(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{})
	h := core.NewHandlers()
	h.HandleRaw("k", func(ctx context.Context, j *core.Job) error {
		close(started)
		<-release
		return nil
	})
	c, st := newClient(t, h, func(c *core.Config) { c.Retention = &core.Retention{Completed: time.Hour} })
	_ = c.Start(context.Background())
	r, _ := c.EnqueueRaw(context.Background(), "k", nil, nil)
	<-started
	go func() { time.Sleep(30 * time.Millisecond); close(release) }()
	if err := c.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if j, _ := st.Get(context.Background(), r.Job.ID); j.State != core.StateCompleted {
		t.Fatalf("soft stop did not wait: %s", j.State)
	}
}

func TestMaintenanceRescuesPrunesAndExpires(t *testing.T) {
	clk := core.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	c, st := newClient(t, nil, func(c *core.Config) {
		c.Queues = nil
		c.Clock = clk
		c.Retention = &core.Retention{Completed: time.Hour, Cancelled: -1, Discarded: 0}
	})
	ctx := context.Background()
	lost, _ := c.EnqueueRaw(ctx, "k", nil, nil)
	expiring, _ := c.EnqueueRaw(ctx, "k", nil, &core.Options{Queue: "other", Deadline: clk.Now().Add(time.Minute)})
	// A worker claims and vanishes.
	claimed, err := st.Claim(ctx, contract.ClaimParams{Queue: "default", WorkerID: "gone", Limit: 1, Now: clk.Now(), LeaseUntil: clk.Now().Add(30 * time.Second)})
	if err != nil || len(claimed) != 1 || claimed[0].ID != lost.Job.ID {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	clk.Add(2 * time.Minute)
	var rescued atomic.Int32
	c2, _ := core.NewClient(st, core.Config{Clock: clk, Logger: quietLogger(), Observers: []core.Observer{core.ObserverFunc(func(e core.Event) {
		if e.Kind == core.EventJobsRescued {
			rescued.Add(1)
		}
	})}})
	c2.Maintain(ctx)
	j, _ := st.Get(ctx, lost.Job.ID)
	if j.State != core.StateRetryable || !j.RunAt.Equal(lost.Job.RunAt) || len(j.Errors) != 1 || j.Errors[0].Cause != core.CauseLeaseExpired || rescued.Load() != 1 {
		t.Fatalf("rescue: state %s run_at %s errors %+v events %d; want retryable at its own run_at with one lease_expired entry", j.State, j.RunAt, j.Errors, rescued.Load())
	}
	j, _ = st.Get(ctx, expiring.Job.ID)
	if j.State != core.StateDiscarded {
		t.Fatalf("deadline: state %s", j.State)
	}
	// Discarded retention 0: the next round prunes it.
	clk.Add(time.Second)
	c.Maintain(ctx)
	if _, err := st.Get(ctx, expiring.Job.ID); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("discarded job not pruned: %v", err)
	}
}

func TestCompletedRetentionZeroDeletes(t *testing.T) {
	h := core.NewHandlers()
	done := make(chan struct{})
	h.HandleRaw("k", func(ctx context.Context, j *core.Job) error { return nil })
	c, st := newClient(t, h, func(c *core.Config) {
		c.Retention = &core.Retention{Completed: 0}
		c.Observers = []core.Observer{core.ObserverFunc(func(e core.Event) {
			if e.Kind == core.EventJobCompleted {
				close(done)
			}
		})}
	})
	_ = c.Start(context.Background())
	r, _ := c.EnqueueRaw(context.Background(), "k", nil, nil)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("job did not complete")
	}
	if _, err := st.Get(context.Background(), r.Job.ID); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("completed job kept with retention 0: %v", err)
	}
}

func TestMiddlewareOrderAndEvents(t *testing.T) {
	var mu sync.Mutex
	var trace []string
	mw := func(name string) core.Middleware {
		return func(next core.HandlerFunc) core.HandlerFunc {
			return func(ctx context.Context, j *core.Job) error {
				mu.Lock()
				trace = append(trace, name+">")
				mu.Unlock()
				err := next(ctx, j)
				mu.Lock()
				trace = append(trace, "<"+name)
				mu.Unlock()
				return err
			}
		}
	}
	events := make(chan core.EventKind, 16)
	h := core.NewHandlers()
	h.HandleRaw("k", func(ctx context.Context, j *core.Job) error {
		mu.Lock()
		trace = append(trace, "handler")
		mu.Unlock()
		return nil
	})
	c, _ := newClient(t, h, func(c *core.Config) {
		c.Middleware = []core.Middleware{mw("outer"), mw("inner")}
		c.Observers = []core.Observer{core.ObserverFunc(func(e core.Event) { events <- e.Kind })}
	})
	_ = c.Start(context.Background())
	_, _ = c.EnqueueRaw(context.Background(), "k", nil, nil)
	// Inserted and claimed may arrive in either order: the store's
	// notification can wake the claim before Enqueue reports the insert.
	// Registration comes first and completion after the claim.
	var got []core.EventKind
	for len(got) < 4 {
		select {
		case e := <-events:
			got = append(got, e)
		case <-time.After(10 * time.Second):
			t.Fatalf("events so far %v; want registered, inserted, claimed, completed", got)
		}
	}
	claimedAt := slices.Index(got, core.EventJobClaimed)
	if got[0] != core.EventWorkerRegistered || !slices.Contains(got, core.EventJobInserted) || claimedAt < 0 || got[3] != core.EventJobCompleted || claimedAt > 2 {
		t.Fatalf("events %v; want worker.registered, then job.inserted and job.claimed in either order, then job.completed", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(trace, " ") != "outer> inner> handler <inner <outer" {
		t.Fatalf("middleware order: %v", trace)
	}
}

func TestTypedArgsThatDoNotDecodeAreDiscarded(t *testing.T) {
	h := core.NewHandlers()
	core.Handle(h, func(ctx context.Context, j *core.TypedJob[greetArgs]) error { return nil })
	c, st := newClient(t, h, nil)
	_ = c.Start(context.Background())
	r, _ := c.EnqueueRaw(context.Background(), "greet", []byte(`{"name":42}`), nil)
	j := waitState(t, st, r.Job.ID, core.StateDiscarded)
	if j.Attempt != 1 || !strings.Contains(j.Errors[0].Error, "decode greet args") {
		t.Fatalf("%+v", j.Errors)
	}
}

func TestRetryPolicies(t *testing.T) {
	l := core.DelayList{10 * time.Second, 20 * time.Second, 30 * time.Second}
	for attempt, want := range map[int]time.Duration{1: 10 * time.Second, 2: 20 * time.Second, 3: 30 * time.Second, 9: 30 * time.Second} {
		if got := l.NextRetry(&core.Job{Attempt: attempt}, nil); got != want {
			t.Errorf("DelayList attempt %d: %s, want %s", attempt, got, want)
		}
	}
	e := core.ExponentialBackoff{Base: time.Second, Max: time.Minute, Jitter: 0.1}
	for attempt, want := range map[int]time.Duration{1: time.Second, 4: 8 * time.Second, 30: time.Minute} {
		got := e.NextRetry(&core.Job{Attempt: attempt}, nil)
		if got < want*9/10 || got > want*11/10 {
			t.Errorf("backoff attempt %d: %s, want %s ±10%%", attempt, got, want)
		}
	}
}

func TestHeartbeatKeepsLeasesDuringSoftStop(t *testing.T) {
	started := make(chan struct{})
	release := make(chan struct{})
	h := core.NewHandlers()
	h.HandleRaw("long", func(ctx context.Context, j *core.Job) error {
		close(started)
		<-release
		return nil
	})
	c, st := newClient(t, h, func(c *core.Config) {
		c.LeaseDuration = 600 * time.Millisecond
		c.HeartbeatInterval = 50 * time.Millisecond
		c.Retention = &core.Retention{Completed: time.Hour}
	})
	_ = c.Start(context.Background())
	r, _ := c.EnqueueRaw(context.Background(), "long", nil, nil)
	<-started
	stopped := make(chan error)
	go func() { stopped <- c.Stop(context.Background()) }()
	// Another node's maintenance runs well after the first lease expired.
	other, _ := core.NewClient(st, core.Config{Logger: quietLogger()})
	time.Sleep(1500 * time.Millisecond)
	other.Maintain(context.Background())
	close(release)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	j, _ := st.Get(context.Background(), r.Job.ID)
	if j.State != core.StateCompleted || len(j.Errors) != 0 {
		t.Fatalf("job was rescued during a soft stop: state %s errors %+v", j.State, j.Errors)
	}
}

func TestRetryAndSnoozeRunWithoutWaitingForPoll(t *testing.T) {
	var calls atomic.Int32
	h := core.NewHandlers()
	h.HandleRaw("k", func(ctx context.Context, j *core.Job) error {
		switch calls.Add(1) {
		case 1:
			return core.Snooze(20 * time.Millisecond)
		case 2:
			return errors.New("fail once")
		}
		return nil
	}, core.WithRetry(core.DelayList{20 * time.Millisecond}))
	c, st := newClient(t, h, func(c *core.Config) { c.Retention = &core.Retention{Completed: time.Hour} })
	_ = c.Start(context.Background())
	start := time.Now()
	r, _ := c.EnqueueRaw(context.Background(), "k", nil, nil) // PollInterval is an hour
	j := waitState(t, st, r.Job.ID, core.StateCompleted)
	if j.Attempt != 2 || time.Since(start) > 5*time.Second {
		t.Fatalf("attempt %d after %s", j.Attempt, time.Since(start))
	}
}

func TestHeartbeatStopsHandlerWhoseLeaseWasLost(t *testing.T) {
	clk := core.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	started := make(chan struct{})
	cause := make(chan error, 1)
	h := core.NewHandlers()
	h.HandleRaw("long", func(ctx context.Context, j *core.Job) error {
		close(started)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return ctx.Err()
	})
	var lost atomic.Int32
	c, st := newClient(t, h, func(c *core.Config) {
		c.Clock = clk
		c.LeaseDuration = time.Minute
		c.HeartbeatInterval = 20 * time.Millisecond
		c.Observers = []core.Observer{core.ObserverFunc(func(e core.Event) {
			if e.Kind == core.EventLeaseLost {
				lost.Add(1)
			}
		})}
	})
	_ = c.Start(context.Background())
	r, _ := c.EnqueueRaw(context.Background(), "long", nil, nil)
	<-started
	// The worker stalls past its lease (as far as the store can tell):
	// another node's maintenance, two minutes later, rescues the job.
	later := core.NewManualClock(clk.Now().Add(2 * time.Minute))
	other, _ := core.NewClient(st, core.Config{Clock: later, Logger: quietLogger()})
	other.Maintain(context.Background())
	select {
	case err := <-cause:
		if !errors.Is(err, core.ErrLeaseLost) {
			t.Fatalf("handler context cause: %v, want ErrLeaseLost", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the handler of a job whose lease was lost kept running")
	}
	j := waitState(t, st, r.Job.ID, core.StateRetryable)
	if j.Attempt != 1 || len(j.Errors) != 1 {
		t.Fatalf("rescued job changed by the stale worker: %+v", j)
	}
	deadline := time.Now().Add(5 * time.Second)
	for lost.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if lost.Load() != 1 {
		t.Fatalf("lease-lost events: %d", lost.Load())
	}
}

func TestMaintenanceHandsBackDeadWorkersJobsBeforeTheirLeasesEnd(t *testing.T) {
	clk := core.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	c, st := newClient(t, nil, func(c *core.Config) {
		c.Queues = nil
		c.Clock = clk
	})
	ctx := context.Background()
	for _, id := range []string{"dead", "stale"} {
		if err := st.RegisterWorker(ctx, core.WorkerInfo{ID: id, StartedAt: clk.Now(), HeartbeatAt: clk.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	a, _ := c.EnqueueRaw(ctx, "k", nil, nil)
	b, _ := c.EnqueueRaw(ctx, "k", nil, nil)
	long := clk.Now().Add(time.Hour) // leases far beyond the dead-after period
	for _, w := range []string{"dead", "stale"} {
		if got, err := st.Claim(ctx, contract.ClaimParams{Queue: "default", WorkerID: w, Limit: 1, Now: clk.Now(), LeaseUntil: long}); err != nil || len(got) != 1 {
			t.Fatalf("claim for %s: %v %v", w, got, err)
		}
	}
	clk.Add(90 * time.Second)
	_ = st.RegisterWorker(ctx, core.WorkerInfo{ID: "stale", StartedAt: clk.Now(), HeartbeatAt: clk.Now().Add(-40 * time.Second)})
	clk.Add(31 * time.Second) // "dead" is 121 s silent, "stale" 71 s
	ws, _ := st.Workers(ctx)
	for _, w := range ws {
		want := map[string]core.Liveness{"dead": core.LivenessDead, "stale": core.LivenessStale}[w.ID]
		if got := w.Liveness(clk.Now(), 30*time.Second, 2*time.Minute); got != want {
			t.Errorf("worker %s liveness %s, want %s", w.ID, got, want)
		}
	}
	c.Maintain(ctx)
	ja, _ := st.Get(ctx, a.Job.ID)
	jb, _ := st.Get(ctx, b.Job.ID)
	if ja.State != core.StateRetryable || len(ja.Errors) != 1 || ja.Errors[0].Cause != core.CauseWorkerDead || !strings.Contains(ja.Errors[0].Error, "worker dead lost: no heartbeat since") {
		t.Fatalf("the dead worker's job: state %s errors %+v; want retryable with a worker_dead error entry", ja.State, ja.Errors)
	}
	if jb.State != core.StateRunning {
		t.Fatalf("the stale worker's job: state %s; want still running", jb.State)
	}
	ws, _ = st.Workers(ctx)
	if len(ws) != 1 || ws[0].ID != "stale" {
		t.Fatalf("workers after maintenance: %+v; want only the stale one", ws)
	}
}

func TestWorkerTagsRouteTaggedJobs(t *testing.T) {
	h := core.NewHandlers()
	h.HandleRaw("k", func(context.Context, *core.Job) error { return nil })
	c, st := newClient(t, h, func(c *core.Config) { c.WorkerTags = []string{"gpu"} })
	ctx := context.Background()
	gpu, _ := c.EnqueueRaw(ctx, "k", nil, &core.Options{Tags: []string{"gpu"}})
	plain, _ := c.EnqueueRaw(ctx, "k", nil, nil)
	other, _ := c.EnqueueRaw(ctx, "k", nil, &core.Options{Tags: []string{"tpu"}})
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	waitState(t, st, gpu.Job.ID, core.StateCompleted)
	waitState(t, st, plain.Job.ID, core.StateCompleted)
	time.Sleep(20 * time.Millisecond)
	if j, _ := st.Get(ctx, other.Job.ID); j.State != core.StateAvailable {
		t.Fatalf("a job tagged tpu ran on a gpu worker: state %s", j.State)
	}
}

func TestAttemptErrorBounded(t *testing.T) {
	long := strings.Repeat("é", contract.MaxErrorBytes) // 2 bytes a rune
	b := core.AttemptError{Error: "head " + long, Trace: long + " tail"}.Bounded()
	if len(b.Error) > contract.MaxErrorBytes/2+len("…[truncated]") || !strings.HasPrefix(b.Error, "head ") || !strings.HasSuffix(b.Error, "…[truncated]") {
		t.Errorf("Error kept %d bytes: %.20q…", len(b.Error), b.Error)
	}
	if len(b.Trace) > contract.MaxErrorBytes/2+len("[truncated]…") || !strings.HasSuffix(b.Trace, " tail") || !strings.HasPrefix(b.Trace, "[truncated]…") {
		t.Errorf("Trace kept %d bytes", len(b.Trace))
	}
	if !utf8.ValidString(b.Error) || !utf8.ValidString(b.Trace) {
		t.Error("a cut split a rune")
	}
	if short := (core.AttemptError{Error: "x", Trace: "y"}).Bounded(); short.Error != "x" || short.Trace != "y" {
		t.Errorf("short texts changed: %+v", short)
	}
}
