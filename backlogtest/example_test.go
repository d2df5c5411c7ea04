package backlogtest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/backlogq/backlog/backlogtest"
	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/store/memory"
)

// exampleT stands in for the *testing.T a real test passes: a failed
// assertion prints its message and panics.
type exampleT struct{ testing.TB }

func (exampleT) Helper()                           {}
func (exampleT) Context() context.Context          { return context.Background() }
func (exampleT) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

// WelcomeArgs are the args of the application's "welcome" job.
type WelcomeArgs struct {
	UserID int64  `json:"user_id"`
	Email  string `json:"email"`
}

// Kind names the handler.
func (WelcomeArgs) Kind() string { return "welcome" }

// signUp is application code under test: it enqueues a welcome email.
func signUp(ctx context.Context, c *core.Client, id int64, email string) error {
	_, err := c.Enqueue(ctx, WelcomeArgs{UserID: id, Email: email}, &core.Options{Queue: "mail"})
	return err
}

// The three pieces together, as in a test of an application: assert what
// the code under test enqueued, then run its handler through the engine.
// (In a real test, t is the test's *testing.T.)
func Example() {
	t := exampleT{}
	ctx := context.Background()

	h := core.NewHandlers()
	core.Handle(h, func(ctx context.Context, j *core.TypedJob[WelcomeArgs]) error {
		if j.Args.Email == "" {
			return core.Permanent(errors.New("no address"))
		}
		return core.RecordResult(ctx, map[string]string{"sent_to": j.Args.Email})
	})
	clock := backlogtest.NewClock(time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC))
	st := memory.New()
	defer st.Close()
	// No Queues and never started: jobs run only when the test says so.
	c, _ := core.NewClient(st, core.Config{Handlers: h, Clock: clock})

	if err := signUp(ctx, c, 42, "ada@example.com"); err != nil {
		panic(err)
	}
	job := backlogtest.RequireEnqueued(t, st, "welcome", map[string]any{"user_id": 42},
		&backlogtest.EnqueuedOpts{Queue: "mail"})

	job, err := backlogtest.WorkJob(ctx, t, c, job.ID)
	fmt.Println(job.State, string(job.Result), err)
	// Output: completed {"sent_to":"ada@example.com"} <nil>
}

// RequireEnqueued is River's rivertest.RequireInserted: args are a
// subset to find (a map names only some fields), opts narrow further,
// and the newest match is returned.
func ExampleRequireEnqueued() {
	t := exampleT{}
	ctx := context.Background()
	st := memory.New()
	defer st.Close()
	clock := backlogtest.NewClock(time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC))
	c, _ := core.NewClient(st, core.Config{Clock: clock})
	_ = signUp(ctx, c, 7, "bob@example.com")

	job := backlogtest.RequireEnqueued(t, st, "", WelcomeArgs{UserID: 7, Email: "bob@example.com"}, nil)
	fmt.Println(job.Kind, job.Queue, job.State)
	backlogtest.RequireNotEnqueued(t, st, "welcome", map[string]any{"user_id": 8}, nil)

	// A failed assertion names what it looked for and lists what it found.
	defer func() { fmt.Println(recover()) }()
	backlogtest.RequireEnqueued(t, st, "welcome", map[string]any{"user_id": 8}, nil)
	// Output:
	// welcome mail available
	// backlogtest: no job of kind "welcome" with args containing {"user_id":8} was enqueued; found 1 job(s) of that kind:
	// 	id 1 kind "welcome" queue "mail" state available priority 5 run_at 2030-01-01T09:00:00Z args {"user_id":7,"email":"bob@example.com"}
}

// RequireManyEnqueued is River's RequireManyInserted: the jobs of the
// expected kinds, in enqueue order, one per expectation.
func ExampleRequireManyEnqueued() {
	t := exampleT{}
	ctx := context.Background()
	st := memory.New()
	defer st.Close()
	c, _ := core.NewClient(st, core.Config{AllowUnknownKinds: true})
	_ = signUp(ctx, c, 1, "a@example.com")
	_, _ = c.EnqueueRaw(ctx, "audit", []byte(`{"event":"signup"}`), nil)
	_ = signUp(ctx, c, 2, "b@example.com")

	jobs := backlogtest.RequireManyEnqueued(t, st, []backlogtest.Expect{
		{Kind: "welcome", Args: map[string]any{"user_id": 1}},
		{Kind: "audit", Args: map[string]any{"event": "signup"}},
		{Kind: "welcome", Args: map[string]any{"user_id": 2}},
	})
	fmt.Println(len(jobs), jobs[1].Kind)
	// Output: 3 audit
}

// Work is River's rivertest.Worker.Work: enqueue and run one job now,
// through the engine's middleware, timeout, retry policy and outcome
// write. A failing handler's error comes back with the job as stored.
func ExampleWork() {
	t := exampleT{}
	ctx := context.Background()
	h := core.NewHandlers()
	core.Handle(h, func(ctx context.Context, j *core.TypedJob[WelcomeArgs]) error {
		if j.Args.Email == "" {
			return core.Permanent(errors.New("no address"))
		}
		return errors.New("smtp unreachable")
	}, core.WithRetry(core.DelayList{time.Minute}))
	st := memory.New()
	defer st.Close()
	c, _ := core.NewClient(st, core.Config{Handlers: h})

	job, err := backlogtest.Work(ctx, t, c, "", WelcomeArgs{UserID: 1, Email: "x@example.com"}, nil)
	fmt.Println(job.State, job.Attempt, job.Errors[0].Error, err)
	job, err = backlogtest.Work(ctx, t, c, "", WelcomeArgs{UserID: 2}, nil)
	fmt.Println(job.State, err)
	// Output:
	// retryable 1 smtp unreachable smtp unreachable
	// discarded permanent failure: no address
}

// Clock makes a scheduled job due without sleeping: WorkJob refuses a job
// that is not due by the client's clock, and runs it once the clock has
// been advanced.
func ExampleClock() {
	t := exampleT{}
	ctx := context.Background()
	h := core.NewHandlers()
	core.Handle(h, func(ctx context.Context, j *core.TypedJob[WelcomeArgs]) error { return nil })
	clock := backlogtest.NewClock(time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC))
	st := memory.New()
	defer st.Close()
	c, _ := core.NewClient(st, core.Config{Handlers: h, Clock: clock})

	r, _ := c.Enqueue(ctx, WelcomeArgs{UserID: 3, Email: "c@example.com"}, &core.Options{Delay: 24 * time.Hour})
	_, err := c.WorkJob(ctx, r.Job.ID)
	fmt.Println(errors.Is(err, core.ErrNotDue))

	clock.Advance(24 * time.Hour)
	job, err := backlogtest.WorkJob(ctx, t, c, r.Job.ID)
	fmt.Println(job.State, job.FinishedAt, err)
	// Output:
	// true
	// completed 2030-01-02 09:00:00 +0000 UTC <nil>
}
