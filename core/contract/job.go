package contract

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"
)

// State is where a job is in its life. The transitions are:
//
//	scheduled ──(run_at passes)──▶ available ──(claim)──▶ running
//	retryable ──(run_at passes)──▶ available
//	running ──▶ completed | retryable | scheduled/available (snooze, continue,
//	            hand-back) | cancelled | discarded
//	discarded, cancelled, completed ──(manual retry)──▶ available
//
// A claim treats scheduled and retryable jobs whose run_at has passed as
// available; no sweep promotes them first.
type State string

// The job states. Completed, cancelled and discarded are final: the engine
// never moves a job out of them by itself.
const (
	StateWaiting   State = "waiting"   // waits for the jobs it depends on (Dependencies); never claimed
	StateScheduled State = "scheduled" // run_at is in the future
	StateAvailable State = "available" // ready to claim
	StateRunning   State = "running"   // claimed by one worker, under a lease
	StateRetryable State = "retryable" // failed, waiting out its backoff
	StateCompleted State = "completed" // done
	StateCancelled State = "cancelled" // stopped on purpose, never retried
	StateDiscarded State = "discarded" // dead-lettered: attempts exhausted, deadline passed, permanent error
)

// AllStates lists every state in life-cycle order.
var AllStates = []State{StateWaiting, StateScheduled, StateAvailable, StateRunning, StateRetryable, StateCompleted, StateCancelled, StateDiscarded}

// Final reports whether s is completed, cancelled or discarded.
func (s State) Final() bool {
	return s == StateCompleted || s == StateCancelled || s == StateDiscarded
}

// Pending reports whether s is a state a claim may pick a due job from
// (scheduled, available, retryable).
func (s State) Pending() bool {
	return s == StateScheduled || s == StateAvailable || s == StateRetryable
}

// Valid reports whether s is one of the eight states.
func (s State) Valid() bool {
	for _, v := range AllStates {
		if v == s {
			return true
		}
	}
	return false
}

// Priorities run from PriorityHighest (claimed first) to PriorityLowest.
const (
	PriorityHighest = 1
	PriorityDefault = 5
	PriorityLowest  = 10
)

// DefaultMaxAttempts is used when a job is enqueued without MaxAttempts.
const DefaultMaxAttempts = 20

// DefaultQueue is the queue of a job enqueued without one.
const DefaultQueue = "default"

// Size limits applied by the client before a job reaches a store. Config can
// lower or raise MaxArgsBytes and MaxResultBytes.
const (
	DefaultMaxArgsBytes   = 1 << 20  // 1 MiB of JSON args
	DefaultMaxResultBytes = 64 << 10 // 64 KiB of result
	MaxQueueLen           = 128      // bytes in a queue name
	MaxKindLen            = 255      // bytes in a kind
	MaxUniqueKeyLen       = 255      // bytes in a unique key
	MaxPartitionKeyLen    = 255      // bytes in a partition key
	MaxTags               = 32       // tags per job
	MaxTagLen             = 128      // bytes per tag
	MaxMetadataBytes      = 64 << 10 // bytes of metadata keys and values together
	MaxErrorBytes         = 16 << 10 // bytes kept of one attempt's error text (message + trace)
	// MaxErrorEntries is the most entries a job's Errors history keeps.
	// A store that appends an entry (an outcome's, a rescue's, a deadline
	// discard's) to a history already this long first drops the oldest
	// entry after the first: the first failure, which often tells the
	// cause, and the latest MaxErrorEntries-1 stay, and a job that fails
	// often stays within MaxErrorEntries × MaxErrorBytes of history
	// (storetest rule finish/errors-history-is-bounded).
	MaxErrorEntries = 20
)

// AttemptError is one entry of a job's error history: one per failed
// attempt, plus entries written when a worker was lost or a kind was unknown.
type AttemptError struct {
	Attempt int       `json:"attempt"`         // the attempt that failed (1-based)
	At      time.Time `json:"at"`              // when, UTC
	Error   string    `json:"error"`           // the message, for people
	Trace   string    `json:"trace,omitempty"` // panic stack, stderr tail or exit status; may be empty
	// Cause is the machine-readable reason (one of the Cause* constants,
	// such as CauseLeaseExpired); empty on entries written before causes
	// were recorded. Programs read it instead of parsing Error.
	Cause string `json:"cause,omitempty"`
	// StartedAt is when the attempt this entry ends began (the job's
	// AttemptedAt when it was claimed for it), UTC; zero when no attempt
	// was running (DiscardExpired's entry for a job never claimed again)
	// and on entries written before start times were recorded. With At it
	// gives the attempt's duration. Stores keep it as given, in UTC
	// (storetest rule finish/error-entry-keeps-start-and-discard-reason).
	StartedAt time.Time `json:"started_at,omitzero"`
	// DiscardReason is set on the entry whose outcome discarded the job
	// and says why: "exhausted" (attempts used up), "deadline" (the
	// deadline passed; DiscardExpired's entry has it too),
	// "permanent" (the handler gave up) or "worker_lost" (rescued with no
	// attempts left), core's Reason* constants; "" on every other entry
	// and on entries written before reasons were recorded.
	DiscardReason string `json:"discard_reason,omitempty"`
}

