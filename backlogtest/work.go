package backlogtest

import (
	"context"
	"testing"

	"github.com/backlogq/backlog/core"
)

// Work enqueues one job of kind with args (encoded as Enqueue would:
// []byte and json.RawMessage are JSON already, nil means {}) and opts
// through c, then runs it at once through the engine with WorkJob, and
// returns the job as stored afterwards and the error its handler
// returned (nil when it succeeded). kind "" takes the kind from args when
// it is a core.Args.
//
// t fails (t.Fatalf) when the job cannot be enqueued (invalid, unknown
// kind), when it is a unique-key duplicate of a live job, or when
// WorkJob cannot run it (see WorkJob); a failing handler does not fail t.
// A job enqueued with a future RunAt is not due: enqueue it, Advance the
// client's Clock, then call WorkJob.
func Work(ctx context.Context, t testing.TB, c *core.Client, kind string, args any, opts *core.Options) (*core.Job, error) {
	t.Helper()
	if kind == "" {
		if a, ok := args.(core.Args); ok {
			kind = a.Kind()
		}
	}
	b, err := encodeArgs(args)
	if err != nil {
		t.Fatalf("backlogtest: encode %s args: %v", kind, err)
	}
	r, err := c.EnqueueRaw(ctx, kind, b, opts)
	if err != nil {
		t.Fatalf("backlogtest: enqueue %s: %v", kind, err)
	}
	if r.Duplicate {
		t.Fatalf("backlogtest: enqueue %s: a duplicate of live job %d (unique key %q)", kind, r.Job.ID, r.Job.UniqueKey)
	}
	return WorkJob(ctx, t, c, r.Job.ID)
}

// WorkJob runs one attempt of the job with id now, on the calling
// goroutine, through the engine (core.Client.WorkJob): the same claim,
// middleware, timeout, deadline, retry policy, outcome classification
// (Snooze, Cancel, Permanent, Continue, retry) and fenced outcome write as
// a running client, with the same events to its observers. c need not be
// started, and is best built without Config.Queues so no producer of its
// own claims the job first.
//
// It returns the job as stored afterwards (state, Errors, Result, next
// RunAt; nil only when the outcome deleted it: a completion under a
// Config.Retention whose Completed is zero) and the error the handler
// returned (nil when it succeeded; a *core.TimeoutError for a timeout).
//
// t fails (t.Fatalf) when the job cannot run: missing, running or final
// (core.ErrInvalidState), not yet due by c's clock (core.ErrNotDue: use a
// Clock and Advance it), or not claimable (core.ErrNotClaimed: a paused
// queue, concurrency limits); and on store errors. Call
// c.WorkJob for the full core.WorkResult or to test those cases.
func WorkJob(ctx context.Context, t testing.TB, c *core.Client, id int64) (*core.Job, error) {
	t.Helper()
	res, err := c.WorkJob(ctx, id)
	if err != nil {
		t.Fatalf("backlogtest: %v", err)
	}
	return res.Job, res.Err
}
