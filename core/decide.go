package core

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

// The engine's one decision "handler result → outcome, backoff, error
// entry, event", used by every transport: the in-process executor, the
// HTTP API's outcome endpoints (for remote workers) and the remote worker
// of adapters/httpapi/client. It has two steps:
//
//  1. Classify reads what a handler's return asks for (a Verdict): done
//     where the handler ran, in process or in the remote worker.
//  2. Decide turns a verdict into a fenced Outcome against the job's
//     attempts, deadline and retry policy: done where the job's row is,
//     by the engine or by the HTTP API, which rebuilds the verdict from
//     the worker's report.
//
// The delay before a retry is, first, the one the failure carries
// (RetryIn, a remote worker's retry_in_seconds), then the kind's retry
// policy, then the default policy (DecidePolicy.Retry is whichever of the
// two applies).

// Verdict is what one attempt's handler asked for, before the job's
// attempts, deadline and retry policy have their say.
type Verdict struct {
	// Kind is what the handler asked for: OutcomeComplete, OutcomeRetry
	// (a failed attempt: retried by the policy, or discarded when its
	// attempts or its deadline run out), OutcomeSnooze, OutcomeCancel,
	// OutcomeDiscard (a permanent failure) or OutcomeContinue.
	Kind contract.OutcomeKind
	// Err is the handler's error (nil on success). For OutcomeRetry,
	// OutcomeCancel and OutcomeDiscard its message and trace make the
	// attempt's error entry (see ErrorEntry); events report it.
	Err error
	// Result is OutcomeComplete's result (nil for none).
	Result []byte
	// Delay is how long an OutcomeSnooze waits (0 = due now).
	Delay time.Duration
	// RetryIn, when set on an OutcomeRetry, is the wait before the next
	// attempt in place of the retry policy's.
	RetryIn *time.Duration
	// Next is OutcomeContinue's next step.
	Next *ContinueError
}

// Classify reads the verdict of a handler that returned err while running
// under ctx (the handler's own context: a hard stop is read from its
// cause). The order of precedence:
//
//	err == nil                        OutcomeComplete
//	ctx cancelled by a hard stop      OutcomeSnooze, Delay 0 (handed back, no attempt used)
//	wrapping *SnoozeError             OutcomeSnooze for its Delay
//	wrapping *CancelError             OutcomeCancel
//	wrapping *ContinueError           OutcomeContinue
//	wrapping *PermanentError          OutcomeDiscard
//	wrapping *RetryInError            OutcomeRetry with RetryIn set
//	any other error                   OutcomeRetry
//
// A nil ctx has no cause.
func Classify(ctx context.Context, err error) Verdict {
	v := Verdict{Kind: contract.OutcomeRetry, Err: err}
	if err == nil {
		v.Kind = contract.OutcomeComplete
		return v
	}
	if ctx != nil && ErrShutdown(context.Cause(ctx)) {
		v.Kind = contract.OutcomeSnooze
		return v
	}
	var (
		se *SnoozeError
		ce *CancelError
		ct *ContinueError
		pe *PermanentError
		ri *RetryInError
	)
	switch {
	case errors.As(err, &se):
		v.Kind, v.Delay = contract.OutcomeSnooze, max(se.Delay, 0)
	case errors.As(err, &ce):
		v.Kind = contract.OutcomeCancel
	case errors.As(err, &ct):
		v.Kind, v.Next = contract.OutcomeContinue, ct
	case errors.As(err, &pe):
		v.Kind = contract.OutcomeDiscard
	case errors.As(err, &ri):
		d := max(ri.Delay, 0)
		v.RetryIn = &d
	}
	return v
}

// DecidePolicy is what Decide needs besides the job and the verdict.
type DecidePolicy struct {
	// Now is when the attempt ended; the zero time means time.Now().
	Now time.Time
	// Retry is the retry policy of the job's kind, or the default one
	// when the kind has none; nil means ExponentialBackoff{}.
	Retry RetryPolicy
	// MaxArgsBytes bounds a continuation's args in bytes (sealed args:
	// the sealed size of that many bytes, SealedSize); 0 means no limit.
	MaxArgsBytes int
	// DeleteCompleted makes a completion delete the row (a retention of
	// 0 for completed jobs).
	DeleteCompleted bool
}

// Decision is the outcome of one attempt as Decide chose it.
type Decision struct {
	// Outcome is fenced by the job's ID, WorkerID, ClaimSeq and Attempt,
	// with At = the policy's Now in UTC.
	Outcome contract.Outcome
	// Event is what observers hear once the outcome applies:
	// EventJobCompleted, EventJobRetried, EventJobSnoozed,
	// EventJobCancelled, EventJobDiscarded or EventJobContinued.
	Event EventKind
	// Reason says why a job was discarded (ReasonPermanent,
	// ReasonExhausted, ReasonDeadline); "" otherwise.
	Reason string
	// Err is the failure events report: the verdict's Err, or the error
	// an invalid continuation became.
	Err error
}