// Bounded returns e with Error cut to its first MaxErrorBytes/2 bytes and
// Trace to its last MaxErrorBytes/2 bytes (the end of a stack or of stderr
// is the telling part), on rune boundaries, each cut marked. Runners of
// jobs outside the engine (the HTTP API's remote workers) bound what they
// report the same way. Sealed text (encryption at rest) is never cut,
// which would destroy it: it is kept up to MaxSealedTextBytes and replaced
// by a note beyond.
func (e AttemptError) Bounded() AttemptError {
	if IsSealedText(e.Error) {
		e.Error = boundSealedText(e.Error)
	} else {
		e.Error = truncateHead(e.Error, MaxErrorBytes/2)
	}
	if IsSealedText(e.Trace) {
		e.Trace = boundSealedText(e.Trace)
	} else {
		e.Trace = truncateTail(e.Trace, MaxErrorBytes/2)
	}
	return e
}

// truncateHead keeps at most n bytes of s's head, cutting on a rune
// boundary and marking the cut.
func truncateHead(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + truncatedMark
}

// truncateTail keeps at most n bytes of s's tail (where stderr and stacks
// keep the interesting part), cutting on a rune boundary.
func truncateTail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := len(s) - n
	for cut < len(s) && !utf8.RuneStart(s[cut]) {
		cut++
	}
	return "[truncated]…" + s[cut:]
}

// Job is one stored job as a store returns it. Times are UTC with microsecond
// precision; a zero time means "not set" (NULL in SQL stores).
type Job struct {
	ID       int64           `json:"id"`    // assigned by the store, increasing in insert order
	Queue    string          `json:"queue"` // queue name
	Kind     string          `json:"kind"`  // handler name
	Args     json.RawMessage `json:"args"`  // JSON; stores may normalise whitespace/key order but keep meaning
	Priority int             `json:"priority"`
	State    State           `json:"state"`
	Attempt  int             `json:"attempt"` // attempts started so far; 0 before the first claim
	// ClaimSeq counts the claims of this job: every claim increments it,
	// nothing else changes it, so it names one execution and is the
	// fencing value of everything written on that execution's behalf
	// (Outcome.ClaimSeq, Lease.ClaimSeq). 0 before the first claim.
	ClaimSeq    int64     `json:"claim_seq,omitempty"`
	MaxAttempts int       `json:"max_attempts"`
	RunAt       time.Time `json:"run_at"`               // when it becomes (or became) due
	Deadline    time.Time `json:"deadline,omitzero"`    // discarded if not finished by then; zero = none
	UniqueKey   string    `json:"unique_key,omitempty"` // "" = none
	// PartitionKey groups jobs for QueueLimits.MaxRunningPerPartition
	// (a tenant or customer id); "" = none.
	PartitionKey string            `json:"partition_key,omitempty"`
	Tags         []string          `json:"tags,omitempty"`
	Metadata     map[string]string `json:"metadata,omitempty"`
	Errors       []AttemptError    `json:"errors,omitempty"` // oldest first
	Result       []byte            `json:"result,omitempty"` // set on completion, at most MaxResultBytes
	CreatedAt    time.Time         `json:"created_at"`
	AttemptedAt  time.Time         `json:"attempted_at,omitzero"` // start of the latest attempt
	FinishedAt   time.Time         `json:"finished_at,omitzero"`  // when it reached a final state
	WorkerID     string            `json:"worker_id,omitempty"`   // holder while running (kept after, for inspection)
	LeaseUntil   time.Time         `json:"lease_until,omitzero"`  // lease deadline while running
	// Progress is what the latest attempt recorded of how far it got
	// (ProgressRecorder); nil when it recorded none. Every claim clears it.
	Progress *Progress `json:"progress,omitempty"`
	// Checkpoint is the JSON a running attempt saved for the attempts
	// after it (at most MaxCheckpointBytes; ProgressRecorder): the next
	// attempt of the same step receives it; a continuation clears it.
	Checkpoint json.RawMessage `json:"checkpoint,omitempty"`
	// WorkflowID is the id of the workflow (or batch) the job belongs
	// to: the id of the first job of the Insert call that named a Step or
	// set InWorkflow (Dependencies); 0 = none.
	WorkflowID int64 `json:"workflow_id,omitempty"`
	// Step is the job's name within its workflow ("" = none).
	Step string `json:"step,omitempty"`
	// DependsOn lists the ids of the jobs this job waits for, as
	// inserted (InsertParams.DependsOn and the ids DependsOnIndex
	// named), ascending; nil = none.
	DependsOn []int64 `json:"depends_on,omitempty"`
	// WaitingFor counts the dependencies not yet settled while the job
	// waits: 0 once it was released; a job cancelled or deleted while
	// waiting (Cancel, DiscardExpired) may keep the count it had then.
	WaitingFor int `json:"waiting_for,omitempty"`
	// OnDependencyFailure is what a cancelled, discarded or deleted
	// dependency does to the job (see DependencyPolicy).
	OnDependencyFailure DependencyPolicy `json:"on_dependency_failure,omitempty"`
	// DependencyEnds counts the job's settled dependencies by how they
	// ended (Dependencies): a batch's callback reads in it how the batch
	// went. Final once the job leaves StateWaiting.
	DependencyEnds DependencyEnds `json:"dependency_ends,omitzero"`
}

