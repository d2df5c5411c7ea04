package contract

import (
	"context"
	"fmt"
	"time"
	"unicode/utf8"
)

// Store is the contract between the engine and a database. It is small,
// batch-oriented and specified by behaviour: a third party implements it for
// a new database and proves it with storetest.Run. The engine never talks to
// a database any other way.
//
// The model follows database/sql/driver: a required interface (this one),
// optional capability interfaces discovered by type assertion (TxInserter,
// TxCompleter, TxRunner, Notifier, Settings, MutableSettings,
// SealedRewriter, Vacuumer, QueueHistory, Migrator, QueueLimiter,
// UniqueHolder, PageLister, ProgressRecorder), and sentinel errors compared with
// errors.Is (ErrNotFound, ErrLeaseLost, ErrQueuePaused, ErrUnsupported,
// ErrInvalidState, ErrInvalidArgument, ErrClosed).
//
// # Time
//
// A store never reads a clock. Every method whose result depends on the time
// receives "now" from the caller (the engine's Clock), so every node decides
// with one time source per call and the conformance suite drives time without
// sleeping. Times handed in are normally UTC truncated to microseconds; a
// store keeps the instant of whatever time it is handed (whatever its
// location), with at least microsecond precision, and returns it in UTC
// (storetest rule lease/extend-with-non-utc-time-returns-utc for
// ExtendLeases). Nodes sharing a store should have clocks within a small
// fraction of the lease (NTP is plenty).
//
// # Due jobs and ordering
//
// A job is due when its state is scheduled, available or retryable and its
// run_at is at or before now. Claims take due jobs of one queue ordered by
// priority (1 first), then run_at, then id, and never return a job that is
// not due.
//
// # Fencing
//
// A claim stamps the job with the claiming worker's id, increments its
// attempt and its ClaimSeq, and sets a lease deadline. Every later write
// made on behalf of that execution (Finish, ExtendLeases,
// TxCompleter.CompleteTx) applies only when the row is still running, held
// by that worker id, at that ClaimSeq. The attempt alone is no fence: a
// snooze gives it back and a continuation resets it, so one worker can hold
// one job twice at the same attempt; ClaimSeq only ever grows, so a late
// write of an earlier execution never lands on a later one. A write that
// fails the fence changes nothing and reports it (Applied false or
// ErrLeaseLost); it is not an error of the call as a whole.
//
// # Lost workers
//
// The engine, not the store, decides what becomes of a job whose holder is
// lost (lease expired, worker declared dead): Rescue and RescueWorkers
// select such jobs, ask a RescueFunc for the outcome, and apply it under a
// fence of their own (the row is unchanged since they selected it). Stores
// write no error prose of their own there.
//
// # Serialized writers
//
// Rules worded in SQL terms (a primary key on the hold, never "select,
// then insert"; SKIP LOCKED or a version column; SELECT … FOR UPDATE on
// the queue's record; an additive upsert, never "read, then write") exist
// because SQL databases run write transactions side by side. A store whose
// write transactions run one at a time, across every goroutine and
// process that can reach the data (SQLite's BEGIN IMMEDIATE, bbolt's
// single writer, store/memory's mutex), meets each of them by reading and
// writing in the same write transaction: nothing can come between. A read
// in one transaction and a write in a later one does not, which is why
// Rescue and SealedRewriter fence their writes. The rules that prove it
// under concurrency are storetest rules
// claim/concurrent-claimers-never-share-a-job,
// unique/concurrent-one-job, settings/get-or-create-is-atomic,
// limits/concurrent-claimers-never-exceed and
// history/counts-add-across-handles.
//
// # Names and keys
//
// Queue names, kinds, unique keys, tags and worker ids compare byte for byte
// (a binary collation on SQL databases): "Mail" and "mail" are two queues.
//
// # Errors
//
// Invalid arguments the engine never produces return an error wrapping
// ErrInvalidArgument and change nothing: Claim with Limit < 1 (storetest
// rule claim/limit-below-one-is-an-invalid-argument), Prune of a state
// that is not final (its error also wraps ErrInvalidState; storetest rule
// prune/non-final-state-is-an-invalid-argument), Finish with an outcome
// of unknown kind, which fails the whole batch before any outcome of it
// applies (storetest rule finish/unknown-outcome-kind-is-an-invalid-argument).
//
// After Close, every method returns an error wrapping ErrClosed (never a
// panic, never a result read from the database or a cache); a second Close
// returns nil (storetest rule close/calls-after-close-return-err-closed,
// which calls the methods of Store and Listen, QueueLimits and Setting;
// the other capabilities' methods are held to the same, unchecked). Close
// also closes every channel Listen returned (see Notifier).
//
// Methods return ErrNotFound (wrapped) for a missing id. Transient database
// errors (deadlocks, lock wait timeouts, SQLITE_BUSY, serialization failures)
// are retried inside the store; an error that reaches the engine means the
// call did not take effect, or for batch calls that no item took effect.
// Stores must be safe for concurrent use by many goroutines and, for
// databases shared between processes, by many processes. A database that
// one process at a time can open (bbolt, Pebble, Badger) is not shared:
// its store's constructor fails, after a bounded wait at most, when
// another process holds the file, rather than blocking for ever (no
// storetest rule checks it).
type Store interface {
	// Insert stores jobs in one round trip and returns one result per
	// input, in input order. The state is scheduled when RunAt is after now,
	// otherwise available; CreatedAt is now; Attempt is 0.
	//
	// # Unique keys
	//
	// A job with a UniqueKey takes a hold on its scoped key
	// (ScopedUniqueKey: the key within its UniqueScope). While another job
	// holds the same scoped key, the input is not inserted: its result
	// holds that job as it now is and Duplicate=true. A job holds its key
	//   - while it is not in a final state;
	//   - once final, while now < FinishedAt + UniqueFor (the holder's
	//     UniqueFor, from its insert), whether or not its row still
	//     exists: deleting the row (Finish with Delete, Prune, Delete) does
	//     not end the hold, so the store keeps the hold apart from the row
	//     (the SQL stores: a unique-keys table) and returns, for a holder
	//     whose row is gone, a Job with only ID, Queue, Kind and UniqueKey
	//     set (see InsertResult).
	//
	// Otherwise (the holder is final and its window over, or its row
	// was deleted before it was final) the new job takes the hold over.
	// The database enforces it (a primary or unique key on the scoped key,
	// never "select, then insert", or a read and a write in one write
	// transaction where writers are serialized: see Serialized writers in
	// the Store doc), so concurrent inserts of one scoped
	// key, from any goroutine or process, yield exactly one job. Two
	// inputs of one batch with the same scoped key yield one job; the
	// second result is marked Duplicate. Inputs without a UniqueKey cost
	// no more than before keys had holds: no statement of their insert
	// touches the holds.
	//
	// A hold keeps the UniqueFingerprint of the insert that took it, as
	// long as the hold lasts (whether or not the holder's row exists); a
	// duplicate's result returns it in InsertResult.Fingerprint. An
	// operator lists and ends holds through UniqueHolder.
	Insert(ctx context.Context, now time.Time, jobs []InsertParams) ([]InsertResult, error)

	// Claim moves up to p.Limit due jobs of p.Queue to running for
	// p.WorkerID, in priority, run_at, id order: attempt+1, ClaimSeq+1,
	// AttemptedAt=now, WorkerID set, LeaseUntil=p.LeaseUntil. It returns the claimed jobs as
	// they now are, in claim order. No two claims, from any goroutine or
	// process, ever return the same job for the same attempt. Claim returns
	// no jobs (nil error or ErrQueuePaused) while the queue is paused.
	//
	// Capability routing: a job with tags is claimed only by a claim whose
	// p.Tags include every one of them; a job without tags goes to any
	// claim. Jobs a claim may not take are skipped, not waited for: they
	// never hold back due jobs behind them in claim order.
	//
	// Concurrency limits: on a store that is a QueueLimiter, a claim from
	// a queue with limits takes only as many jobs as leave the queue's
	// running jobs within them (see QueueLimiter); jobs held back are
	// skipped like the jobs a claim may not take.
	Claim(ctx context.Context, p ClaimParams) ([]*Job, error)

	// Finish applies a batch of outcomes, each fenced by its job id, worker
	// id and ClaimSeq, in one round trip where the database allows. It
	// returns one result per outcome in input order; Applied=false means
	// the fence failed and that job was left untouched.
	Finish(ctx context.Context, outcomes []Outcome) ([]FinishResult, error)

	// ExtendLeases sets LeaseUntil=until on those of the given jobs that
	// are still running, held by workerID at the given ClaimSeq, and
	// returns how many it touched. Jobs the worker holds but did not name
	// are not touched: a worker extends only the leases of executions it
	// knows it runs, so a claim whose reply was lost is not kept alive by
	// its heartbeats (the engine hands such jobs back, see
	// ListParams.WorkerID). A job whose row is being written at that
	// moment may be skipped (it needs no longer lease).
	ExtendLeases(ctx context.Context, workerID string, leases []Lease, until time.Time) (int, error)

	// Rescue takes up to limit running jobs whose LeaseUntil is before
	// now, oldest lease first (LeaseUntil, then id; storetest rule
	// rescue/takes-the-oldest-lease-first), calls decide(job,
	// job.LeaseUntil) for each (the job as read; decide must not call the
	// store) and applies the outcome it returns (OutcomeRetry or
	// OutcomeDiscard, with its error entry, as Finish would but without
	// the holder fence), provided the row is still running with that
	// ClaimSeq and that LeaseUntil (a lease extended meanwhile is left
	// alone). It returns the jobs it changed, as they now are. An outcome
	// of any other kind leaves its job as it is: not changed, not
	// returned, and selected again by the next Rescue while its lease stays
	// expired (the engine's DecideRescue never returns one; no storetest
	// rule checks this).
	Rescue(ctx context.Context, now time.Time, limit int, decide RescueFunc) ([]*Job, error)

	// RescueWorkers is Rescue for up to limit running jobs, in job id
	// order across all the dead workers (not worker by worker; storetest
	// rule dead-workers/takes-jobs-in-id-order), held by workers whose
	// registry record has a HeartbeatAt before heartbeatBefore (workers
	// declared dead), whatever their lease; decide receives the worker's
	// HeartbeatAt. Jobs held by workers with a later heartbeat or with no
	// record at all are not touched (the latter come back through
	// Rescue).
	RescueWorkers(ctx context.Context, heartbeatBefore, now time.Time, limit int, decide RescueFunc) ([]*Job, error)

	// DiscardExpired moves up to limit jobs in scheduled, available or
	// retryable whose Deadline is set and before now to discarded
	// (FinishedAt=now) with an error entry saying the deadline passed, and
	// returns how many. Running jobs past their deadline are left to the
	// engine that runs them (or to Rescue).
	//
	// The entry is the store's own: Attempt is the job's attempt as
	// stored (0 for a job never claimed), At is now, Error names the
	// deadline ("deadline passed: the job was not finished by " and the
	// deadline in RFC 3339 with fractions, as the SQL stores write it),
	// Cause is CauseDeadline (see AttemptError.Cause) and DiscardReason is
	// "deadline" (StartedAt stays zero: no attempt was running). storetest rule
	// deadline/discard-expired-takes-only-pending-jobs-past-deadline
	// checks the entry's At, its Cause, its DiscardReason, its zero
	// StartedAt and that Error starts with "deadline passed".
	//
	// limit bounds the jobs discarded, the count returned: callers loop
	// while it equals limit, so a call returns limit whenever at least
	// limit jobs qualify (storetest rule
	// deadline/discard-expired-respects-limit). Which ones a call takes
	// when more qualify is not part of the contract (the SQL stores take
	// the earliest deadline first, then id).
	DiscardExpired(ctx context.Context, now time.Time, limit int) (int, error)

	// Prune deletes up to limit jobs in final state `state` whose
	// FinishedAt is before `before`, and returns how many. Callers loop
	// while the count equals limit, so no call holds locks for long, and a
	// call returns limit whenever at least limit jobs qualify (storetest
	// rule prune/respects-limit-so-callers-can-loop). Which ones a call
	// deletes when more qualify is not part of the contract (the SQL
	// stores take the oldest FinishedAt first, then id).
	//
	// A pruned job's unique key stays held until FinishedAt + UniqueFor
	// (see Insert): pruning inside the window does not free it. Prune
	// also forgets up to limit holds that ended before `before` (they no
	// longer hold anything; they are not counted): holds whose holder's
	// row is gone and whose end, the holder's FinishedAt + UniqueFor, is
	// before `before`, whatever state the holder was in and whichever
	// call deleted its row (this one included; the SQL stores take the
	// earliest end first). Holds whose holder's row exists are never
	// forgotten: they end with their row, and a hold with no window
	// (UniqueFor 0) goes with the row that took it. No storetest rule
	// checks the forgetting (a hold that has ended holds nothing whether
	// or not it is kept). Once a pruned job's
	// hold has ended, an Insert with its scoped key makes a new job,
	// whether the window ended before or after the prune, or the job had
	// no window at all (storetest rule
	// prune/key-of-a-pruned-job-is-free-once-its-window-ends).
	Prune(ctx context.Context, state State, before time.Time, limit int) (int, error)

	// Get returns one job, or ErrNotFound.
	Get(ctx context.Context, id int64) (*Job, error)

	// List returns jobs matching p, ordered by id (ascending, or descending
	// when p.Desc), starting after p.AfterID when it is non-zero (keyset
	// paging: pass the last id of a page to get the next), or by (run_at,
	// id) with p.ByRunAt. The filters mean what ListParams.Matches says;
	// an invalid p.ArgsContains returns an error wrapping
	// ErrInvalidFilter. A page bounded by bytes rather than by a count
	// alone is the optional PageLister.
	List(ctx context.Context, p ListParams) ([]*Job, error)

	// Stats returns, for every queue that has jobs or a persisted pause,
	// its job count per state and whether it is paused, ordered by name.
	// Paused is true exactly while a PauseQueue is in force (persisted, so
	// every handle on the database sees it): a queue never paused, one
	// resumed, or one whose record exists only for its QueueLimits is not
	// paused (storetest rules pause/stats-show-pause-even-without-jobs
	// and pause/stats-show-only-persisted-pauses).
	Stats(ctx context.Context) ([]QueueStats, error)

	// Cancel moves a job not in a final state to cancelled (FinishedAt=now,
	// lease cleared) and returns it. A running job's holder learns of it
	// from a NotifyCancel (stores that implement Notifier send one, with
	// the job's id, for every cancel, whatever state the job was in and
	// whether or not it was ever claimed; storetest rule
	// notify/every-cancel-notifies) or when its fenced finish fails. A job
	// already final returns ErrInvalidState; a missing one ErrNotFound.
	Cancel(ctx context.Context, id int64, now time.Time) (*Job, error)

	// Retry makes a job available now (RunAt=now, FinishedAt cleared) and
	// returns it. When its attempts are used up, MaxAttempts becomes
	// Attempt+1 so it gets exactly one more. Running jobs return
	// ErrInvalidState, and so does a job with a UniqueKey whose hold has
	// passed to another job (inserted with the key after this one's
	// hold ended; see Insert): the key now names that job.
	Retry(ctx context.Context, id int64, now time.Time) (*Job, error)

	// Delete removes a job that is not running. Running jobs return
	// ErrInvalidState (cancel them first). A final job's unique key stays
	// held until FinishedAt + UniqueFor (see Insert); the key of a job
	// deleted before it reached a final state is freed (it never started
	// its window: cancel it first to keep the key held).
	Delete(ctx context.Context, id int64) error

	// PauseQueue persists a pause of the named queue (creating its record
	// if needed); claims from it return nothing until ResumeQueue. Both are
	// idempotent.
	PauseQueue(ctx context.Context, queue string, now time.Time) error

	// ResumeQueue lifts a pause. Resuming a queue that is not paused is a
	// no-op.
	ResumeQueue(ctx context.Context, queue string, now time.Time) error

	// RegisterWorker inserts or updates a worker's record (idempotent on
	// w.ID). Calling it again is the worker's heartbeat: it updates
	// HeartbeatAt and the other fields.
	RegisterWorker(ctx context.Context, w WorkerInfo) error

	// DeregisterWorker removes one worker record; missing is not an error.
	DeregisterWorker(ctx context.Context, id string) error

	// Workers lists worker records ordered by id.
	Workers(ctx context.Context) ([]WorkerInfo, error)

	// Worker returns the record of worker id, or ErrNotFound (wrapped)
	// when there is none. It reads that one record (a primary-key lookup
	// on SQL databases), so its cost does not grow with the number of
	// workers: servers call it for every registration and for claims and
	// heartbeats of workers they have not seen.
	Worker(ctx context.Context, id string) (WorkerInfo, error)

	// RemoveDeadWorkers deletes records whose HeartbeatAt is before
	// `before` and returns how many. Jobs the removed workers still hold
	// are not touched: callers run RescueWorkers with the same time first,
	// and Rescue takes whatever remains when its lease runs out.
	RemoveDeadWorkers(ctx context.Context, before time.Time) (int, error)

	// Close releases the store's resources (an embedded database's file
	// lock included, so another process may open it). The store is
	// unusable after: every method returns an error wrapping ErrClosed
	// (see Errors above), and every channel Listen returned is closed
	// (see Notifier). A second Close returns nil.
	Close() error
}

