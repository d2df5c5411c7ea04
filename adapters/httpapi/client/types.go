package client

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/backlogq/backlog/adapters/httpapi/apitypes"
	"github.com/backlogq/backlog/core"
)

// Job is a job as the API returns it: apitypes.Job, the type the server
// encodes. Times are UTC; a zero time means the field was absent (not
// set). Result is the stored result as a JSON value (the server turns a
// result that is not valid JSON into a JSON string). LeaseToken is set
// only on jobs returned by Claim: present it with every outcome of that
// execution and name it in every heartbeat until the outcome is
// delivered. Job.CoreJob converts it for code shared with in-process
// handlers.
type Job = apitypes.Job

// SubmitRequest is one job to submit (POST /v1/jobs, one item of POST
// /v1/jobs/batch). Only Kind is required; zero values take the server's
// defaults (args {}, queue "default", priority 5, 20 attempts, due now).
// RunAt and Delay are exclusive.
type SubmitRequest struct {
	Kind        string          `json:"kind"`
	Args        json.RawMessage `json:"args,omitempty"`     // any JSON value; nil means {}
	Queue       string          `json:"queue,omitempty"`    // "" = default
	Priority    int             `json:"priority,omitempty"` // 1 (first) … 10 (last); 0 = 5
	RunAt       time.Time       `json:"run_at,omitzero"`    // due time; zero = now (or now+Delay)
	Delay       time.Duration   `json:"-"`                  // due after this delay (sent as delay_seconds)
	MaxAttempts int             `json:"max_attempts,omitempty"`
	UniqueKey   string          `json:"unique_key,omitempty"`
	// UniqueScope is where UniqueKey is unique: "global" ("" = global),
	// "queue" or "kind" (core.UniqueScope).
	UniqueScope string `json:"unique_scope,omitempty"`
	// UniqueFor keeps the key held this long after the job finishes
	// (0..366 days; sent as unique_for_seconds; 0 = the server's default).
	UniqueFor time.Duration `json:"-"`
	// PartitionKey puts the job in a partition of its queue (a tenant, a
	// customer id) for the queue's per-partition limit.
	PartitionKey string            `json:"partition_key,omitempty"`
	Tags         []string          `json:"tags,omitempty"`
	Deadline     time.Time         `json:"deadline,omitzero"`
	Metadata     map[string]string `json:"metadata,omitempty"`
}

// MarshalJSON writes the request body, with Delay as delay_seconds and
// UniqueFor as unique_for_seconds.
func (r SubmitRequest) MarshalJSON() ([]byte, error) {
	type plain SubmitRequest
	r.RunAt, r.Deadline = wireTime(r.RunAt), wireTime(r.Deadline)
	return json.Marshal(struct {
		plain
		DelaySeconds     *float64 `json:"delay_seconds,omitempty"`
		UniqueForSeconds *float64 `json:"unique_for_seconds,omitempty"`
	}{plain: plain(r), DelaySeconds: seconds(r.Delay), UniqueForSeconds: seconds(r.UniqueFor)})
}

// SubmitResult is the answer to one submitted job. Duplicate means the
// unique key was held by a live job: Job is that job and nothing was
// inserted.
type SubmitResult struct {
	Job       *Job `json:"job"`
	Duplicate bool `json:"duplicate"`
}

// ListParams filters ListJobs. Zero values mean "any"; Limit 0 means the
// server's default (100), at most 1000.
type ListParams struct {
	Queue  string
	States []core.State
	Kind   string
	// Args keeps jobs whose args contain this JSON object (the API's args
	// filter, see core.ListParams.ArgsContains); sealed args never match.
	Args  json.RawMessage
	After int64 // keyset cursor: the last id of the previous page (NextAfter)
	Limit int
	Desc  bool // newest first
	// ByRunAt orders by (run_at, id) instead of id (sort=run_at): the
	// cursor is then After with AfterRunAt (the page's NextAfterRunAt).
	ByRunAt    bool
	AfterRunAt time.Time
	// Archived lists the archive of finished jobs instead of the jobs
	// (archived=true; see core.Retention.Archive); a server whose store
	// has none answers 501 not-supported.
	Archived bool
	// WorkflowID keeps the jobs of that workflow or batch (workflow_id;
	// 0: any); a server whose store has no job dependencies answers 501
	// not-supported.
	WorkflowID int64
}