// DependencyEnds counts settled dependencies by their end. A dependency
// deleted before its end counts as cancelled.
type DependencyEnds struct {
	Completed int `json:"completed,omitempty"`
	Cancelled int `json:"cancelled,omitempty"`
	Discarded int `json:"discarded,omitempty"`
}

// Total is the number of settled dependencies.
func (e DependencyEnds) Total() int { return e.Completed + e.Cancelled + e.Discarded }

// InsertParams is one job to insert. The client validates and fills defaults
// before a store sees it, so stores may assume: Queue and Kind non-empty,
// Args valid JSON in UTF-8, Priority 1..10, MaxAttempts ≥ 1, RunAt set and
// RunAt and Deadline (when set) within [MinTime, MaxTime] (UTC, µs).
type InsertParams struct {
	Queue       string
	Kind        string
	Args        json.RawMessage
	Priority    int
	MaxAttempts int
	RunAt       time.Time
	Deadline    time.Time // zero = none
	UniqueKey   string    // "" = none; see UniqueScope and UniqueFor
	// UniqueScope is where UniqueKey must be unique: among all jobs
	// (UniqueGlobal, the zero value), within Queue, or within Kind.
	// Ignored without a UniqueKey.
	UniqueScope UniqueScope
	// UniqueFor is how long the key stays held after the job reaches a
	// final state (completed, cancelled, discarded), counted from its
	// FinishedAt, whether or not its row is still there; 0 frees the key
	// at the final state. 0 ≤ UniqueFor ≤ MaxUniqueFor, kept to the
	// microsecond. Ignored without a UniqueKey.
	UniqueFor time.Duration
	// UniqueFingerprint is kept with the hold the job takes on its unique
	// key, such as a hash of the request the job was made from (at most
	// MaxUniqueFingerprintLen bytes of printable ASCII; "" = none): a
	// later insert that the
	// hold turns into a duplicate gets it back in
	// InsertResult.Fingerprint, and can tell whether it asked for the
	// same thing. Ignored without a UniqueKey, and by an insert that
	// finds the key held.
	UniqueFingerprint string
	// PartitionKey puts the job in a partition of its queue (a tenant or
	// customer id, ≤ MaxPartitionKeyLen bytes of UTF-8; "" = none) that
	// QueueLimits.MaxRunningPerPartition bounds.
	PartitionKey string
	Tags         []string
	Metadata     map[string]string
	// DependsOn names jobs inserted by earlier calls, by id, that this
	// job waits for; DependsOnIndex names jobs of the same Insert call,
	// by their index in it, each below this job's own index (so the
	// dependencies of one call form no cycle). Only a store that
	// implements Dependencies is given either; together at most
	// MaxDependencies distinct jobs.
	DependsOn      []int64
	DependsOnIndex []int
	// OnDependencyFailure is what a dependency that ends cancelled,
	// discarded or deleted does to this job (see DependencyPolicy).
	OnDependencyFailure DependencyPolicy
	// Step names the job within its workflow: the jobs of one Insert
	// call that name a Step or set InWorkflow form a workflow, whose id
	// (Job.WorkflowID) is the id of the first of them. At most
	// MaxStepLen bytes of UTF-8, unique within the call; "" = none.
	Step string
	// InWorkflow puts the job in its Insert call's workflow without a
	// Step name (the jobs of a batch).
	InWorkflow bool
}

