package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

// execution is one attempt this node holds: from its claim until its
// outcome is written (or known lost). The heartbeat extends the leases of
// exactly these, by job id and ClaimSeq.
type execution struct {
	job    *Job
	ctx    context.Context // the handler's context (before timeouts)
	cancel context.CancelCauseFunc
	// returned is set once the handler has returned: from then on the
	// execution only reports its outcome, and a lease check must not
	// cancel it.
	returned atomic.Bool
	// leaseUntil is the lease the store holds for it as far as this node
	// knows (unix ns): the claim's, then each renewal's.
	leaseUntil atomic.Int64
	// warnedOutcome is set once this node has warned that the lease of
	// the execution's waiting outcome could not be renewed.
	warnedOutcome atomic.Bool
}

// track registers a claimed job as held by this node and returns its
// execution. Called by the claim itself, before the claim gate opens, so
// the orphan check never mistakes a fresh claim for a lost one.
func (c *Client) track(job *Job, leaseUntil time.Time) *execution {
	return c.trackIn(c.workCtx, job, leaseUntil)
}

// trackIn is track with the handler's context derived from parent
// (WorkJob's caller's context instead of the client's work context).
func (c *Client) trackIn(parent context.Context, job *Job, leaseUntil time.Time) *execution {
	ctx, cancel := context.WithCancelCause(parent)
	e := &execution{job: job, ctx: ctx, cancel: cancel}
	e.leaseUntil.Store(leaseUntil.UnixNano())
	c.mu.Lock()
	c.running[job.ID] = e
	c.mu.Unlock()
	return e
}

// untrack forgets e once its outcome was written or can no longer apply.
// A newer execution of the same job (re-claimed by this node after the
// outcome applied) is left alone.
func (c *Client) untrack(e *execution) {
	e.cancel(nil)
	c.mu.Lock()
	if c.running[e.job.ID] == e {
		delete(c.running, e.job.ID)
	}
	c.mu.Unlock()
}

var errTimeout = errors.New("backlog: attempt timed out")

// execute runs one claimed job and hands its outcome to the completer,
// which untracks the execution once the outcome is written.
func (c *Client) execute(p *producer, exec *execution) {
	defer c.execs.Done()
	defer p.jobDone()
	po, ok, _ := c.attempt(exec, p.observeRun)
	if !ok {
		c.untrack(exec)
		return
	}
	c.completer.add(po)
}

