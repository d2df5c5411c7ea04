package core

import "github.com/backlogq/backlog/core/contract"

// The job model and the errors applications check are defined once, in
// package contract (the store contract), and named here so an application
// needs only this package. Each name below is the same type, constant or
// value as the one in contract: errors.Is, type switches and comparisons
// see no difference.

type (
	// Job is a job as the store holds it: its id, kind, queue, args, state, attempts, times (UTC) and history; see [contract.Job].
	Job = contract.Job
	// State is a job's state (available, scheduled, running, retryable, completed, discarded, cancelled); see [contract.State].
	State = contract.State
	// InsertParams is one job to insert: kind, args and its options; see [contract.InsertParams].
	InsertParams = contract.InsertParams
	// InsertResult is what an insert did: the job, and whether a unique job already held the key; see [contract.InsertResult].
	InsertResult = contract.InsertResult
	// AttemptError is one entry of a job's error history; see [contract.AttemptError].
	AttemptError = contract.AttemptError
	// UniqueScope is which jobs a unique key is unique among; see [contract.UniqueScope].
	UniqueScope = contract.UniqueScope
	// ListParams is a filter and page of a job listing; see [contract.ListParams].
	ListParams = contract.ListParams
	// QueueStats is a queue's job counts by state and its pause flag; see [contract.QueueStats].
	QueueStats = contract.QueueStats
	// QueueLimits is a queue's concurrency limits, rate limits, fair turns and priority aging; see [contract.QueueLimits].
	QueueLimits = contract.QueueLimits
	// RateLimit is at most N claims per period for a group; see [contract.RateLimit].
	RateLimit = contract.RateLimit
	// PriorityAging is how waiting raises a job's priority; see [contract.PriorityAging].
	PriorityAging = contract.PriorityAging
	// RateWait is how long a rate-limited group waits for its next claim; see [contract.RateWait].
	RateWait = contract.RateWait
	// WorkerInfo is a registered worker, its heartbeat (UTC) and liveness; see [contract.WorkerInfo].
	WorkerInfo = contract.WorkerInfo
	// Liveness is whether a worker is active, stale or dead; see [contract.Liveness].
	Liveness = contract.Liveness
	// UniqueHold is a unique key held after its job finished; see [contract.UniqueHold].
	UniqueHold = contract.UniqueHold
)

// Job states, worker liveness, unique scopes, priorities and defaults: see
// package contract for each.
const (
	StateAvailable        = contract.StateAvailable
	StateWaiting          = contract.StateWaiting
	StateScheduled        = contract.StateScheduled
	StateRunning          = contract.StateRunning
	StateRetryable        = contract.StateRetryable
	StateCompleted        = contract.StateCompleted
	StateDiscarded        = contract.StateDiscarded
	StateCancelled        = contract.StateCancelled
	LivenessActive        = contract.LivenessActive
	LivenessStale         = contract.LivenessStale
	LivenessDead          = contract.LivenessDead
	UniqueGlobal          = contract.UniqueGlobal
	UniqueKind            = contract.UniqueKind
	UniqueQueue           = contract.UniqueQueue
	PriorityHighest       = contract.PriorityHighest
	PriorityLowest        = contract.PriorityLowest
	PriorityDefault       = contract.PriorityDefault
	DefaultQueue          = contract.DefaultQueue
	DefaultMaxAttempts    = contract.DefaultMaxAttempts
	DefaultMaxArgsBytes   = contract.DefaultMaxArgsBytes
	DefaultMaxResultBytes = contract.DefaultMaxResultBytes
)

// AllStates and the errors applications check with errors.Is: see package
// contract for each.
var (
	AllStates          = contract.AllStates
	ErrNotFound        = contract.ErrNotFound
	ErrInvalidJob      = contract.ErrInvalidJob
	ErrInvalidState    = contract.ErrInvalidState
	ErrUnknownKind     = contract.ErrUnknownKind
	ErrQueuePaused     = contract.ErrQueuePaused
	ErrUnsupported     = contract.ErrUnsupported
	ErrClosed          = contract.ErrClosed
	ErrLeaseLost       = contract.ErrLeaseLost
	ErrInvalidArgument = contract.ErrInvalidArgument
	ErrInvalidFilter   = contract.ErrInvalidFilter
)