// JobPage is one page of ListJobs. NextAfter is the cursor of the next page
// (pass it as ListParams.After), or 0 on the last page.
type JobPage struct {
	Jobs      []*Job `json:"jobs"`
	NextAfter int64  `json:"next_after,omitempty"`
	// NextAfterRunAt goes with NextAfter when the list is by run_at
	// (pass it as ListParams.AfterRunAt).
	NextAfterRunAt time.Time `json:"next_after_run_at,omitzero"`
}

// QueueInfo is one queue: its pause flag and its job count per state
// (states without jobs may be absent).
type QueueInfo struct {
	Queue  string             `json:"queue"`
	Paused bool               `json:"paused"`
	Counts map[core.State]int `json:"counts"`
}

// WorkerInfo is one worker's registry record. Name is what the worker
// registered as (the record's host). Liveness is judged by the server at
// the time of the response.
type WorkerInfo struct {
	ID          string            `json:"id"`
	Name        string            `json:"name"`
	PID         int               `json:"pid,omitempty"` // the process id in the record; 0 for remote workers
	Queues      []string          `json:"queues"`
	Tags        []string          `json:"tags,omitempty"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	StartedAt   time.Time         `json:"started_at"`
	HeartbeatAt time.Time         `json:"heartbeat_at"`
	Liveness    core.Liveness     `json:"liveness"`
}

// RegisterRequest registers a remote worker (PUT /v1/workers/{id}). Queues
// is required (at least one); Tags are its capabilities (claims route jobs
// by them); Kinds are the job kinds it handles (at most 1000, each 1..255
// bytes of UTF-8), which the server accepts submissions of while the
// worker lives (core.Client.CheckKinds). Servers that predate Kinds refuse
// a registration that sends them (400 invalid-request).
type RegisterRequest struct {
	Name     string            `json:"name,omitempty"`
	Queues   []string          `json:"queues"`
	Tags     []string          `json:"tags,omitempty"`
	Kinds    []string          `json:"kinds,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// Registration is the server's answer to a registration: the record, how
// often to heartbeat, and the lease each claim and heartbeat grants.
type Registration struct {
	Worker            WorkerInfo
	HeartbeatInterval time.Duration
	Lease             time.Duration
}

// HeartbeatResult is the answer to a heartbeat: the record, how many of
// the named leases were renewed (fewer than named: some job is no longer
// held by that claim), and how many running jobs of the worker the
// heartbeat did not name were handed back (claims whose answer the worker
// never received).
type HeartbeatResult struct {
	Worker         WorkerInfo `json:"worker"`
	LeasesExtended int        `json:"leases_extended"`
	HandedBack     int        `json:"handed_back"`
}

// ClaimRequest asks for jobs (POST /v1/workers/{id}/claim). Queues nil
// means the worker's registered queues (otherwise a subset of them, taken
// in order); Limit 0 means 1 (at most 1000); Wait is how long the server
// may hold the request when no job is due (0..60 s, rounded to
// milliseconds).
type ClaimRequest struct {
	Queues []string
	Limit  int
	Wait   time.Duration
}

// FailAction says what a failed attempt does to its job.
type FailAction string

// The actions of Fail.
const (
	// FailRetry follows the server's retry policy: retryable with backoff
	// while attempts remain and the deadline allows, else discarded.
	FailRetry FailAction = "retry"
	// FailDiscard dead-letters the job now.
	FailDiscard FailAction = "discard"
	// FailCancel cancels the job.
	FailCancel FailAction = "cancel"
)

// CompleteRequest completes a claimed job. Result is any JSON value (nil
// for none) within the server's result limit (64 KiB by default; a larger
// one is rejected with ErrInvalidRequest and the job stays running).
type CompleteRequest struct {
	LeaseToken string          `json:"lease_token"`
	Result     json.RawMessage `json:"result,omitempty"`
}

// FailRequest records a failed attempt. Error is required. RetryIn, when
// set, overrides the server's retry policy for action retry (the job is due
// again after that long). Cause is the attempt's machine-readable cause,
// core.CauseOf of the handler's error ("" means core.CauseHandlerError);
// the server records it in the error entry and refuses the causes only it
// assigns (rescues, hand-backs, refused continuations) with
// ErrInvalidRequest. Cause core.CauseDeadline discards the job for its
// deadline.
type FailRequest struct {
	LeaseToken string         `json:"lease_token"`
	Error      string         `json:"error"`
	Trace      string         `json:"trace,omitempty"`
	Action     FailAction     `json:"action,omitempty"` // "" = FailRetry
	Cause      string         `json:"cause,omitempty"`  // "" = core.CauseHandlerError
	RetryIn    *time.Duration `json:"-"`                // sent as retry_in_seconds
}

// MarshalJSON writes the request body, with RetryIn as retry_in_seconds.
func (r FailRequest) MarshalJSON() ([]byte, error) {
	type plain FailRequest
	var s *float64
	if r.RetryIn != nil {
		v := max(*r.RetryIn, 0).Seconds()
		s = &v
	}
	return json.Marshal(struct {
		plain
		RetryInSeconds *float64 `json:"retry_in_seconds,omitempty"`
	}{plain: plain(r), RetryInSeconds: s})
}

// SnoozeRequest puts a claimed job back, due after Delay, without using an
// attempt.
type SnoozeRequest struct {
	LeaseToken string        `json:"lease_token"`
	Delay      time.Duration `json:"-"` // sent as delay_seconds
	// HandBack, when set, hands the job back unrun for this cause
	// (core.CauseLeaseUnrenewed): due now, no attempt used, an error
	// entry saying why. Delay must then be 0. A server older than the
	// field refuses it (ErrInvalidRequest).
	HandBack string `json:"-"`
}

// MarshalJSON writes the request body, with Delay as delay_seconds (or
// hand_back instead).
func (r SnoozeRequest) MarshalJSON() ([]byte, error) {
	if r.HandBack != "" {
		return json.Marshal(struct {
			LeaseToken string `json:"lease_token"`
			HandBack   string `json:"hand_back"`
		}{r.LeaseToken, r.HandBack})
	}
	return json.Marshal(struct {
		LeaseToken   string  `json:"lease_token"`
		DelaySeconds float64 `json:"delay_seconds"`
	}{r.LeaseToken, max(r.Delay, 0).Seconds()})
}

// ContinueRequest moves a claimed job on to its next step (POST
// /v1/jobs/{id}/continue), as core.Continue does in process: Kind and Args
// replace the job's, it is due at RunAt (zero = now), keeps its id and
// error history, and its attempts restart. The server checks it as the
// engine does: an invalid continuation (empty kind, args that are not a
// JSON value or over the args limit, RunAt out of range) fails the
// attempt instead.
type ContinueRequest struct {
	LeaseToken string          `json:"lease_token"`
	Kind       string          `json:"kind"`
	Args       json.RawMessage `json:"args,omitempty"`  // nil: absent, which fails the attempt as invalid
	RunAt      time.Time       `json:"run_at,omitzero"` // zero = now
}

// MarshalJSON writes the request body, RunAt to the microsecond.
func (r ContinueRequest) MarshalJSON() ([]byte, error) {
	type plain ContinueRequest
	r.RunAt = wireTime(r.RunAt)
	return json.Marshal(plain(r))
}

// wireTime is t as the API takes it: to the microsecond, which every store
// keeps (the server refuses more than six fractional digits rather than
// store a time other than the one sent).
func wireTime(t time.Time) time.Time { return t.Truncate(time.Microsecond) }

// ProgressRequest reports, for the execution LeaseToken names, its
// progress and checkpoint (POST /v1/jobs/{id}/progress). Set Percent
// (0..100, with Message of at most core.MaxProgressMessageLen bytes),
// Checkpoint (any JSON value of at most core.MaxCheckpointBytes; the JSON
// null clears it), or both.
type ProgressRequest struct {
	LeaseToken string          `json:"lease_token"`
	Percent    *float64        `json:"percent,omitempty"`
	Message    string          `json:"message,omitempty"`
	Checkpoint json.RawMessage `json:"checkpoint,omitempty"`
}

// ExtendLeaseRequest extends the lease of one claimed job. Extend 0 means
// the server's lease duration; at most 1 h.
type ExtendLeaseRequest struct {
	LeaseToken string        `json:"lease_token"`
	Extend     time.Duration `json:"-"` // sent as extend_seconds
}

// MarshalJSON writes the request body, with Extend as extend_seconds.
func (r ExtendLeaseRequest) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		LeaseToken    string   `json:"lease_token"`
		ExtendSeconds *float64 `json:"extend_seconds,omitempty"`
	}{r.LeaseToken, seconds(r.Extend)})
}