// Lease names one execution a worker holds: a job at the ClaimSeq its
// claim gave it.
type Lease struct {
	JobID    int64
	ClaimSeq int64
}

// RescueFunc decides the outcome of a running job whose holder is lost.
// lastSeen is when the holder was last known alive (the expired
// LeaseUntil, or the dead worker's last heartbeat). It returns an
// OutcomeRetry or OutcomeDiscard for j (the engine's DecideRescue); a
// store leaves j as it is for an outcome of any other kind (see
// Store.Rescue).
type RescueFunc func(j *Job, lastSeen time.Time) Outcome

// ClaimParams selects what a Claim takes. All fields but Tags are
// required.
type ClaimParams struct {
	Queue      string
	WorkerID   string
	Limit      int       // ≥ 1
	Now        time.Time // due means run_at ≤ Now
	LeaseUntil time.Time // lease deadline given to each claimed job
	// Tags are the claiming worker's capabilities: jobs whose tags are
	// all among them may be claimed, jobs without tags always. Nil means
	// the worker has none and takes only untagged jobs.
	Tags []string
}

// OutcomeKind is what happened to a job's attempt.
type OutcomeKind string

// The outcomes a Finish can apply. Every one requires the job to be running
// under Outcome.WorkerID at Outcome.ClaimSeq.
const (
	// OutcomeComplete: state completed, FinishedAt=At, Result stored. With
	// Delete set the row is deleted instead (completed retention of zero);
	// its unique key stays held until At + UniqueFor all the same (see
	// Store.Insert).
	OutcomeComplete OutcomeKind = "complete"
	// OutcomeRetry: state retryable, RunAt set, Error appended.
	OutcomeRetry OutcomeKind = "retry"
	// OutcomeSnooze: state scheduled (available if RunAt ≤ At), RunAt set,
	// Attempt decremented by one so the snooze uses no attempt. Error, if
	// set, is appended. Hard-stop hand-backs use it with RunAt=At.
	OutcomeSnooze OutcomeKind = "snooze"
	// OutcomeContinue: the same job moves on to its next step: Kind=NextKind,
	// Args=NextArgs, RunAt set, Attempt reset to 0, state scheduled (or
	// available if due); id, errors history and everything else kept.
	OutcomeContinue OutcomeKind = "continue"
	// OutcomeCancel: state cancelled, FinishedAt=At, Error appended if set.
	OutcomeCancel OutcomeKind = "cancel"
	// OutcomeDiscard: state discarded, FinishedAt=At, Error appended.
	OutcomeDiscard OutcomeKind = "discard"
)

