package core

import "time"

// EventKind names something the engine did.
type EventKind string

// Events delivered to observers.
const (
	EventJobInserted      EventKind = "job.inserted"      // Job inserted (not a duplicate)
	EventJobClaimed       EventKind = "job.claimed"       // Job claimed by this node; QueueWait set
	EventJobCompleted     EventKind = "job.completed"     // finish applied; Duration set
	EventJobRetried       EventKind = "job.retried"       // attempt failed, retry scheduled; Err set
	EventJobSnoozed       EventKind = "job.snoozed"       // snoozed or handed back at a hard stop
	EventJobContinued     EventKind = "job.continued"     // moved on to its next step
	EventJobCancelled     EventKind = "job.cancelled"     // handler cancelled it; Err set
	EventJobDiscarded     EventKind = "job.discarded"     // dead-lettered; Reason and Err set
	EventLeaseLost        EventKind = "job.lease_lost"    // a fenced finish did not apply
	EventJobsRescued      EventKind = "jobs.rescued"      // maintenance rescued Count jobs (Job set per job)
	EventJobsPruned       EventKind = "jobs.pruned"       // maintenance pruned Count jobs in State
	EventJobsArchived     EventKind = "jobs.archived"     // maintenance moved Count jobs in State to the archive (Retention.Archive)
	EventArchivePruned    EventKind = "archive.pruned"    // maintenance deleted Count archived jobs past Retention.ArchiveTTL
	EventJobsExpired      EventKind = "jobs.expired"      // maintenance discarded Count jobs past deadline
	EventWorkersPruned    EventKind = "workers.pruned"    // maintenance removed Count dead workers (their jobs handed back first)
	EventWorkerRegistered EventKind = "worker.registered" // a worker registered for the first time (Reason = worker id)
	EventStoreVacuumed    EventKind = "store.vacuumed"    // maintenance had the store reclaim Count dead rows (Vacuumer) in Duration
	EventStoreError       EventKind = "store.error"       // a store call failed; Err set (it will be retried)
)

// Discard reasons carried in Event.Reason for EventJobDiscarded.
const (
	ReasonExhausted  = "exhausted"   // attempts used up
	ReasonDeadline   = "deadline"    // deadline passed
	ReasonPermanent  = "permanent"   // handler returned Permanent
	ReasonWorkerLost = "worker_lost" // rescued with no attempts left
)

// Causes: why a job was handed back or an attempt failed. Carried in
// AttemptError.Cause (every error entry the engine writes) and in
// Event.Cause (EventJobsRescued, EventJobSnoozed of hand-backs,
// EventLeaseLost, and the events of failed attempts: EventJobRetried,
// EventJobDiscarded, EventJobCancelled, with their entry's cause).
const (
	CauseLeaseExpired = "lease_expired" // Store.Rescue: the job's lease ran out
	CauseWorkerDead   = "worker_dead"   // Store.RescueWorkers: its worker was declared dead
	// CauseClaimLost: the store says this worker holds the job but the
	// worker never received the claim (its reply was lost); the worker
	// handed it back without using an attempt.
	CauseClaimLost = "claim_lost"
	// CauseLeaseUnrenewed: the worker could not renew the lease (store
	// unreachable) and stopped the handler before the lease ran out.
	CauseLeaseUnrenewed = "lease_unrenewed"
	// CauseUndeliverable: the job server claimed the job for a remote
	// worker but could not encode it into the answer (a stored value
	// outside what JSON can carry); it handed the job back unrun.
	CauseUndeliverable = "undeliverable"

	// Causes of failed attempts (AttemptError.Cause), found by CauseOf in
	// the error the attempt ended with. CauseDecrypt (encrypt.go) is one
	// of them too.

	// CauseHandlerError: the handler returned an error (Permanent and
	// Cancel included: the outcome says which), a shell command exited
	// non-zero, a remote worker reported a failure.
	CauseHandlerError = "handler_error"
	// CausePanic: the handler panicked (*PanicError; the trace holds the
	// stack).
	CausePanic = "panic"
	// CauseTimeout: the attempt ran past its kind's timeout
	// (*TimeoutError).
	CauseTimeout = "timeout"
	// CauseDeadline: the job's deadline passed before or during the
	// attempt.
	CauseDeadline = "deadline"
	// CauseUnknownKind: no handler is registered for the job's kind on
	// the worker that claimed it (ErrUnknownKind).
	CauseUnknownKind = "unknown_kind"
	// CauseInvalidContinue: the handler asked to continue with a step the
	// engine refuses (see Continue).
	CauseInvalidContinue = "invalid_continue"
	// CauseShutdown: the worker's hard stop ended the attempt.
	CauseShutdown = "shutdown"
)

// KnownCause reports whether cause is one of the Cause* constants: a
// hand-back or rescue cause (CauseLeaseExpired, CauseWorkerDead,
// CauseClaimLost, CauseLeaseUnrenewed, CauseUndeliverable) or a cause of
// a failed attempt (the values CauseOf returns, CauseDecrypt included).
// Readers of stored entries and of reports from outside the process
// (a remote worker's) use it to refuse a cause the engine never writes.
func KnownCause(cause string) bool {
	switch cause {
	case CauseLeaseExpired, CauseWorkerDead, CauseClaimLost, CauseLeaseUnrenewed, CauseUndeliverable,
		CauseHandlerError, CausePanic, CauseTimeout, CauseDeadline, CauseUnknownKind, CauseDecrypt,
		CauseInvalidContinue, CauseShutdown:
		return true
	}
	return false
}

// Event is one observation. Job is a snapshot as the event's node saw it;
// fields that don't apply to a kind are zero.
type Event struct {
	Kind      EventKind
	At        time.Time
	Queue     string
	Job       *Job
	Err       error
	Reason    string
	Cause     string        // EventJobsRescued, hand-backs, EventLeaseLost: a Cause* constant
	Duration  time.Duration // handler execution time
	QueueWait time.Duration // claimed − due (or created if later)
	Count     int
	State     State
}

// Observer receives events synchronously from engine goroutines; it must be
// fast and must not block (hand off to a channel if it needs to). Events
// of different goroutines come in no set order: a job's claim may be
// reported before the enqueue that inserted it returns and reports it.
type Observer interface {
	Observe(Event)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(Event)

// Observe calls f.
func (f ObserverFunc) Observe(e Event) { f(e) }
