package core

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

// ErrNotDue is returned by WorkJob for a job whose RunAt is after the
// client's clock time.
var ErrNotDue = errors.New("backlog: job is not due yet")

// ErrNotClaimed is returned by WorkJob when the job was due but its claim
// did not return it: its queue is paused, at its concurrency limits
// (QueueLimits), or another worker claimed it first.
var ErrNotClaimed = errors.New("backlog: job could not be claimed")

// workJobBatch is how many jobs one of WorkJob's claims takes at most.
const workJobBatch = 100

// WorkResult is what WorkJob did with one attempt of one job.
type WorkResult struct {
	// Job is the job as stored after the attempt's outcome was written
	// (state, errors, result, next RunAt). It is nil when that outcome
	// deleted the row: a completion under a Config.Retention whose
	// Completed is zero.
	Job *Job
	// Claimed is the job as the attempt's claim returned it: running,
	// with Attempt counting this attempt.
	Claimed *Job
	// Outcome is the kind of the outcome the engine wrote; "" when it
	// wrote none (the job was cancelled in the store, or its lease lost,
	// while the handler ran).
	Outcome contract.OutcomeKind
	// Event is what the client's observers were told once the outcome
	// applied (EventJobCompleted, EventJobRetried, …); "" when none.
	Event EventKind
	// Err is what the handler returned, after middleware (a timeout is a
	// *TimeoutError), or what stood for it when the handler did not run
	// (an unknown kind, a passed deadline); nil on success.
	Err error
	// Applied reports whether the outcome's fenced write applied. It is
	// false when the job was no longer held by this attempt (cancelled,
	// rescued or deleted meanwhile), and when the handler completed the
	// job in its own transaction (CompleteTx), which Job shows.
	Applied bool
}

// WorkJob runs one attempt of the job with id now, on the calling
// goroutine, through the engine: it claims the job under the client's
// worker id and lease, runs its handler with the client's middleware,
// timeout, deadline, decryption and panic recovery, classifies the
// return (Snooze, Cancel, Permanent, Continue, retry…) under the kind's
// retry policy, writes that fenced outcome as the engine's completer
// does (same events to observers) and returns the job as stored then.
// It is meant for tests (see package backlogtest) and for operators
// running one job by hand; it works on a client that was never started.
//
// The handler's context derives from ctx; CancelJob reaches it, and a
// started client's heartbeat renews its lease. A handler error is not an
// error of WorkJob: it is in WorkResult.Err and the stored job.
//
// The job must be due by the client's clock (Config.Clock): a job in
// state available, scheduled or retryable whose RunAt is not after
// Now. The claim is the store's ordinary Claim of the job's queue, with
// the job's tags as capabilities (the client's WorkerTags are not
// required): due jobs ahead of it in claim order are claimed along and
// handed back at once unrun, no attempt used and no error recorded, their
// RunAt kept (their ClaimSeq, AttemptedAt and WorkerID show the claim).
// A client whose producers work the same queue may claim the job first.
//
// Errors: ErrNotFound for a missing job; ErrInvalidState for a job that
// is running or final; ErrNotDue; ErrNotClaimed; store errors, and ctx's
// when it ends before the outcome is written (the job then returns
// through lease expiry and rescue).
func (c *Client) WorkJob(ctx context.Context, id int64) (*WorkResult, error) {
	j, err := c.store.Get(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("backlog: work job %d: %w", id, err)
	}
	switch j.State {
	case StateAvailable, StateScheduled, StateRetryable:
	default:
		return nil, fmt.Errorf("%w: work job %d: it is %s", ErrInvalidState, id, j.State)
	}
	now := c.clock.Now()
	if j.RunAt.After(now) {
		return nil, fmt.Errorf("%w: work job %d: due at %s, the client's clock reads %s",
			ErrNotDue, id, j.RunAt.Format(workJobTimeLayout), now.Format(workJobTimeLayout))
	}

	exec, err := c.claimOne(ctx, j, now)
	if err != nil {
		return nil, err
	}
	claimed := *exec.job
	po, ok, herr := c.attempt(exec, nil)
	res := &WorkResult{Claimed: &claimed, Err: herr}
	if !ok {
		c.untrack(exec)
	} else {
		res.Outcome, res.Event = po.o.Kind, po.ev
		applied := (&completer{c: c, stopCtx: ctx}).write([]pendingOutcome{po})
		if applied == nil {
			return res, fmt.Errorf("backlog: work job %d: write its outcome: %w", id, context.Cause(ctx))
		}
		res.Applied = applied[0]
	}
	res.Job, err = c.store.Get(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return res, nil
	}
	if err != nil {
		return res, fmt.Errorf("backlog: work job %d: read it back: %w", id, err)
	}
	return res, nil
}

const workJobTimeLayout = "2006-01-02T15:04:05.999999Z07:00"

// claimOne claims j for WorkJob and tracks its execution. Jobs the claims
// return before it are handed back unrun (no attempt used, no error entry)
// before the claim gate opens, so the orphan check never sees them.
func (c *Client) claimOne(ctx context.Context, j *Job, now time.Time) (*execution, error) {
	c.claimGate.RLock()
	defer c.claimGate.RUnlock()
	lease := now.Add(c.cfg.LeaseDuration)
	var target *Job
	var others []contract.Outcome
	var claimErr error
	for target == nil {
		jobs, err := c.store.Claim(ctx, contract.ClaimParams{
			Queue: j.Queue, WorkerID: c.cfg.WorkerID, Limit: workJobBatch,
			Now: now, LeaseUntil: lease, Tags: j.Tags,
		})
		c.reach.observe(c, err)
		if err != nil && !errors.Is(err, ErrQueuePaused) {
			claimErr = fmt.Errorf("backlog: work job %d: claim: %w", j.ID, err)
		}
		if err != nil || len(jobs) == 0 {
			break
		}
		for _, cj := range jobs {
			if cj.ID == j.ID && target == nil {
				target = cj
				continue
			}
			o := HandBack(cj, CauseShutdown, now)
			o.Error = nil
			others = append(others, o)
		}
	}
	var exec *execution
	if target != nil {
		exec = c.trackIn(ctx, target, lease)
	}
	if len(others) > 0 {
		// Held by this worker and untracked: hand them back before the
		// gate opens. A failure leaves them to lease expiry and rescue.
		if _, err := c.store.Finish(context.WithoutCancel(ctx), others); err != nil {
			c.log.Warn("backlog: work job: handing back jobs claimed along failed; they return after lease expiry", "jobs", len(others), "err", err)
		}
	}
	switch {
	case exec != nil:
		return exec, nil
	case claimErr != nil:
		return nil, claimErr
	}
	return nil, fmt.Errorf("%w: work job %d (queue %q is paused, at its concurrency limits, or another worker claimed it first)", ErrNotClaimed, j.ID, j.Queue)
}