// Outcome is one fenced state change produced by an execution. Every
// outcome clears the lease (LeaseUntil) but keeps WorkerID for inspection.
type Outcome struct {
	JobID    int64
	WorkerID string // fence: the worker that claimed it
	ClaimSeq int64  // fence: the job's ClaimSeq as that claim returned it
	Attempt  int    // the attempt it was claimed at (snooze gives it back)
	Kind     OutcomeKind
	At       time.Time     // when it happened (UTC); FinishedAt for final states
	RunAt    time.Time     // next due time for retry, snooze, continue
	Error    *AttemptError // appended to the errors history when set
	Result   []byte        // completion result (≤ the client's MaxResultBytes)
	Delete   bool          // OutcomeComplete only: delete the row instead of keeping it
	NextKind string        // OutcomeContinue only
	NextArgs []byte        // OutcomeContinue only; valid JSON
}

// FinishResult reports one outcome of a Finish. Applied=false means the
// fence failed (the job is no longer held by that worker at that claim).
type FinishResult struct {
	JobID   int64
	Applied bool
}

// ListParams filters List. Zero values mean "any"; Limit 0 means 100.
type ListParams struct {
	Queue  string
	States []State
	Kind   string
	// WorkerID keeps jobs whose WorkerID is this worker (with States
	// {running}: the jobs the store says it holds).
	WorkerID string
	// ArgsContains, when set, keeps jobs whose args contain this JSON
	// object: every scalar it names is at the same path of the args with
	// an equal value (PostgreSQL's jsonb containment, args @> pattern,
	// for patterns without arrays; see ParseArgsPattern for what is
	// refused, with an error wrapping ErrInvalidFilter). Jobs whose args
	// are sealed (Config.Encryption) never match: the store does not hold
	// their plaintext. {} keeps every job.
	ArgsContains []byte
	AfterID      int64 // keyset cursor: ids after this one (below it when Desc)
	Desc         bool  // newest first
	Limit        int
	// ByRunAt orders by (run_at, id) instead of id: scheduled jobs in the
	// order they come due (latest first when Desc). The keyset cursor is
	// then (AfterRunAt, AfterID): jobs after that pair in this order,
	// when AfterID is set. SQL stores read it from an index on (run_at,
	// id), as they read id order from the primary key: a page reads its
	// own rows, in order, and stops (filters are checked on the rows the
	// index yields, so a filter that keeps few jobs reads more of them).
	// Meant for listings, not for claims.
	ByRunAt    bool
	AfterRunAt time.Time
	// WorkflowID, when set, keeps the jobs of that workflow or batch
	// (Job.WorkflowID; stores that implement Dependencies).
	WorkflowID int64
	// WorkflowFirst keeps the first job of each workflow or batch (ID =
	// WorkflowID): one job per workflow, to list them.
	WorkflowFirst bool
}

