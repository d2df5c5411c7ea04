package backlogtest_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backlogq/backlog/backlogtest"
	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/memory"
	"github.com/backlogq/backlog/store/sqlite"
)

type emailArgs struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
	Urgent  bool   `json:"urgent,omitempty"`
}

func (emailArgs) Kind() string { return "email" }

type reportArgs struct {
	Day string `json:"day"`
}

func (reportArgs) Kind() string { return "report" }

// forEachStore runs fn on a fresh memory store and on a fresh SQLite file.
func forEachStore(t *testing.T, fn func(t *testing.T, st contract.Store)) {
	t.Run("memory", func(t *testing.T) {
		st := memory.New()
		t.Cleanup(func() { _ = st.Close() })
		fn(t, st)
	})
	t.Run("sqlite", func(t *testing.T) {
		st := openSQLite(t)
		fn(t, st)
	})
}

func openSQLite(t *testing.T) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "jobs.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func newClient(t *testing.T, st contract.Store, h *core.Handlers, mod func(*core.Config)) *core.Client {
	t.Helper()
	cfg := core.Config{
		Handlers:            h,
		Logger:              slog.New(slog.NewTextHandler(io.Discard, nil)),
		MaintenanceInterval: -1,
		AllowUnknownKinds:   true,
	}
	if mod != nil {
		mod(&cfg)
	}
	c, err := core.NewClient(st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// fakeTB records the first Fatalf and ends the goroutine that called it.
type fakeTB struct {
	testing.TB
	mu  sync.Mutex
	msg string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.msg = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

// mustFail runs fn with a fake testing.TB and returns the message it
// failed with, failing t when fn did not fail.
func mustFail(t *testing.T, fn func(tb testing.TB)) string {
	t.Helper()
	f := &fakeTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.msg == "" {
		t.Fatal("the assertion did not fail")
	}
	return f.msg
}

func TestRequireEnqueued(t *testing.T) {
	forEachStore(t, func(t *testing.T, st contract.Store) {
		ctx := context.Background()
		clock := backlogtest.NewClock(time.Date(2030, 5, 6, 7, 8, 9, 123456789, time.UTC))
		c := newClient(t, st, nil, func(cfg *core.Config) { cfg.Clock = clock })
		if _, err := c.Enqueue(ctx, emailArgs{To: "ada@example.com", Subject: "hi"}, nil); err != nil {
			t.Fatal(err)
		}
		second, err := c.Enqueue(ctx, emailArgs{To: "ada@example.com", Subject: "again", Urgent: true}, &core.Options{
			Queue: "mail", Priority: 2, Tags: []string{"smtp"}, Metadata: map[string]string{"trace": "t1"}, Delay: time.Hour,
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Enqueue(ctx, reportArgs{Day: "2030-05-06"}, nil); err != nil {
			t.Fatal(err)
		}

		// nil args: any job of the kind; the newest is returned.
		if j := backlogtest.RequireEnqueued(t, st, "email", nil, nil); j.ID != second.Job.ID {
			t.Fatalf("newest match: job %d, want %d", j.ID, second.Job.ID)
		}
		// A map names only some fields; a struct names all it encodes.
		j := backlogtest.RequireEnqueued(t, st, "email", map[string]any{"to": "ada@example.com", "urgent": true}, nil)
		if j.ID != second.Job.ID {
			t.Fatalf("urgent match: job %d", j.ID)
		}
		backlogtest.RequireEnqueued(t, st, "", emailArgs{To: "ada@example.com", Subject: "hi"}, nil)
		backlogtest.RequireEnqueued(t, st, "email", []byte(`{"subject":"again"}`), &backlogtest.EnqueuedOpts{
			Queue: "mail", Priority: 2, Tags: []string{"smtp"}, Metadata: map[string]string{"trace": "t1"},
			States: []core.State{core.StateScheduled}, RunAt: clock.Now().Add(time.Hour), MaxAttempts: core.DefaultMaxAttempts,
		})
		backlogtest.RequireNotEnqueued(t, st, "email", map[string]any{"to": "bob@example.com"}, nil)
		backlogtest.RequireNotEnqueued(t, st, "email", nil, &backlogtest.EnqueuedOpts{Queue: "other"})
		backlogtest.RequireNotEnqueued(t, st, "sms", nil, nil)

		msg := mustFail(t, func(tb testing.TB) {
			backlogtest.RequireEnqueued(tb, st, "email", map[string]any{"to": "bob@example.com"}, &backlogtest.EnqueuedOpts{Queue: "mail"})
		})
		for _, want := range []string{`no job of kind "email" with args containing {"to":"bob@example.com"} (queue "mail") was enqueued`, `"to":"bob@example.com"`, `queue "mail"`, "found 2 job(s) of that kind", `"to":"ada@example.com"`, "state scheduled"} {
			if !strings.Contains(msg, want) {
				t.Errorf("failure message lacks %q:\n%s", want, msg)
			}
		}
		msg = mustFail(t, func(tb testing.TB) { backlogtest.RequireEnqueued(tb, st, "sms", nil, nil) })
		if !strings.Contains(msg, "found no jobs of that kind") {
			t.Errorf("failure message: %s", msg)
		}
		msg = mustFail(t, func(tb testing.TB) {
			backlogtest.RequireNotEnqueued(tb, st, "email", map[string]any{"urgent": true}, nil)
		})
		if !strings.Contains(msg, "found 1 job(s) matching") || !strings.Contains(msg, fmt.Sprintf("id %d ", second.Job.ID)) {
			t.Errorf("failure message: %s", msg)
		}
		msg = mustFail(t, func(tb testing.TB) {
			backlogtest.RequireEnqueued(tb, st, "email", map[string]any{"to": []string{"a"}}, nil)
		})
		if !strings.Contains(msg, "cannot be a pattern") {
			t.Errorf("array pattern: %s", msg)
		}
	})
}

func TestRequireManyEnqueued(t *testing.T) {
	forEachStore(t, func(t *testing.T, st contract.Store) {
		ctx := context.Background()
		c := newClient(t, st, nil, nil)
		for _, a := range []core.Args{
			emailArgs{To: "a"}, reportArgs{Day: "mon"}, emailArgs{To: "b"},
		} {
			if _, err := c.Enqueue(ctx, a, nil); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.EnqueueRaw(ctx, "other", nil, nil); err != nil {
			t.Fatal(err)
		}
		jobs := backlogtest.RequireManyEnqueued(t, st, []backlogtest.Expect{
			{Kind: "email", Args: map[string]any{"to": "a"}},
			{Kind: "report"},
			{Kind: "email", Args: map[string]any{"to": "b"}, Opts: &backlogtest.EnqueuedOpts{Queue: core.DefaultQueue}},
		})
		if len(jobs) != 3 || jobs[0].ID >= jobs[1].ID || jobs[1].ID >= jobs[2].ID || jobs[1].Kind != "report" {
			t.Fatalf("jobs: %+v", jobs)
		}

		msg := mustFail(t, func(tb testing.TB) { // wrong order
			backlogtest.RequireManyEnqueued(tb, st, []backlogtest.Expect{
				{Kind: "email", Args: map[string]any{"to": "b"}}, {Kind: "report"}, {Kind: "email", Args: map[string]any{"to": "a"}},
			})
		})
		if !strings.Contains(msg, "expectation 0") || !strings.Contains(msg, "expectation 2") || strings.Contains(msg, "expectation 1") {
			t.Errorf("wrong order: %s", msg)
		}
		msg = mustFail(t, func(tb testing.TB) { // an email job more than expected
			backlogtest.RequireManyEnqueued(tb, st, []backlogtest.Expect{{Kind: "email"}, {Kind: "report"}})
		})
		if !strings.Contains(msg, "want 2 jobs of these kinds, found 3") {
			t.Errorf("extra job: %s", msg)
		}
	})
}

// On SQLite a job enqueued in a transaction is visible to the assertions
// once the transaction commits, and never when it rolls back.
func TestRequireEnqueuedInTransaction(t *testing.T) {
	st := openSQLite(t)
	c := newClient(t, st, nil, nil)
	ctx := context.Background()
	enqueueTx := func(to string) *sql.Tx {
		t.Helper()
		tx, err := st.DB().BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		p, err := core.NewInsert(emailArgs{To: to}, nil, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.EnqueueTx(ctx, tx, []core.InsertParams{p}); err != nil {
			t.Fatal(err)
		}
		return tx
	}
	tx := enqueueTx("committed")
	backlogtest.RequireNotEnqueued(t, st, "email", nil, nil) // not committed yet
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	backlogtest.RequireEnqueued(t, st, "email", map[string]any{"to": "committed"}, nil)

	tx = enqueueTx("rolled back")
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	backlogtest.RequireNotEnqueued(t, st, "email", map[string]any{"to": "rolled back"}, nil)
}

func TestWorkRunsHandlersThroughTheEngine(t *testing.T) {
	forEachStore(t, func(t *testing.T, st contract.Store) {
		h := core.NewHandlers()
		var calls []string
		core.Handle(h, func(ctx context.Context, j *core.TypedJob[emailArgs]) error {
			switch j.Args.To {
			case "":
				return core.Permanent(errors.New("no recipient"))
			case "later":
				return core.Snooze(time.Minute)
			case "flaky":
				return errors.New("smtp down")
			case "slow":
				<-ctx.Done()
				return ctx.Err()
			case "next":
				return core.ContinueWith(reportArgs{Day: "tue"}, time.Time{})
			}
			return core.RecordResult(ctx, map[string]string{"sent": j.Args.To})
		}, core.WithTimeout(50*time.Millisecond), core.WithRetry(core.DelayList{time.Minute}))
		core.Handle(h, func(ctx context.Context, j *core.TypedJob[reportArgs]) error { return nil })
		c := newClient(t, st, h, func(cfg *core.Config) {
			cfg.AllowUnknownKinds = false
			cfg.Middleware = []core.Middleware{func(next core.HandlerFunc) core.HandlerFunc {
				return func(ctx context.Context, j *core.Job) error {
					calls = append(calls, j.Kind)
					return next(ctx, j)
				}
			}}
		})
		ctx := context.Background()

		j, err := backlogtest.Work(ctx, t, c, "", emailArgs{To: "ada"}, nil)
		if err != nil || j.State != core.StateCompleted || string(j.Result) != `{"sent":"ada"}` || j.Attempt != 1 {
			t.Fatalf("success: %v %+v", err, j)
		}
		j, err = backlogtest.Work(ctx, t, c, "email", map[string]any{"to": "flaky"}, nil)
		if err == nil || err.Error() != "smtp down" || j.State != core.StateRetryable || len(j.Errors) != 1 ||
			j.RunAt.Sub(j.Errors[0].At) != time.Minute {
			t.Fatalf("failure: %v %+v", err, j)
		}
		j, err = backlogtest.Work(ctx, t, c, "", emailArgs{}, nil)
		var perm *core.PermanentError
		if !errors.As(err, &perm) || j.State != core.StateDiscarded {
			t.Fatalf("permanent: %v %+v", err, j)
		}
		j, err = backlogtest.Work(ctx, t, c, "", emailArgs{To: "later"}, nil)
		if j.State != core.StateScheduled || j.Attempt != 0 {
			t.Fatalf("snooze: %v %+v", err, j)
		}
		j, err = backlogtest.Work(ctx, t, c, "", emailArgs{To: "slow"}, &core.Options{MaxAttempts: 1})
		var te *core.TimeoutError
		if !errors.As(err, &te) || j.State != core.StateDiscarded || !strings.Contains(j.Errors[0].Error, "timed out after 50ms") {
			t.Fatalf("timeout: %v %+v", err, j)
		}
		j, err = backlogtest.Work(ctx, t, c, "", emailArgs{To: "next"}, nil)
		if err == nil || j.Kind != "report" || j.State != core.StateAvailable {
			t.Fatalf("continue: %v %+v", err, j)
		}
		if j, err = backlogtest.WorkJob(ctx, t, c, j.ID); err != nil || j.State != core.StateCompleted {
			t.Fatalf("continued step: %v %+v", err, j)
		}
		if len(calls) != 7 {
			t.Fatalf("middleware saw %v", calls)
		}

		msg := mustFail(t, func(tb testing.TB) { backlogtest.Work(ctx, tb, c, "sms", nil, nil) })
		if !strings.Contains(msg, "enqueue sms") {
			t.Errorf("unknown kind: %s", msg)
		}
		msg = mustFail(t, func(tb testing.TB) { backlogtest.WorkJob(ctx, tb, c, j.ID) })
		if !strings.Contains(msg, "it is completed") {
			t.Errorf("completed job: %s", msg)
		}
	})
}

func TestClockMakesScheduledJobsDue(t *testing.T) {
	forEachStore(t, func(t *testing.T, st contract.Store) {
		h := core.NewHandlers()
		fail := true
		core.Handle(h, func(ctx context.Context, j *core.TypedJob[reportArgs]) error {
			if fail {
				fail = false
				return errors.New("not yet")
			}
			return nil
		}, core.WithRetry(core.DelayList{10 * time.Minute}))
		clock := backlogtest.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
		c := newClient(t, st, h, func(cfg *core.Config) { cfg.Clock = clock })
		ctx := context.Background()

		r, err := c.Enqueue(ctx, reportArgs{Day: "wed"}, &core.Options{Delay: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.WorkJob(ctx, r.Job.ID); !errors.Is(err, core.ErrNotDue) {
			t.Fatalf("before Advance: %v", err)
		}
		clock.Advance(time.Hour)
		j, err := backlogtest.WorkJob(ctx, t, c, r.Job.ID)
		if err == nil || j.State != core.StateRetryable || !j.RunAt.Equal(clock.Now().Add(10*time.Minute)) {
			t.Fatalf("first attempt: %v %+v", err, j)
		}
		if _, err := c.WorkJob(ctx, r.Job.ID); !errors.Is(err, core.ErrNotDue) {
			t.Fatalf("before the backoff passed: %v", err)
		}
		clock.Advance(10 * time.Minute)
		j, err = backlogtest.WorkJob(ctx, t, c, r.Job.ID)
		if err != nil || j.State != core.StateCompleted || j.Attempt != 2 || !j.FinishedAt.Equal(clock.Now()) {
			t.Fatalf("second attempt: %v %+v", err, j)
		}
	})
}

func TestClock(t *testing.T) {
	loc := time.FixedZone("X", 3600)
	c := backlogtest.NewClock(time.Date(2030, 1, 1, 1, 0, 0, 1999, loc))
	want := time.Date(2030, 1, 1, 0, 0, 0, 1000, time.UTC)
	if got := c.Now(); got != want {
		t.Fatalf("Now = %v, want %v (UTC, µs)", got, want)
	}
	if got := c.Advance(90 * time.Second); got != want.Add(90*time.Second) || c.Now() != got {
		t.Fatalf("Advance = %v", got)
	}
	c.Set(want)
	if c.Now() != want {
		t.Fatalf("Set: %v", c.Now())
	}
	var zero backlogtest.Clock
	if now := zero.Now(); now.IsZero() || now.Location() != time.UTC || now.Nanosecond()%1000 != 0 || time.Since(now) > time.Minute {
		t.Fatalf("zero clock: %v", now)
	}

	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				c.Advance(time.Microsecond)
				_ = c.Now()
			}
		})
	}
	wg.Wait()
	if got := c.Now(); got != want.Add(8000*time.Microsecond) {
		t.Fatalf("after concurrent Advance: %v", got)
	}
}
