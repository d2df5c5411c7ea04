package contract

import "errors"

// Sentinel errors shared by the engine and every store. Compare with errors.Is;
// stores and the engine wrap them with context (job id, queue) using %w.
var (
	// ErrNotFound means the job, queue or worker named does not exist.
	ErrNotFound = errors.New("backlog: not found")

	// ErrLeaseLost means a fenced write (finish, extend, complete in a
	// transaction) found the job no longer running under the caller's worker
	// id and attempt: the lease expired and the job was rescued, cancelled,
	// deleted, or finished by someone else. The write changed nothing.
	ErrLeaseLost = errors.New("backlog: lease lost")

	// ErrQueuePaused may be returned by Store.Claim for a paused queue. A
	// store may instead return no jobs and a nil error; the engine treats
	// both the same.
	ErrQueuePaused = errors.New("backlog: queue paused")

	// ErrUnsupported means a store lacks an optional capability, or was
	// handed a transaction type it does not accept.
	ErrUnsupported = errors.New("backlog: unsupported by this store")

	// ErrInvalidState means the job is in a state that does not permit the
	// requested change, for example deleting or retrying a running job.
	ErrInvalidState = errors.New("backlog: job state does not permit this")

	// ErrInvalidJob wraps every validation failure of a job to be enqueued
	// (empty kind, priority out of range, args not JSON, payload too large).
	// The message says which field is wrong and why.
	ErrInvalidJob = errors.New("backlog: invalid job")

	// ErrUnknownKind is recorded (wrapped) in a job's error history when no
	// handler is registered for its kind on the node that claimed it. A
	// client that runs handlers also returns it (wrapped, naming the kind)
	// from an enqueue of a kind it has no handler for, unless
	// Config.AllowUnknownKinds is set.
	ErrUnknownKind = errors.New("backlog: no handler registered for kind")

	// ErrClosed is returned by a client or store after it was stopped or
	// closed. Every method of a closed Store returns an error wrapping it
	// (storetest rule close/calls-after-close-return-err-closed).
	ErrClosed = errors.New("backlog: closed")

	// ErrInvalidArgument means a Store method was called with an argument
	// the engine never produces: Claim with Limit < 1, Prune of a state
	// that is not final, Finish with an outcome of unknown kind. The call
	// changed nothing.
	ErrInvalidArgument = errors.New("backlog: invalid argument")
)