// Decide turns the verdict of job's current attempt into its outcome:
//
//   - OutcomeComplete: completed with v.Result (deleted when
//     p.DeleteCompleted).
//   - OutcomeSnooze: due again after v.Delay, no attempt used.
//   - OutcomeCancel: cancelled, with an error entry.
//   - OutcomeDiscard: discarded (ReasonPermanent), with an error entry.
//   - OutcomeContinue: the next step, due at v.Next.RunAt (zero = now);
//     an invalid one (see Continue) fails the attempt instead.
//   - OutcomeRetry: with an error entry, discarded when the job's
//     deadline has passed (ReasonDeadline) or its attempts are used up
//     (ReasonExhausted); otherwise retried after v.RetryIn, else
//     p.Retry's delay, unless that retry would pass the deadline
//     (discarded, ReasonDeadline).
//
// Every error entry starts at the job's AttemptedAt (its StartedAt), and
// the entry of a discard carries the Reason as its DiscardReason.
//
// Decide reads the job and never writes anything: the caller applies the
// outcome with Store.Finish (and seals it first under encryption at rest).
func Decide(job *Job, v Verdict, p DecidePolicy) Decision {
	now := p.Now
	if now.IsZero() {
		now = time.Now()
	}
	now = contract.UTC(now)
	d := Decision{Err: v.Err, Outcome: contract.Outcome{
		JobID: job.ID, WorkerID: job.WorkerID, ClaimSeq: job.ClaimSeq, Attempt: job.Attempt, At: now,
	}}
	o := &d.Outcome
	switch v.Kind {
	case contract.OutcomeComplete:
		o.Kind, o.Result, o.Delete = contract.OutcomeComplete, v.Result, p.DeleteCompleted
		d.Event = EventJobCompleted
		return d
	case contract.OutcomeSnooze:
		o.Kind, o.RunAt = contract.OutcomeSnooze, ClampTime(now.Add(max(v.Delay, 0)))
		d.Event = EventJobSnoozed
		return d
	case contract.OutcomeCancel:
		o.Kind, o.Error = contract.OutcomeCancel, errorEntry(job, now, v.Err)
		d.Event = EventJobCancelled
		return d
	case contract.OutcomeDiscard:
		o.Kind, o.Error = contract.OutcomeDiscard, errorEntry(job, now, v.Err)
		d.Event, d.Reason = EventJobDiscarded, ReasonPermanent
		o.Error.DiscardReason = d.Reason
		return d
	case contract.OutcomeContinue:
		ct := v.Next
		if ct == nil {
			ct = &ContinueError{}
		}
		maxArgs := p.MaxArgsBytes
		if maxArgs > 0 && contract.IsSealed(ct.Args) {
			// Sealed where the handler ran (a remote worker holding
			// keys): the limit of its plaintext.
			maxArgs = SealedSize(maxArgs)
		}
		why := ct.invalidReason(maxArgs)
		if why == "" {
			o.Kind, o.NextKind, o.NextArgs = contract.OutcomeContinue, ct.Kind, ct.Args
			o.RunAt = contract.UTC(ct.RunAt)
			if o.RunAt.IsZero() {
				o.RunAt = now
			}
			d.Event = EventJobContinued
			return d
		}
		d.Err = fmt.Errorf("%w (kind %q, %d bytes of args): %s", errInvalidContinue, ct.Kind, len(ct.Args), why)
	}
	// A failed attempt.
	o.Error = errorEntry(job, now, d.Err)
	if errors.Is(d.Err, errDeadline) || (!job.Deadline.IsZero() && !now.Before(job.Deadline)) {
		o.Kind = contract.OutcomeDiscard
		d.Event, d.Reason = EventJobDiscarded, ReasonDeadline
		o.Error.DiscardReason = d.Reason
		return d
	}
	if job.Attempt >= job.MaxAttempts {
		o.Kind = contract.OutcomeDiscard
		d.Event, d.Reason = EventJobDiscarded, ReasonExhausted
		o.Error.DiscardReason = d.Reason
		return d
	}
	var wait time.Duration
	switch {
	case v.RetryIn != nil:
		wait = *v.RetryIn
	case p.Retry != nil:
		wait = p.Retry.NextRetry(job, d.Err)
	default:
		wait = ExponentialBackoff{}.NextRetry(job, d.Err)
	}
	runAt := ClampTime(now.Add(max(wait, 0)))
	if !job.Deadline.IsZero() && runAt.After(job.Deadline) {
		o.Kind = contract.OutcomeDiscard
		o.Error.Error += " (next retry would pass the job's deadline)"
		d.Event, d.Reason = EventJobDiscarded, ReasonDeadline
		o.Error.DiscardReason = d.Reason
		return d
	}
	o.Kind, o.RunAt = contract.OutcomeRetry, runAt
	d.Event = EventJobRetried
	return d
}