// UniqueScope says among which jobs a unique key must be unique.
type UniqueScope uint8

// The unique-key scopes.
const (
	// UniqueGlobal: one holder of the key among all jobs, whatever their
	// queue and kind (the zero value).
	UniqueGlobal UniqueScope = iota
	// UniqueQueue: one holder of the key per queue; the same key in two
	// queues gives two jobs.
	UniqueQueue
	// UniqueKind: one holder of the key per kind; the same key for two
	// kinds gives two jobs.
	UniqueKind
)

// String returns "global", "queue" or "kind".
func (s UniqueScope) String() string {
	switch s {
	case UniqueGlobal:
		return "global"
	case UniqueQueue:
		return "queue"
	case UniqueKind:
		return "kind"
	}
	return fmt.Sprintf("UniqueScope(%d)", uint8(s))
}

// Valid reports whether s is one of the three scopes.
func (s UniqueScope) Valid() bool { return s <= UniqueKind }

// MaxUniqueFor bounds InsertParams.UniqueFor and Options.UniqueFor.
const MaxUniqueFor = 366 * 24 * time.Hour

// MaxScopedUniqueKeyLen is the most bytes ScopedUniqueKey returns for
// valid params: a scope letter, a length of up to three digits, two
// separators, a kind (the longest of queue and kind) and the key.
const MaxScopedUniqueKeyLen = 1 + 3 + 2 + MaxKindLen + MaxUniqueKeyLen

// ScopedUniqueKey returns the key under which a store holds p's unique
// key: the scope and, for the queue and kind scopes, the queue or kind
// are part of it, so keys of two scopes, queues or kinds never collide.
// The form is "g:" + key (global), "q<n>:" + queue + ":" + key (queue)
// and "k<n>:" + kind + ":" + key (kind), where <n> is the byte length
// of the queue or kind in decimal, which makes the form unambiguous
// whatever bytes the queue, kind and key hold. It returns "" when p has
// no unique key. Stores compare scoped keys byte for byte.
func ScopedUniqueKey(p *InsertParams) string {
	if p.UniqueKey == "" {
		return ""
	}
	switch p.UniqueScope {
	case UniqueQueue:
		return "q" + strconv.Itoa(len(p.Queue)) + ":" + p.Queue + ":" + p.UniqueKey
	case UniqueKind:
		return "k" + strconv.Itoa(len(p.Kind)) + ":" + p.Kind + ":" + p.UniqueKey
	}
	return "g:" + p.UniqueKey
}

// InsertResult reports one inserted job. When the unique key is held
// (see Store.Insert), Duplicate is true and Job is the job holding it, as
// it is now. When that job's row is gone (deleted or pruned inside its
// UniqueFor window), Job carries only what the hold keeps: ID, Queue,
// Kind and UniqueKey, with an empty State.
type InsertResult struct {
	Job       *Job
	Duplicate bool
	// Fingerprint is, for a duplicate, the UniqueFingerprint the holder's
	// insert gave its hold ("" when it gave none, or the hold was taken
	// before stores kept fingerprints).
	Fingerprint string
}

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidJob}, a...)...)
}

// ValidateQueueName reports whether name can name a queue: 1..128 bytes of
// letters, digits and "_-.:". The error wraps ErrInvalidJob.
func ValidateQueueName(name string) error {
	if name == "" || len(name) > MaxQueueLen {
		return invalid("queue name %q must be 1..%d bytes", name, MaxQueueLen)
	}
	if name == "." || name == ".." {
		return invalid("queue name %q is not allowed: . and .. are path segments (the queue could not be named in a URL)", name)
	}
	for _, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.' || r == ':'
		if !ok {
			return invalid("queue name %q may hold only letters, digits and _-.:", name)
		}
	}
	return nil
}

// UTC returns t in UTC truncated to microseconds, the precision every store
// keeps. The zero time stays zero.
func UTC(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC().Truncate(time.Microsecond)
}
