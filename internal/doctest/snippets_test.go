package doctest

// The Go code that docs/coming-from-river.md and docs/scheduling.md show,
// between "// snippet: NAME" and "// end snippet" lines: this file
// compiles (and go vet checks it) with the package's tests, and
// TestDocSnippetsMatch checks that every marked block of those docs is
// the code of its region here, indentation aside. TestRiverWalkthrough
// runs the shown calls on SQLite.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/store/postgres"
)

// snippet: river-args
type SortArgs struct {
	Strings []string `json:"strings"`
}

// Kind names the handler, like River's JobArgs.Kind.
func (SortArgs) Kind() string { return "sort" }

// end snippet

// errNotReady stands for an application's error.
var errNotReady = errors.New("not ready")

// remoteCheck stands for a call the application makes.
func remoteCheck(context.Context, []string) error { return nil }

// sortHandlers registers the sort handler as the doc shows it.
func sortHandlers() *core.Handlers {
	// snippet: river-worker
	handlers := core.NewHandlers()
	core.Handle(handlers, func(ctx context.Context, job *core.TypedJob[SortArgs]) error {
		sort.Strings(job.Args.Strings)
		fmt.Printf("sorted %d strings (attempt %d)\n", len(job.Args.Strings), job.Attempt)
		return nil
	}, core.WithTimeout(time.Minute))
	// end snippet
	return handlers
}

// newPostgresClient is the River-like set-up on the application's pool.
func newPostgresClient(ctx context.Context, pool *pgxpool.Pool, handlers *core.Handlers) (*core.Client, error) {
	// snippet: river-client
	store, err := postgres.New(ctx, pool) // migrates the schema "backlog"
	if err != nil {
		return nil, err
	}
	client, err := core.NewClient(store, core.Config{
		Queues:   map[string]core.QueueConfig{core.DefaultQueue: {MaxWorkers: 100}},
		Handlers: handlers,
	})
	if err != nil {
		return nil, err
	}
	if err := client.Start(ctx); err != nil {
		return nil, err
	}
	// end snippet
	return client, nil
}

// insert enqueues as the doc shows.
func insert(ctx context.Context, client *core.Client) (int64, error) {
	// snippet: river-insert
	res, err := client.Enqueue(ctx, SortArgs{Strings: []string{"whale", "tiger", "bear"}}, &core.Options{
		Queue:        core.DefaultQueue,
		Priority:     2,                // 1 first … 10 last; River's 1 … 4
		Delay:        10 * time.Second, // or RunAt (River's ScheduledAt)
		MaxAttempts:  5,
		UniqueByArgs: true,      // River's UniqueOpts{ByArgs: true}
		UniqueFor:    time.Hour, // the key stays held an hour after the job ends
	})
	if err != nil {
		return 0, err
	}
	if res.Duplicate {
		fmt.Println("already enqueued as job", res.Job.ID)
	}
	// end snippet
	return res.Job.ID, nil
}

// insertTx enqueues in the application's transaction.
func insertTx(ctx context.Context, pool *pgxpool.Pool, client *core.Client) error {
	// snippet: river-insert-tx
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "UPDATE lists SET sorted = false WHERE id = $1", 42); err != nil {
		return err
	}
	// River: client.InsertTx(ctx, tx, SortArgs{…}, nil)
	if _, err := client.EnqueueArgsTx(ctx, tx, SortArgs{Strings: []string{"b", "a"}}, nil); err != nil {
		return err
	}
	return tx.Commit(ctx) // the update and the job, or neither
	// end snippet
}

// retryHandlers registers a kind with its own retry policy.
func retryHandlers() *core.Handlers {
	handlers := core.NewHandlers()
	// snippet: river-retry
	core.Handle(handlers, func(ctx context.Context, job *core.TypedJob[SortArgs]) error {
		return remoteCheck(ctx, job.Args.Strings)
	},
		// River's Worker.NextRetry: the wait before the next attempt.
		core.WithRetry(core.RetryFunc(func(job *core.Job, err error) time.Duration {
			return time.Duration(job.Attempt) * 30 * time.Second
		})),
		core.WithMaxAttempts(5), // attempts of jobs enqueued without MaxAttempts
	)
	// end snippet
	return handlers
}

// outcomeHandlers shows the handler outcomes besides success and failure.
func outcomeHandlers() *core.Handlers {
	handlers := core.NewHandlers()
	// snippet: river-outcomes
	core.Handle(handlers, func(ctx context.Context, job *core.TypedJob[SortArgs]) error {
		switch err := remoteCheck(ctx, job.Args.Strings); {
		case errors.Is(err, errNotReady):
			return core.Snooze(time.Minute) // River: river.JobSnooze(time.Minute); no attempt used
		case errors.Is(err, context.Canceled):
			return core.Cancel(err) // River: river.JobCancel(err); final, state cancelled
		case err != nil && len(job.Args.Strings) == 0:
			return core.Permanent(err) // discarded now, whatever attempts are left
		default:
			return err // nil completes; an error is retried by the kind's policy
		}
	})
	// end snippet
	return handlers
}