// seconds turns d into a *float64 of seconds, nil for d ≤ 0.
func seconds(d time.Duration) *float64 {
	if d <= 0 {
		return nil
	}
	v := d.Seconds()
	return &v
}

// secondsDuration turns a number of seconds into a duration.
func secondsDuration(s float64) time.Duration {
	return time.Duration(s * float64(time.Second))
}

// OutcomeType is the kind of one outcome of a batch (Client.Outcomes).
type OutcomeType string

// The outcome types of a batch, as the single calls Complete, Fail,
// Snooze and Continue.
const (
	OutcomeComplete OutcomeType = "complete"
	OutcomeFail     OutcomeType = "fail"
	OutcomeSnooze   OutcomeType = "snooze"
	OutcomeContinue OutcomeType = "continue"
)

// OutcomeRequest is one outcome of a batch (POST
// /v1/workers/{id}/outcomes): the job, its lease token, the type and the
// fields of that type, as in CompleteRequest (Result), FailRequest (Error,
// required; Trace, Action, Cause, RetryIn), SnoozeRequest (Delay) and
// ContinueRequest (NextKind, NextArgs, RunAt). Fields of another type must
// be left zero (the server refuses the item otherwise). CompleteOutcome,
// FailOutcome, SnoozeOutcome and ContinueOutcome build one from the single
// calls' requests.
type OutcomeRequest struct {
	JobID      int64
	LeaseToken string
	Type       OutcomeType
	Result     json.RawMessage // complete: any JSON value, nil for none
	Error      string          // fail: the message (required)
	Trace      string          // fail
	Action     FailAction      // fail: "" = FailRetry
	Cause      string          // fail: the attempt's cause, "" = core.CauseHandlerError
	RetryIn    *time.Duration  // fail, FailRetry: overrides the server's retry delay
	Delay      time.Duration   // snooze: due again after this long (no attempt used)
	HandBack   string          // snooze: hand back unrun for this cause (see SnoozeRequest.HandBack)
	NextKind   string          // continue: the next step's kind
	NextArgs   json.RawMessage // continue: the next step's args
	RunAt      time.Time       // continue: when the next step is due; zero = now
}