// attempt runs one claimed job's handler as the engine does (deadline,
// decryption, middleware, timeout, panics, lease and cancellation causes)
// and returns the outcome to write with ok set, or ok unset when nothing
// is to be written (cancelled in the store, lease lost): the caller then
// untracks exec. herr is what the handler returned (or what stood for it
// when it did not run). observeRun, when set, gets the handler's wall
// time in ns. Shared by the engine (execute) and WorkJob.
func (c *Client) attempt(exec *execution, observeRun func(ns int64)) (po pendingOutcome, ok bool, herr error) {
	job := exec.job

	start, began := c.clock.Now(), time.Now()
	c.emit(claimedEvent(job, start))

	ctx := exec.ctx
	st := &execState{job: job, workerID: c.cfg.WorkerID, maxResult: c.cfg.MaxResultBytes, store: c.store, clock: c.clock, client: c}
	if enc := c.cfg.Encryption; enc != nil && enc.Results {
		if tc, ok := c.store.(contract.TxCompleter); ok {
			st.store = sealingTxCompleter{Store: c.store, tc: tc, keys: enc.Keys, kind: job.Kind}
		}
	}
	ctx = context.WithValue(ctx, execKey{}, st)
	ctx, flushProgress := WithProgressSink(ctx, c.clock, storeProgressSink(c.store, job, c.cfg.WorkerID))
	// The attempt's span (tracing on), a child of the job's creation
	// context: the handler's context carries it.
	ctx, span := c.tracing.StartProcess(ctx, job)

	// The handler sees its args opened; the job the engine keeps (events,
	// Running, outcomes) stays as stored.
	hjob, openErr := c.cfg.Encryption.OpenForHandler(job)
	entry := c.cfg.Handlers.lookup(job.Kind)
	var err error
	ran := false // the handler was called
	switch {
	case ctx.Err() != nil:
		// Stopped before it started (a job claimed ahead, cancelled or
		// whose lease could not be renewed while it waited): the handler
		// does not run; the cause decides below.
		err = context.Cause(ctx)
	case !job.Deadline.IsZero() && !start.Before(job.Deadline):
		err = errDeadline
	case openErr != nil:
		err = openErr
	case entry == nil || entry.fn == nil: // unknown, or declared to run elsewhere
		err = fmt.Errorf("%w %q (worker %s knows %d kinds)", ErrUnknownKind, job.Kind, c.cfg.WorkerID, len(c.cfg.Handlers.Kinds()))
	default:
		timeout := entry.timeout
		if timeout <= 0 {
			timeout = c.cfg.DefaultTimeout
		}
		runCtx := ctx
		var stopTimeout context.CancelFunc = func() {}
		if timeout > 0 {
			runCtx, stopTimeout = context.WithTimeoutCause(runCtx, timeout, errTimeout)
		}
		if !job.Deadline.IsZero() {
			var stopDeadline context.CancelFunc
			runCtx, stopDeadline = context.WithDeadlineCause(runCtx, job.Deadline, errDeadline)
			defer stopDeadline()
		}
		fn := HandlerFunc(entry.fn)
		for i := len(c.cfg.Middleware) - 1; i >= 0; i-- {
			fn = c.cfg.Middleware[i](fn)
		}
		ran = true
		err = CallSafely(func() error { return fn(runCtx, hjob) })
		if ferr := flushProgress(ctx); ferr != nil && !errors.Is(ferr, ErrLeaseLost) && !errors.Is(ferr, ErrUnsupported) {
			c.log.Warn("backlog: the last progress report was not written", "job_id", job.ID, "kind", job.Kind, "error", ferr)
		}
		if err != nil && runCtx.Err() != nil {
			if cause := context.Cause(runCtx); errors.Is(cause, errTimeout) {
				err = &TimeoutError{After: timeout, Err: err}
			} else if errors.Is(cause, errDeadline) {
				err = fmt.Errorf("%w: %w", errDeadline, err)
			}
		}
		stopTimeout()
	}
	exec.returned.Store(true)
	dur := c.clock.Now().Sub(start)
	if ran && observeRun != nil {
		observeRun(int64(time.Since(began))) // the wall clock, for AutoClaimAhead
	}

	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errJobCancelled):
		// Cancelled in the store while running: the row is already final,
		// a finish would only fail its fence.
		c.log.Info("backlog: running job was cancelled", "job_id", job.ID, "kind", job.Kind)
		span.End(string(contract.OutcomeCancel), err)
		return pendingOutcome{}, false, err
	case errors.Is(cause, errLeaseUnrenewed) && !(ran && Classify(ctx, err).Kind != contract.OutcomeRetry):
		// The store was out of reach for most of the lease: the handler
		// was stopped before the lease could run out, and the job is
		// handed back without using an attempt (fenced: if it was
		// rescued meanwhile, this changes nothing). A handler that
		// returned a deliberate outcome all the same (nil, Continue,
		// Snooze, Cancel, Permanent: it finished as the stop came, or it
		// does not watch its context) did its work: that outcome is
		// written instead, fenced like any other, so a finished job is
		// never handed back to run again. Only a failure (most often the
		// context's own error) is handed back.
		now := c.clock.Now()
		po := pendingOutcome{job: job, exec: exec, dur: dur, ev: EventJobSnoozed, cause: CauseLeaseUnrenewed,
			o: HandBack(job, CauseLeaseUnrenewed, now)}
		span.End(string(contract.OutcomeSnooze), nil)
		return po, true, err
	case errors.Is(cause, ErrLeaseLost) && !errors.Is(cause, errLeaseUnrenewed):
		// The heartbeat found the job no longer ours (rescued, deleted,
		// finished elsewhere): its outcome could not apply.
		c.emit(Event{Kind: EventLeaseLost, At: c.clock.Now(), Queue: job.Queue, Job: job, Duration: dur})
		span.End(OutcomeLeaseLost, err)
		return pendingOutcome{}, false, err
	}
	po = c.decide(ctx, job, err, st)
	if openErr != nil && po.o.Error != nil {
		po.o.Error.Cause = CauseDecrypt
	}
	span.End(string(po.o.Kind), po.err)
	c.cfg.Encryption.SealOutcome(&po.o, job.Kind)
	po.dur = dur
	po.exec = exec
	return po, true, err
}

// errLeaseUnrenewed is the cancellation cause of handlers whose lease this
// node could not renew in time.
var errLeaseUnrenewed = fmt.Errorf("%w: the lease could not be renewed before it ran out", ErrLeaseLost)

var errDeadline = errors.New("backlog: job deadline passed")

// decide turns a handler's return into a fenced outcome with Decide,
// under the kind's retry policy (the client's default when it has none).
func (c *Client) decide(ctx context.Context, job *Job, err error, st *execState) pendingOutcome {
	st.mu.Lock()
	quiet, committed, result := st.completedTx, st.committedTx, st.result
	st.mu.Unlock()
	v := Classify(ctx, err)
	if v.Kind == contract.OutcomeComplete {
		v.Result = result
	}
	d := Decide(job, v, c.decidePolicy(job.Kind, c.clock.Now()))
	d.Outcome.WorkerID = c.cfg.WorkerID
	return pendingOutcome{job: job, o: d.Outcome, ev: d.Event, reason: d.Reason, err: d.Err, quiet: quiet, committed: committed && (d.Outcome.Kind == contract.OutcomeComplete || d.Outcome.Kind == contract.OutcomeContinue)}
}

func sortStrings(s []string) { slices.Sort(s) }

// sealingTxCompleter seals the result of a transactional completion
// (CompleteTx) before the store writes it.
type sealingTxCompleter struct {
	contract.Store
	tc   contract.TxCompleter
	keys *Keyring
	kind string // the job's kind
}

func (s sealingTxCompleter) CompleteTx(ctx context.Context, tx any, o contract.Outcome) error {
	o.Result = s.keys.SealResult(s.kind, o.Result)
	return s.tc.CompleteTx(ctx, tx, o)
}

// RetryPolicy returns the policy that schedules the retry of a failed
// attempt of kind: the kind's WithRetry (given to its handler, or to
// Handlers.Declare for a kind run elsewhere), else Config.Retry. The
// engine uses it for its own handlers' failures, and the HTTP API for the
// failures remote workers report, so a kind fails the same way whatever
// runs it.
func (c *Client) RetryPolicy(kind string) RetryPolicy {
	if e := c.cfg.Handlers.lookup(kind); e != nil && e.retry != nil {
		return e.retry
	}
	return c.cfg.Retry
}