// decidePolicy is the DecidePolicy of an attempt of kind that ended at
// now: the kind's retry policy (RetryPolicy), the client's args limit and
// completed-job retention. The engine's executions and remote workers'
// reports (RemoteWorkers.Report) are decided under it.
func (c *Client) decidePolicy(kind string, now time.Time) DecidePolicy {
	return DecidePolicy{
		Now: now, Retry: c.RetryPolicy(kind), MaxArgsBytes: c.cfg.MaxArgsBytes, DeleteCompleted: c.cfg.Retention.Completed == 0 && !c.cfg.Retention.Archive,
	}
}

// ErrorEntry is the error entry of attempt number attempt that failed at
// at with err: its message is err.Error() ("<nil>" for nil), its cause
// CauseOf(err), its trace
// what an `ErrorTrace() string` method found through wrapping returns (a
// *PanicError's stack, a shell command's stderr), both bounded as
// AttemptError.Bounded does. Remote workers report these two fields.
func ErrorEntry(attempt int, at time.Time, err error) AttemptError {
	ae := AttemptError{Attempt: attempt, At: contract.UTC(at), Error: errString(err), Cause: CauseOf(err)}
	var te interface{ ErrorTrace() string }
	if errors.As(err, &te) {
		ae.Trace = te.ErrorTrace()
	}
	return ae.Bounded()
}

// errorEntry is ErrorEntry for job's current attempt, which began at its
// AttemptedAt.
func errorEntry(job *Job, now time.Time, err error) *AttemptError {
	ae := ErrorEntry(job.Attempt, now, err)
	ae.StartedAt = contract.UTC(job.AttemptedAt)
	return &ae
}

// RetryInError is a failed attempt whose next try should come after Delay
// instead of the retry policy's delay (subject to the job's attempts and
// deadline). Create it with RetryIn.
type RetryInError struct {
	Err   error
	Delay time.Duration
}

// Error returns the failure's message.
func (e *RetryInError) Error() string { return errString(e.Err) }

// Unwrap returns the failure.
func (e *RetryInError) Unwrap() error { return e.Err }

// RetryIn returns an error that fails the attempt with err and asks for
// the next try after d (negative counts as 0), in place of the retry
// policy's delay. The job is still discarded when its attempts are used
// up or the retry would pass its deadline.
func RetryIn(err error, d time.Duration) error { return &RetryInError{Err: err, Delay: max(d, 0)} }

// PanicError is the error recorded when a handler panics; Stack is the
// goroutine's stack at the panic.
type PanicError struct {
	Value any
	Stack string
}

func (e *PanicError) Error() string { return fmt.Sprintf("handler panicked: %v", e.Value) }

// ErrorTrace returns the stack, which becomes the error entry's trace.
func (e *PanicError) ErrorTrace() string { return e.Stack }

// CallSafely calls fn and returns its error; a panic in fn is recovered
// and returned as a *PanicError with the goroutine's stack. Every runner of
// handlers (the executor, the remote worker) calls handlers through it.
func CallSafely(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Value: r, Stack: string(debug.Stack())}
		}
	}()
	return fn()
}

// errInvalidContinue is the error of an attempt whose handler asked for a
// continuation the engine refuses.
var errInvalidContinue = errors.New("invalid continuation")

// TimeoutError is an attempt stopped because it ran longer than its kind's
// timeout After; Err is what the handler returned once stopped. Its
// message is "attempt timed out after <After>: <Err>".
type TimeoutError struct {
	After time.Duration
	Err   error
}

// Error returns the message.
func (e *TimeoutError) Error() string {
	return fmt.Sprintf("attempt timed out after %s: %s", e.After, errString(e.Err))
}

// Unwrap returns what the handler returned.
func (e *TimeoutError) Unwrap() error { return e.Err }

// CauseOf returns the machine-readable cause of an attempt that failed
// with err, one of the Cause* constants: CausePanic (a *PanicError),
// CauseTimeout (a *TimeoutError), CauseDeadline (the job's deadline),
// CauseUnknownKind (ErrUnknownKind), CauseDecrypt (ErrDecrypt),
// CauseInvalidContinue, CauseShutdown (a hard stop), and otherwise
// CauseHandlerError; a failure a remote worker reported (RemoteFailure)
// has the cause it reported. Wrapping is followed (errors.Is and errors.As), in
// that order, so a panic inside a timed-out attempt is a panic.
func CauseOf(err error) string {
	var (
		re *reportedError
		pe *PanicError
		te *TimeoutError
	)
	switch {
	case errors.As(err, &re):
		return re.errorCause()
	case errors.As(err, &pe):
		return CausePanic
	case errors.As(err, &te):
		return CauseTimeout
	case errors.Is(err, errDeadline):
		return CauseDeadline
	case errors.Is(err, ErrUnknownKind):
		return CauseUnknownKind
	case errors.Is(err, ErrDecrypt):
		return CauseDecrypt
	case errors.Is(err, errInvalidContinue):
		return CauseInvalidContinue
	case ErrShutdown(err):
		return CauseShutdown
	}
	return CauseHandlerError
}