// CompleteOutcome is the batch item of Complete(ctx, jobID, r).
func CompleteOutcome(jobID int64, r CompleteRequest) OutcomeRequest {
	return OutcomeRequest{JobID: jobID, LeaseToken: r.LeaseToken, Type: OutcomeComplete, Result: r.Result}
}

// FailOutcome is the batch item of Fail(ctx, jobID, r).
func FailOutcome(jobID int64, r FailRequest) OutcomeRequest {
	return OutcomeRequest{JobID: jobID, LeaseToken: r.LeaseToken, Type: OutcomeFail, Error: r.Error, Trace: r.Trace, Action: r.Action, Cause: r.Cause, RetryIn: r.RetryIn}
}

// SnoozeOutcome is the batch item of Snooze(ctx, jobID, r).
func SnoozeOutcome(jobID int64, r SnoozeRequest) OutcomeRequest {
	return OutcomeRequest{JobID: jobID, LeaseToken: r.LeaseToken, Type: OutcomeSnooze, Delay: r.Delay, HandBack: r.HandBack}
}

// ContinueOutcome is the batch item of Continue(ctx, jobID, r).
func ContinueOutcome(jobID int64, r ContinueRequest) OutcomeRequest {
	return OutcomeRequest{JobID: jobID, LeaseToken: r.LeaseToken, Type: OutcomeContinue, NextKind: r.Kind, NextArgs: r.Args, RunAt: r.RunAt}
}