// ListAfter reports whether j comes after p's keyset cursor (AfterID, and
// AfterRunAt with ByRunAt) in p's order; true when p has no cursor.
func (p ListParams) ListAfter(j *Job) bool {
	if p.AfterID == 0 {
		return true
	}
	c := 0
	if p.ByRunAt {
		c = j.RunAt.Compare(p.AfterRunAt)
	}
	if c == 0 {
		c = cmpInt64(j.ID, p.AfterID)
	}
	if p.Desc {
		return c < 0
	}
	return c > 0
}

// ListOrder compares a and b in p's order (id, or run_at then id; reversed
// when Desc): what a store's List sorts by.
func (p ListParams) ListOrder(a, b *Job) int {
	c := 0
	if p.ByRunAt {
		c = a.RunAt.Compare(b.RunAt)
	}
	if c == 0 {
		c = cmpInt64(a.ID, b.ID)
	}
	if p.Desc {
		return -c
	}
	return c
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// QueueStats is one queue's job count per state and its pause flag.
type QueueStats struct {
	Queue  string        `json:"queue"`
	Paused bool          `json:"paused"`
	Counts map[State]int `json:"counts"` // states with no jobs may be absent
}

// WorkerInfo is one worker process's record in the worker registry.
type WorkerInfo struct {
	ID          string            `json:"id"` // unique per process, e.g. host-pid-random
	Host        string            `json:"host"`
	PID         int               `json:"pid"`
	Queues      []string          `json:"queues"`
	Tags        []string          `json:"tags,omitempty"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	StartedAt   time.Time         `json:"started_at"`
	HeartbeatAt time.Time         `json:"heartbeat_at"`
}

// Liveness is a worker's health as judged from its last heartbeat.
type Liveness string

// Worker liveness, judged by Config.WorkerStaleAfter and WorkerDeadAfter
// (30 s and 2 min by default).
const (
	LivenessActive Liveness = "active" // heartbeat within the stale period
	LivenessStale  Liveness = "stale"  // missed heartbeats; its jobs are left alone
	LivenessDead   Liveness = "dead"   // its jobs are handed back and its record removed
)

// Liveness judges w at now: dead when its last heartbeat is deadAfter or
// more ago, stale when staleAfter or more, active otherwise.
func (w WorkerInfo) Liveness(now time.Time, staleAfter, deadAfter time.Duration) Liveness {
	age := now.Sub(w.HeartbeatAt)
	switch {
	case age >= deadAfter:
		return LivenessDead
	case age >= staleAfter:
		return LivenessStale
	}
	return LivenessActive
}

// TxInserter is the transactional-insert capability: jobs inserted with the
// caller's open transaction become visible when the caller commits and
// vanish on rollback. tx is the driver's transaction type the store
// documents (*sql.Tx for the database/sql stores, pgx.Tx for Postgres);
// other types return ErrUnsupported. Semantics otherwise match Insert; a
// store that is also a Notifier sends the insert notification only if the
// transaction commits (for example with pg_notify inside it), or not at all:
// a rolled-back InsertTx wakes no listener (storetest rule
// notify/rolled-back-tx-insert-sends-nothing).
//
// tx must be a writable transaction on the store's own database; anything
// else is the caller's mistake, which a store reports when it can tell.
// The built-in stores check only tx's type and write through it: a
// read-only transaction fails with the database's error on PostgreSQL and
// MySQL (the caller must roll back), while SQLite's driver ignores
// read-only and the insert takes place; a transaction on another database
// puts the jobs there when it has the same tables, and fails otherwise. A
// store whose transactions say which database they belong to and whether
// they may write (bbolt's Tx.DB and Tx.Writable) returns an error wrapping
// ErrUnsupported for either and writes nothing. An error from InsertTx
// may leave part of the batch written in tx: the caller rolls back. No
// storetest rule checks read-only or foreign transactions (storetest rule
// tx/insert-rejects-unsupported-tx-type checks another type).
type TxInserter interface {
	InsertTx(ctx context.Context, tx any, now time.Time, jobs []InsertParams) ([]InsertResult, error)
}

// TxCompleter is the transactional-completion capability: the completion
// of a running job is written inside the caller's transaction, so the
// handler's own writes and the completion commit together or not at all.
// It is fenced like Finish and returns ErrLeaseLost when the fence fails.
//
// core.CompleteTx passes one kind of outcome only: OutcomeComplete for
// the execution its handler runs (JobID, WorkerID, ClaimSeq, Attempt), At
// its clock's now, Result the handler's recorded result (nil for none;
// sealed when Config.Encryption seals results), Delete false and no
// Error. core.HandleTx (on a store that is also a TxRunner) passes, in the
// transaction RunTx opened, the outcome the engine decided: that
// OutcomeComplete with Delete set when completed jobs are not kept, or an
// OutcomeContinue (NextKind, NextArgs, RunAt). The store applies each as
// Finish applies the same outcome. The SQL stores run their Finish
// statements in tx and so accept every kind Finish accepts; a store
// without TxRunner may instead refuse kinds other than OutcomeComplete
// with an error wrapping ErrInvalidArgument. After the commit the engine
// still finishes the execution, and that Finish fails its fence (Applied
// false), as it should. The rules tx/complete-* check OutcomeComplete,
// tx/run-writes-continue-and-delete the other two; tx must be a writable
// transaction on the store's database, as for TxInserter.
type TxCompleter interface {
	CompleteTx(ctx context.Context, tx any, o Outcome) error
}

// TxRunner is the capability to run a function inside one transaction on
// the store's own database: RunTx begins a transaction with the database's
// default isolation level, calls fn with it (tx is the type the store's
// TxInserter and TxCompleter accept: pgx.Tx for store/postgres, *sql.Tx
// for store/sqlite and store/mysql), commits when fn returns nil and rolls
// back otherwise, returning fn's error unchanged (a panic in fn rolls back
// and panics again). An error from Begin or Commit is returned as is; a
// commit whose answer was lost may have applied. RunTx retries nothing:
// fn may have effects outside the database. It returns ErrClosed once the
// store is closed. ctx bounds the whole transaction: when it ends, the
// database statements fail and the transaction rolls back.
//
// A store that implements TxRunner must also implement TxCompleter and
// accept in CompleteTx (and TxInserter's InsertTx, when it has it) the
// transactions RunTx opens, and in CompleteTx every outcome HandleTx
// writes: OutcomeComplete, with or without Delete, and OutcomeContinue.
// Stores without it (the memory store) make NewClient refuse a client
// with HandleTx kinds, with an error wrapping ErrUnsupported. The
// storetest rules tx/run-* check it.
type TxRunner interface {
	RunTx(ctx context.Context, fn func(tx any) error) error
}

// Notification is a wake-up delivered by a Notifier.
type Notification struct {
	Kind  NotificationKind
	Queue string
	JobID int64 // for NotifyCancel and NotifyFinish
}

// NotificationKind says what a Notification is about.
type NotificationKind string

// Notification kinds.
const (
	NotifyInsert NotificationKind = "insert" // due jobs were inserted into Queue
	NotifyPause  NotificationKind = "pause"  // Queue was paused
	NotifyResume NotificationKind = "resume" // Queue was resumed
	NotifyCancel NotificationKind = "cancel" // JobID was cancelled while maybe running
	// NotifyFinish says that JobID reached a final state through Finish
	// or CompleteTx (completed, its row maybe deleted; cancelled;
	// discarded), or was deleted by Delete; see FinishNotifier. Queue
	// may be empty.
	NotifyFinish NotificationKind = "finish"
)

// Notifier is the wake-up capability (LISTEN/NOTIFY and the like). Listen
// delivers notifications sent by any node through the store until ctx ends,
// then closes the channel. Delivery is best effort: the engine still polls,
// so a lost notification delays work by at most one poll interval. A store
// that declares Notifier must deliver an insert notification for every
// Insert of a due job, one for each queue that got due jobs: a batch with
// due jobs in several queues wakes every one of them (storetest rules
// notify/insert-of-due-job-wakes-listener and
// notify/batch-insert-notifies-every-queue), a NotifyPause when
// PauseQueue pauses a queue and a NotifyResume when ResumeQueue resumes
// one (storetest rule notify/pause-and-resume-notify), and a NotifyCancel
// for every Cancel (see Store.Cancel). Each is sent once its change is
// committed, never for a change rolled back.
//
// A store may send more: insert notifications for jobs not yet due, for
// a Retry, or twice for one change. The engine wakes the queue's fetch
// loop for each NotifyInsert and NotifyResume (a wake-up that finds
// nothing costs one claim), ignores NotifyPause and kinds it does not
// know, and for a NotifyCancel of a job running on its node reads the
// job and stops its handler, writing no outcome, when the store holds
// it cancelled at the claim that node runs (a notification that arrives
// after the job was retried and claimed again is ignored; a failed read
// stops the handler all the same). So a NotifyCancel must name a job
// whose cancel was committed, never any other: one that was not stops
// its handler whenever the read fails, and the job stays running until
// the worker's heartbeat hands it back or Rescue takes it.
//
// The channel closes when ctx ends (storetest rule
// notify/channel-closes-when-context-ends) and when the store is closed
// (store/memory, PostgreSQL and MySQL close it at once, SQLite within
// its notify interval; no rule checks this); Listen on a closed store returns an
// error wrapping ErrClosed. The engine takes a closed channel for a gap
// in delivery: it wakes every queue and listens again. A store that
// cannot notify in its current configuration returns an error wrapping
// ErrUnsupported from Listen, and the engine polls.
type Notifier interface {
	Listen(ctx context.Context) (<-chan Notification, error)
}

// FinishNotifier is declared by a Notifier whose Listen delivers a
// NotifyFinish for every job that a Finish or a committed CompleteTx
// made final (an outcome of kind complete, with or without Delete,
// cancel or discard, applied), and for every job Delete removed: once
// the change is committed, never for one rolled back or not applied
// (storetest rules notify/finish-notifies-final-jobs,
// notify/finish-tx-notifies-on-commit-only, notify/delete-notifies-finish).
// It may send NotifyFinish for other jobs too; jobs made final by
// Rescue, RescueWorkers or DiscardExpired need none.
//
// NotifiesFinish reports whether it does so in the store's current
// configuration (false in a poll-only mode, say). Client.Wait relies on
// it: while it listens to such a store it reads the waited jobs when
// they are notified, and otherwise only every WaitNotifiedPollInterval
// (for what the notifications do not cover), instead of every
// WaitPollInterval. Best effort like every notification: a lost one
// delays a waiter by at most that interval.
type FinishNotifier interface {
	NotifiesFinish() bool
}

// Settings is the key-value capability: small values shared by every
// process on the store and kept across restarts, such as the secret that
// signs the HTTP API's lease tokens (so that every server on one database
// accepts the tokens of the others, before and after a restart). A key is
// 1..MaxSettingKeyBytes bytes of UTF-8, compared byte for byte; a value is
// 0..MaxSettingValueBytes bytes of anything (an empty value and nil are
// the same). A stored value is never changed by the capability: there is
// only get-or-create.
type Settings interface {
	// GetOrCreateSetting returns the value stored under key. When there is
	// none it stores value and returns it, with created true. It is
	// atomic: of callers racing on one key, from any goroutine or process,
	// exactly one creates it and every one returns the value that one
	// stored. The database enforces it (a primary key on the key and an
	// insert that does nothing on conflict), never "select, then insert"
	// (unless, in a store whose writers are serialized, both happen in one
	// write transaction; see Serialized writers in the Store doc).
	// A key or value out of bounds returns an error and stores nothing.
	GetOrCreateSetting(ctx context.Context, key string, value []byte) (stored []byte, created bool, err error)

	// Setting returns the value stored under key, or ErrNotFound
	// (wrapped).
	Setting(ctx context.Context, key string) ([]byte, error)
}

// MutableSettings is the optional capability of settings that change,
// such as a periodic job's pause and last run. It shares the key space and
// bounds of Settings (CheckSetting); callers keep keys they change apart
// from keys they get-or-create, whose values must not change.
type MutableSettings interface {
	Settings
	// PutSetting stores value under key, replacing any value there. Of
	// callers racing on one key, the value left is one of theirs, whole;
	// none fails for the race.
	PutSetting(ctx context.Context, key string, value []byte) error
	// DeleteSetting removes key; a missing key is not an error.
	DeleteSetting(ctx context.Context, key string) error
}

// Bounds of a Settings key and value, in bytes.
const (
	MaxSettingKeyBytes   = 255
	MaxSettingValueBytes = 16 << 10
)

// SealedRewriter rewrites sealed values of stored jobs in batches (backlog keys rotate).
//
// It is the capability re-encryption after a key rotation needs (see
// Keyring.ResealArgs, ResealResult and ResealAttemptError, and `backlog
// keys rotate`): a caller walks the whole table in id order, a batch at a
// time, and has each job's args, result and error text sealed again with
// the current key. It never touches a running job, and it never overwrites
// a row that changed after it was read: such rows are left as they now are
// and the caller finds them again on a later pass.
type SealedRewriter interface {
	// RewriteSealed reads up to limit (≥ 1) jobs whose id is above
	// afterID (0 to start at the first job) and whose state is not
	// running, in ascending id order, and calls fn once for each of
	// them, in that order, from the calling goroutine. fn receives a copy
	// of the job as read, which it may modify and return as next. The
	// store holds no lock and no transaction while fn runs, so fn may
	// call the store (and the jobs of one batch are not a snapshot of one
	// instant).
	//
	// When fn returns changed true, the store writes next.Args (valid
	// JSON), next.Result (nil is no result) and the Error and Trace text
	// of each entry of next.Errors, which must hold as many entries as the
	// job had, in the same order (fn rewrites their text; it does not
	// add, drop or reorder entries, and their Attempt, At and Cause stay
	// as stored). Every other field of next is ignored, and nothing else
	// of the row changes (state, times, attempt, ClaimSeq, worker,
	// lease). When fn returns changed false the row is not written. The writes of one batch happen after fn has
	// returned for every job of it, in one write transaction where the
	// database has them, each fenced: a row is written only if it is still
	// there, not running, and unchanged since it was read — the same
	// state, ClaimSeq, Kind and Args (a store may fence on more, such as
	// a version column that every change of a row increments). A row
	// that fails the fence (claimed, finished, cancelled, retried,
	// deleted, or rewritten by another caller in the meantime) is left
	// as it now is, is not counted, and is not an error.
	//
	// It returns the id of the last job it read, to pass as afterID of
	// the next call (afterID itself when no job is left to read: the walk
	// is over), and n, how many rows it wrote. A batch of fewer than limit
	// jobs does not mean the walk is over; only lastID == afterID does.
	//
	// Errors: when fn returns an error, RewriteSealed calls fn for no
	// further job, writes nothing of the batch (rows fn already rewrote
	// included) and returns afterID, 0 and fn's error as it is. A next
	// that cannot be stored (nil with changed true, args that are not
	// valid JSON, another number of error entries) and limit < 1 return
	// an error in the same way. Every error returned means no row of the
	// batch was written: the caller may retry the call with the same
	// afterID. Transient database errors are retried inside the store
	// without calling fn again.
	RewriteSealed(ctx context.Context, afterID int64, limit int, fn func(j *Job) (next *Job, changed bool, err error)) (lastID int64, n int, err error)
}

// Vacuumer is an optional capability of stores whose database keeps what
// a busy queue leaves behind until it is told to reclaim it, such as the
// dead rows and dead index entries of jobs claimed, finished and pruned
// since PostgreSQL's last VACUUM, which every claim steps over.
//
// Maintain calls Vacuum once per round on every node, after pruning.
// Vacuum decides cheaply whether enough has accumulated (by the store's
// own measure and thresholds) and, if so, reclaims it; it returns how
// many dead rows there were when it did (0 when it did nothing). It must
// not block claims, inserts or finishes while it runs, must not run twice
// at once for one table (a node finding one under way does nothing), and
// must change no job: every job reads back the same before and after. An
// error is reported like any maintenance failure and the next round tries
// again.
type Vacuumer interface {
	Vacuum(ctx context.Context) (deadRows int64, err error)
}

// QueueHistory is the optional capability of stores that keep, in the
// database, what happened to every queue minute by minute: how many jobs
// completed and how many attempts failed (counted by every node and
// added up), and how many jobs were waiting and for how long (sampled by
// any node). Every node and server reading one database sees the same
// history and the same totals, whatever node did the work, which is what
// the dashboard's charts and the cluster counters of /metrics read.
// Every built-in store implements it; the engine records nothing, and
// the charts stay empty, on a store that does not.
//
// # Buckets
//
// A bucket is one queue's minute: the minute containing a sample's At, in
// UTC (At.UTC().Truncate(time.Minute)). Its counts are sums: every sample
// adds its Completed and Failed to its bucket (an additive upsert on
// SQL databases, count = count + excluded.count, never "read, then
// write"), so the counts of any number of nodes and handles writing at
// once add up exactly. Its gauge (Depth and OldestAge) is the one of the
// sample with the latest At among those that carry one (Gauge true);
// of samples with the same At, the one written last. A sample without
// a gauge leaves the bucket's gauge as it is.
//
// # Totals
//
// Every sample also adds its counts to its queue's totals, kept apart
// from the buckets and never pruned: they only grow, so they serve as
// counters (Prometheus' rate() and increase() work across nodes and
// restarts).
//
// # Retention
//
// The store keeps buckets until PruneQueueHistory deletes them; the
// engine's maintenance prunes what is older than HistoryRetention (24 h)
// on every node.
type QueueHistory interface {
	// AddQueueHistory records samples (see Buckets and Totals) in one
	// transaction: all of them take effect or none. Samples of one bucket
	// may repeat within a call; they add up as if written one by one in
	// input order. It returns an error, storing nothing, when
	// CheckQueueSamples refuses a sample.
	AddQueueHistory(ctx context.Context, samples []QueueSample) error

	// QueueHistory returns the buckets of queue (every queue when queue
	// is "") whose minute is at or after since truncated to the minute,
	// ordered by queue, then minute. Minutes with no sample have no
	// bucket.
	QueueHistory(ctx context.Context, queue string, since time.Time) ([]QueueBucket, error)

	// QueueTotals returns the totals of every queue that ever had a
	// sample, ordered by queue.
	QueueTotals(ctx context.Context) ([]QueueTotals, error)

	// DueJobs counts, for every queue with due jobs at now (state
	// scheduled, available or retryable, RunAt at or before now: the
	// jobs a claim could take if the queue had room), how many there
	// are and the earliest RunAt among them, ordered by queue. It is the
	// source of the gauges the engine samples; it reads pending jobs only
	// (the claim index on SQL databases), never finished ones.
	DueJobs(ctx context.Context, now time.Time) ([]QueueDue, error)

	// PruneQueueHistory deletes up to limit (≥ 1) buckets whose minute is
	// before `before` and returns how many; callers loop while the count
	// equals limit. Totals are not touched.
	PruneQueueHistory(ctx context.Context, before time.Time, limit int) (int, error)
}

// QueueSample is what one node adds to one queue's history (see
// QueueHistory).
type QueueSample struct {
	Queue string
	// At places the sample in its bucket (the minute containing At, UTC)
	// and, when Gauge is set, orders its gauge against other samples'.
	At time.Time
	// Completed and Failed are added to the bucket and the totals (≥ 0):
	// jobs completed, and attempts that failed (retried, or discarded
	// other than as worker_lost; see FailedAttempt).
	Completed, Failed int64
	// Gauge says Depth and OldestAge hold a sample of the queue at At.
	Gauge bool
	// Depth is the number of due jobs (QueueDue.Count) at At, ≥ 0.
	Depth int64
	// OldestAge is how long the oldest due job had been due at At (At
	// minus QueueDue.OldestRunAt; 0 without due jobs), ≥ 0. Stores keep
	// it to the millisecond at least.
	OldestAge time.Duration
}

// QueueBucket is one queue's minute of history.
type QueueBucket struct {
	Queue             string
	Minute            time.Time // start of the minute, UTC
	Completed, Failed int64     // sums of the samples of the minute
	// Gauge says the bucket holds a gauge; Depth, OldestAge and GaugeAt
	// (the At of the sample it came from, UTC) are zero when it does not.
	Gauge     bool
	Depth     int64
	OldestAge time.Duration
	GaugeAt   time.Time
}

// QueueTotals are the counts one queue's samples ever added.
type QueueTotals struct {
	Queue             string
	Completed, Failed int64
}

// QueueDue is one queue's due jobs at an instant (QueueHistory.DueJobs).
type QueueDue struct {
	Queue       string
	Count       int64
	OldestRunAt time.Time // earliest RunAt among them, UTC
}

// HistoryMinute returns the bucket of t: its minute in UTC.
func HistoryMinute(t time.Time) time.Time { return t.UTC().Truncate(time.Minute) }

// Migrator is implemented by stores with a schema. Migrate brings it to the
// newest version and is safe to run concurrently from several processes and
// repeatedly.
type Migrator interface {
	Migrate(ctx context.Context) error
}

// ClaimStrategy names how a store keeps claims exclusive. The engine never
// reads it: a store that offers several takes it as an option, and
// storetest.Factory.Strategies runs the suite once per strategy named.
//
// A store whose write transactions run one at a time (see Serialized
// writers in Store) needs neither: it reads the due jobs and marks them
// running in one write transaction. Such a store declares no strategy
// (an empty Factory.Strategies: one run, "strategy=default", as for
// store/memory), or StrategySerialized when it takes the option anyway:
// store/sqlite does, claiming with one UPDATE … WHERE id IN (SELECT …
// LIMIT n) RETURNING statement behind BEGIN IMMEDIATE, and refuses the
// other strategies with an error wrapping ErrUnsupported.
type ClaimStrategy string

// The claim strategies (see store/internal/sqlq).
const (
	// StrategySkipLocked selects due ids with FOR UPDATE SKIP LOCKED.
	StrategySkipLocked ClaimStrategy = "skip-locked"
	// StrategyOptimistic reads candidates without locks and claims each with
	// a compare-and-set on a version column.
	StrategyOptimistic ClaimStrategy = "optimistic"
	// StrategySerialized reads the due jobs and marks them running in one
	// write transaction of a database that runs write transactions one
	// at a time (SQLite), so no other claim can come between: neither a
	// lock per row nor a compare-and-set is needed.
	StrategySerialized ClaimStrategy = "serialized"
)

// QueueLimits is a queue's claim policy, kept in its record in the store
// so every node obeys one: how many of its jobs may be running at once
// and how many may start per period, across every node and store handle
// sharing the database; whether claims take turns across partition keys
// (Fair); and how waiting jobs' priority ages (Aging). Running means
// in the running state: a claim takes a slot, and any change out of
// running (a finish of any kind, a rescue, a cancel) frees it at once. A
// limit of 0 (or a kind absent from MaxRunningPerKind) means no limit.
// A claim skips the jobs a limit holds back and takes the due jobs behind
// them; it never waits for a slot.
type QueueLimits struct {
	// MaxRunning bounds the running jobs of the queue.
	MaxRunning int `json:"max_running,omitempty"`
	// MaxRunningPerKind bounds the running jobs of the queue of each kind
	// named: kind → limit. Kinds not named are bounded by MaxRunning only.
	MaxRunningPerKind map[string]int `json:"max_running_per_kind,omitempty"`
	// MaxRunningPerPartition bounds the running jobs of the queue with
	// one partition key, for every partition key (jobs without one are
	// bounded by the other limits only): "at most 2 running per
	// customer".
	MaxRunningPerPartition int `json:"max_running_per_partition,omitempty"`

	// Rate bounds the starts (claims) of the queue's jobs per period,
	// cluster-wide (see RateLimit). Jobs over the rate wait, due, and
	// start as the rate allows.
	Rate RateLimit `json:"rate,omitzero"`
	// RatePerKind bounds the starts of the queue's jobs of each kind
	// named: kind → rate.
	RatePerKind map[string]RateLimit `json:"rate_per_kind,omitempty"`
	// RatePerPartition bounds the starts of the queue's jobs with one
	// partition key, for every partition key (jobs without one are
	// bounded by the other limits only).
	RatePerPartition RateLimit `json:"rate_per_partition,omitzero"`

	// Fair makes claims take turns across partition keys instead of
	// taking due jobs strictly in claim order: a tenant that enqueued
	// 100,000 jobs does not hold back one that enqueued 100 afterwards.
	// Each claim reads the due jobs of up to FairPartitions partition
	// keys, in turn after the last ones served (a store may read every
	// partition key instead, as store/memory does), and interleaves them,
	// the partition with the fewest running jobs first (see ClaimRoom.Pick);
	// within a partition the claim order holds. Jobs without a partition
	// key take their turn as the queue's head (in claim order) reaches
	// them: give every job of a fair queue a key.
	Fair bool `json:"fair,omitempty"`

	// Aging raises waiting jobs' effective priority over time (see
	// PriorityAging).
	Aging PriorityAging `json:"aging,omitzero"`

	// WorkersPerNode, when above 0, replaces the MaxWorkers every node's
	// configuration gives the queue: each node runs at most this many of
	// its jobs at once, and picks a change up at its next poll (within
	// Config.PollInterval). It is no limit on claims: IsZero leaves it
	// out, and a queue with only this set claims as an unlimited one.
	// 0 … MaxWorkersPerNode.
	WorkersPerNode int `json:"workers_per_node,omitempty"`
}

// MaxWorkersPerNode is the largest QueueLimits.WorkersPerNode.
const MaxWorkersPerNode = 100000

// MaxLimitedKinds is the most kinds QueueLimits.MaxRunningPerKind may
// name.
const MaxLimitedKinds = 256

// IsZero reports whether l sets no limit or policy that claims obey
// (WorkersPerNode, a per-node setting, is not one).
func (l QueueLimits) IsZero() bool {
	if l.MaxRunning > 0 || l.MaxRunningPerPartition > 0 || !l.Rate.IsZero() || !l.RatePerPartition.IsZero() || l.Fair || !l.Aging.IsZero() {
		return false
	}
	for _, n := range l.MaxRunningPerKind {
		if n > 0 {
			return false
		}
	}
	for _, r := range l.RatePerKind {
		if !r.IsZero() {
			return false
		}
	}
	return true
}

// Normalized returns l without per-kind entries of 0 (no limit) and with
// a nil MaxRunningPerKind when none is left: the form stores keep and
// return.
func (l QueueLimits) Normalized() QueueLimits {
	var kinds map[string]int
	for k, n := range l.MaxRunningPerKind {
		if n > 0 {
			if kinds == nil {
				kinds = make(map[string]int, len(l.MaxRunningPerKind))
			}
			kinds[k] = n
		}
	}
	l.MaxRunningPerKind = kinds
	var rates map[string]RateLimit
	for k, r := range l.RatePerKind {
		if !r.IsZero() {
			if rates == nil {
				rates = make(map[string]RateLimit, len(l.RatePerKind))
			}
			rates[k] = r
		}
	}
	l.RatePerKind = rates
	if l.Rate.IsZero() {
		l.Rate = RateLimit{}
	}
	if l.RatePerPartition.IsZero() {
		l.RatePerPartition = RateLimit{}
	}
	if l.Aging.IsZero() {
		l.Aging = PriorityAging{}
	}
	return l
}

// Validate returns an error wrapping ErrInvalidJob when a limit is
// negative, a kind of MaxRunningPerKind is not a valid kind (1..MaxKindLen
// bytes of UTF-8), or it names more than MaxLimitedKinds kinds.
func (l QueueLimits) Validate() error {
	if l.MaxRunning < 0 || l.MaxRunningPerPartition < 0 {
		return invalid("queue limits must not be negative")
	}
	if len(l.MaxRunningPerKind) > MaxLimitedKinds {
		return invalid("queue limits name %d kinds, over the limit of %d", len(l.MaxRunningPerKind), MaxLimitedKinds)
	}
	for k, n := range l.MaxRunningPerKind {
		if k == "" || len(k) > MaxKindLen || !utf8.ValidString(k) {
			return invalid("queue limits: kind %q must be 1..%d bytes of UTF-8", k, MaxKindLen)
		}
		if n < 0 {
			return invalid("queue limits: kind %q: limit %d is negative", k, n)
		}
	}
	if len(l.RatePerKind) > MaxLimitedKinds {
		return invalid("queue rate limits name %d kinds, over the limit of %d", len(l.RatePerKind), MaxLimitedKinds)
	}
	for k, r := range l.RatePerKind {
		if k == "" || len(k) > MaxKindLen || !utf8.ValidString(k) {
			return invalid("queue rate limits: kind %q must be 1..%d bytes of UTF-8", k, MaxKindLen)
		}
		if err := r.Validate(); err != nil {
			return fmt.Errorf("queue rate limits: kind %q: %w", k, err)
		}
	}
	if l.WorkersPerNode < 0 || l.WorkersPerNode > MaxWorkersPerNode {
		return invalid("workers per node %d must be 0 (each node's own) … %d", l.WorkersPerNode, MaxWorkersPerNode)
	}
	if err := l.Rate.Validate(); err != nil {
		return err
	}
	if err := l.RatePerPartition.Validate(); err != nil {
		return fmt.Errorf("rate per partition: %w", err)
	}
	return l.Aging.Validate()
}

// QueueLimiter is the capability of stores that enforce QueueLimits in
// the claim. Every built-in store implements it; Client.SetQueueLimits
// returns ErrUnsupported on a store that does not.
//
// The limits of a queue live in the store, in the queue's persisted
// record (the one PauseQueue writes), so every node obeys the same
// limits whatever its configuration says. Claim enforces them atomically
// with the claim: once SetQueueLimits has returned, no claim that starts
// afterwards, from any goroutine, handle or process, makes the running
// jobs of the queue exceed a limit at any instant. (Jobs already running
// when limits are lowered keep running; claims skip the groups that are
// over until enough of them finish.) Within its room a limited claim
// still takes due jobs in claim order, skipping those whose kind or
// partition is full; it never waits for a slot.
//
// Rate limits, Fair and Aging take the same path. The store keeps, with
// the queue's record, each rate-limited group's GCRA instant (RateState)
// and the fair claim's cursor: the limited claim loads them into the
// ClaimRoom (LoadRate, LoadFairCursor) before it picks, and writes back
// what moved (RateUpdates, FairCursorMoved) before it commits, under the
// same lock. Instants before the claim's now may be dropped at any time:
// a group without one starts with a full burst, which is what an old
// instant means. A fair claim reads candidates partition by partition
// from the cursor, plus the queue's head in claim order (see
// QueueLimits.Fair). The cursor only bounds what one claim reads: a store
// that reads the due jobs of every partition key in each fair claim
// (store/memory) may ignore it (FairCursor, SetFairCursor,
// FairCursorMoved) and store none; one that reads at most FairPartitions
// of them must keep it, or the partition keys after the first
// FairPartitions never get a turn (storetest rule
// policy/fair-turn-goes-round; policy/fair-partitions-take-turns checks
// the interleaving). An aging claim reads each priority level's oldest
// due jobs, so the jobs aging lifts are among them; ClaimRoom.Pick
// orders and takes them.
//
// A queue without limits must cost its claims nothing: stores take the
// claim path they take for every queue, and consult the limits only
// when that path claims nothing (or first, for a queue the process found
// limited at its last claim).
type QueueLimiter interface {
	// SetQueueLimits stores the limits of queue (creating its record if
	// needed, without changing its pause), replacing any it had; zero
	// limits lift every limit. It returns an error wrapping ErrInvalidJob
	// for limits Validate refuses, and stores nothing then.
	SetQueueLimits(ctx context.Context, queue string, limits QueueLimits, now time.Time) error

	// InitQueueLimits stores limits as SetQueueLimits does, but only when
	// the limits of queue were never set (by either method; a pause alone
	// does not count). It returns the limits in force afterwards and
	// whether it stored them. Of callers racing on one queue at most one
	// stores; the others get its limits.
	InitQueueLimits(ctx context.Context, queue string, limits QueueLimits, now time.Time) (QueueLimits, bool, error)

	// QueueLimits returns the limits of queue, normalized (see
	// QueueLimits.Normalized); zero limits when none were set.
	QueueLimits(ctx context.Context, queue string) (QueueLimits, error)

	// QueueRateStates returns the stored GCRA instants of queue's
	// rate-limited groups that are after now (the groups whose rate is
	// in use), sorted by group (byte order; storetest rule
	// policy/rate-states-sorted-by-group); QueueLimits.RateWaits turns them into
	// the waits an operator sees.
	QueueRateStates(ctx context.Context, queue string, now time.Time) ([]RateState, error)
}