// cancelByID cancels a job from outside, as River's Client.JobCancel.
func cancelByID(ctx context.Context, client *core.Client, id int64) error {
	// snippet: river-cancel
	job, err := client.CancelJob(ctx, id) // River: client.JobCancel(ctx, id)
	if err != nil {
		return err
	}
	fmt.Println("job", job.ID, "is now", job.State) // running here: its handler's context is cancelled
	// end snippet
	return nil
}

// errorHandlerConfig is River's ErrorHandler as an observer and a
// middleware.
func errorHandlerConfig(logger *slog.Logger) core.Config {
	// snippet: river-error-handler
	cfg := core.Config{
		// Every failed attempt and every job given up on, on this node
		// (River's ErrorHandler.HandleError; a panic is recovered and
		// reported as an error of cause "panic": HandlePanic).
		Observers: []core.Observer{core.ObserverFunc(func(e core.Event) {
			switch e.Kind {
			case core.EventJobRetried:
				logger.Warn("job failed; will retry", "job_id", e.Job.ID, "kind", e.Job.Kind, "err", e.Err)
			case core.EventJobDiscarded:
				logger.Error("job discarded", "job_id", e.Job.ID, "kind", e.Job.Kind, "reason", e.Reason, "err", e.Err)
			}
		})},
		// Around every handler, outermost first (River's middleware).
		Middleware: []core.Middleware{func(next core.HandlerFunc) core.HandlerFunc {
			return func(ctx context.Context, job *core.Job) error {
				start := time.Now()
				err := next(ctx, job)
				logger.Debug("job ran", "job_id", job.ID, "took", time.Since(start), "err", err)
				return err
			}
		}},
	}
	// end snippet
	return cfg
}

// snippet: river-periodic
// River: river.NewPeriodicJob(river.PeriodicInterval(time.Hour),
// func() (river.JobArgs, *river.InsertOpts) { … }, nil)
var hourlySort = core.PeriodicJob{
	Name:     "hourly-sort", // one job per occurrence across every node
	Schedule: "@every 1h",   // or cron: "0 * * * *", "CRON_TZ=Europe/Paris 0 3 * * *"
	ArgsFunc: func(at time.Time) (core.Args, error) {
		return SortArgs{Strings: []string{at.Format(time.RFC3339)}}, nil
	},
	Options: core.Options{Queue: core.DefaultQueue},
}

// end snippet

// stop shuts a client down as River's Stop and StopAndCancel do.
func stop(client *core.Client) error {
	// snippet: river-stop
	// Soft stop: no new claims; running jobs may finish for 30 s. Then a
	// hard stop: their contexts are cancelled and the jobs still running
	// are handed back (available again, no attempt used).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := client.Stop(ctx); err != nil {
		return fmt.Errorf("stopped hard: %w", err)
	}
	// client.StopAndCancel(ctx) skips the soft stop.
	// end snippet
	return nil
}

// inspect is asynq's Inspector as client calls.
func inspect(ctx context.Context, client *core.Client) error {
	// snippet: asynq-inspector
	// asynq: inspector.ListArchivedTasks("default")
	dead, err := client.ListJobs(ctx, core.ListParams{
		Queue: core.DefaultQueue, States: []core.State{core.StateDiscarded}, Desc: true, Limit: 50,
	})
	if err != nil {
		return err
	}
	for _, j := range dead {
		// asynq: inspector.RunTask("default", id)
		if _, err := client.RetryJob(ctx, j.ID); err != nil {
			return err
		}
	}
	// asynq: inspector.PauseQueue("default")
	if err := client.PauseQueue(ctx, core.DefaultQueue); err != nil {
		return err
	}
	// end snippet
	return client.ResumeQueue(ctx, core.DefaultQueue)
}

// scheduling.md's typed periodic job.

// snippet: scheduling-argsfunc
type ReportArgs struct {
	Day string `json:"day"` // the day the report covers
}

func (ReportArgs) Kind() string { return "report" }

func reportSchedule() core.PeriodicJob {
	return core.PeriodicJob{
		Name:     "daily-report",
		Schedule: "CRON_TZ=Europe/Paris 0 3 * * *",
		ArgsFunc: func(at time.Time) (core.Args, error) {
			// at is 03:00 in Paris: 01:00 or 02:00 UTC, the same day.
			day := at.AddDate(0, 0, -1)
			return ReportArgs{Day: day.Format(time.DateOnly)}, nil
		},
		Options: core.Options{Queue: "reports"},
	}
}

// end snippet