// MarshalJSON writes the item, with RetryIn as retry_in_seconds, Delay
// as delay_seconds and NextKind, NextArgs as kind, args.
func (r OutcomeRequest) MarshalJSON() ([]byte, error) {
	var retryIn *float64
	if r.RetryIn != nil {
		v := max(*r.RetryIn, 0).Seconds()
		retryIn = &v
	}
	delay := seconds(r.Delay)
	if r.HandBack != "" {
		delay = nil // a hand-back goes without a delay
	}
	return json.Marshal(struct {
		JobID          int64           `json:"job_id"`
		LeaseToken     string          `json:"lease_token"`
		Type           OutcomeType     `json:"type"`
		Result         json.RawMessage `json:"result,omitempty"`
		Error          string          `json:"error,omitempty"`
		Trace          string          `json:"trace,omitempty"`
		Action         FailAction      `json:"action,omitempty"`
		RetryInSeconds *float64        `json:"retry_in_seconds,omitempty"`
		Cause          string          `json:"cause,omitempty"`
		DelaySeconds   *float64        `json:"delay_seconds,omitempty"`
		HandBack       string          `json:"hand_back,omitempty"`
		Kind           string          `json:"kind,omitempty"`
		Args           json.RawMessage `json:"args,omitempty"`
		RunAt          time.Time       `json:"run_at,omitzero"`
	}{r.JobID, r.LeaseToken, r.Type, r.Result, r.Error, r.Trace, r.Action, retryIn, r.Cause, delay, r.HandBack, r.NextKind, r.NextArgs, wireTime(r.RunAt)})
}

// OutcomeResult is the fate of one item of Client.Outcomes. Applied items
// have the job's State after the outcome (completed, retryable, discarded,
// cancelled, scheduled or available; completed also when the server keeps
// no completed jobs). Items that did not apply changed nothing and carry
// their Problem: lease-lost (core.ErrLeaseLost), invalid-lease-token
// (ErrInvalidLeaseToken) or invalid-request (ErrInvalidRequest, for
// example a result over the server's limit).
//
// Unknown is set on an item that came back lease-lost from a request
// retried after a failure whose answer was lost: an earlier try most
// likely applied it (Problem is kept; Err returns nil).
type OutcomeResult struct {
	JobID   int64      `json:"job_id"`
	Applied bool       `json:"applied"`
	State   core.State `json:"state,omitempty"`
	Problem *Problem   `json:"problem,omitempty"`
	Unknown bool       `json:"-"`
}

// Err returns nil for an applied item or one of unknown result, else the
// item's *Problem (errors.Is maps it as for the single calls).
func (r OutcomeResult) Err() error {
	if r.Applied || r.Unknown {
		return nil
	}
	if r.Problem == nil {
		return fmt.Errorf("backlog api: outcome of job %d not applied, without a problem", r.JobID)
	}
	return r.Problem
}
