package core

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/backlogq/backlog/core/contract"
)

// A handler steers its job by the error it returns:
//
//	nil                      completed
//	Snooze(d)                run again after d, using no attempt
//	Cancel(err)              cancelled, never retried
//	Permanent(err)           discarded at once (dead letter), no retries
//	Continue(kind, args, at) the same job moves on to its next step
//	any other error          retried with backoff, discarded when attempts run out
//
// The helpers return errors so they compose with ordinary error returns;
// errors.As finds them through wrapping.

// SnoozeError asks for the job to run again after Delay without using an
// attempt. Create it with Snooze.
type SnoozeError struct{ Delay time.Duration }

func (e *SnoozeError) Error() string { return fmt.Sprintf("snooze for %s", e.Delay) }

// Snooze returns an error that reschedules the job after d (0 = now) without
// using an attempt.
func Snooze(d time.Duration) error { return &SnoozeError{Delay: max(d, 0)} }

// CancelError stops the job for good: state cancelled, Err recorded.
type CancelError struct{ Err error }

func (e *CancelError) Error() string {
	if e.Err == nil {
		return "job cancelled"
	}
	return "job cancelled: " + e.Err.Error()
}
func (e *CancelError) Unwrap() error { return e.Err }

// Cancel returns an error that cancels the job; err (may be nil) is recorded
// in its error history.
func Cancel(err error) error { return &CancelError{Err: err} }

// PermanentError discards the job at once, whatever attempts remain.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return "permanent failure: " + errString(e.Err) }
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent returns an error that discards the job (dead letter) without
// further retries, recording err.
func Permanent(err error) error { return &PermanentError{Err: err} }

// ContinueError moves the same job on to its next step: new kind and args,
// due at RunAt, attempts reset, id and error history kept. Create it with
// Continue or ContinueWith.
type ContinueError struct {
	Kind  string
	Args  json.RawMessage
	RunAt time.Time // zero = now
}

func (e *ContinueError) Error() string { return "continue as " + e.Kind }

// invalidReason returns why e cannot become its job's next step, or ""
// when it can: the kind must be 1..MaxKindLen bytes of UTF-8, the args
// valid JSON in UTF-8 of at most maxArgs bytes (0 = no limit), and RunAt
// zero (now) or within [MinTime, MaxTime].
func (e *ContinueError) invalidReason(maxArgs int) string {
	switch {
	case e.Kind == "" || len(e.Kind) > contract.MaxKindLen || !utf8.ValidString(e.Kind):
		return fmt.Sprintf("kind %q must be 1..%d bytes of UTF-8", e.Kind, contract.MaxKindLen)
	case maxArgs > 0 && len(e.Args) > maxArgs:
		return fmt.Sprintf("args are %d bytes, over the limit of %d", len(e.Args), maxArgs)
	case !json.Valid(e.Args):
		return "args are not valid JSON"
	case !utf8.Valid(e.Args):
		return "args are not valid UTF-8"
	}
	return timeOutOfRange("run_at", e.RunAt)
}

// Continue returns an error that turns the job into its next step: kind and
// args (JSON) replace the current ones and the job is due at runAt (zero =
// at once). It keeps its id and errors history; its attempt count restarts.
// Invalid input (empty kind, args not JSON in UTF-8 or over the args
// limit, runAt outside [MinTime, MaxTime]) fails the attempt instead.
func Continue(kind string, args []byte, runAt time.Time) error {
	return &ContinueError{Kind: kind, Args: args, RunAt: runAt}
}

// ContinueWith is Continue for typed args: the kind is args.Kind() and the
// args their JSON encoding.
func ContinueWith(args Args, runAt time.Time) error {
	b, err := json.Marshal(args)
	if err != nil {
		return fmt.Errorf("continue: encode %s args: %w", args.Kind(), err)
	}
	return &ContinueError{Kind: args.Kind(), Args: b, RunAt: runAt}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// errShutdown is the cancellation cause of handler contexts on a hard stop.
var errShutdown = errors.New("backlog: worker shutting down (hard stop)")

// ErrShutdown reports whether err (or ctx's cause) is the hard-stop
// cancellation; a handler that sees it should return promptly: its job is
// handed back without using an attempt.
func ErrShutdown(err error) bool { return errors.Is(err, errShutdown) }

// ShutdownCause returns the error the engine cancels handler contexts with
// at a hard stop, for runners outside the engine (the HTTP API's remote
// worker) that cancel their handlers the same way, so ErrShutdown
// recognises their cause too.
func ShutdownCause() error { return errShutdown }
