// Package apitypes holds the job as backlog's HTTP API (v1) shows it: the
// one Go type that the server (adapters/httpapi) encodes, its Go client
// (adapters/httpapi/client) decodes and the backlog command prints with
// -o json, with the one conversion from a stored core.Job. A field added
// here appears in all three. It imports only core and the standard
// library, so the client does not pull in the server.
package apitypes

import (
	"encoding/base64"
	"encoding/json"
	"time"
	"unicode/utf8"

	"github.com/backlogq/backlog/core"
)

// Job is a job as the API shows it (the Job schema of openapi.json).
// Times are UTC; unset optional fields are omitted, and a zero time
// decoded means the field was absent.
//
// The job holding the unique key of a duplicate submission whose row is
// gone carries only id, queue, kind, args ({}), attempt and unique_key
// (HeldJob in openapi.json): its zero priority, state, max_attempts and
// times are omitted.
type Job struct {
	ID    int64  `json:"id"`
	Queue string `json:"queue"`
	Kind  string `json:"kind"`
	// Args is a JSON value: the stored args, {} when there are none, or a
	// JSON string of their bytes when they are not JSON (see FromCore).
	Args     json.RawMessage `json:"args"`
	Priority int             `json:"priority,omitzero"` // 1 (first) … 10 (last)
	State    core.State      `json:"state,omitzero"`
	Attempt  int             `json:"attempt"` // attempts started so far
	// ClaimSeq counts the job's claims (core.Job.ClaimSeq): it names one
	// execution, where Attempt does not (a job handed back unrun, say
	// after its worker could not renew its lease, runs again at the same
	// attempt). An idempotent handler keys its effects by (ID, ClaimSeq)
	// to tell a re-run from the same execution's retried call, or by ID
	// alone to do its work once across executions. 0 (omitted) before the
	// first claim, and from a server that predates it.
	ClaimSeq    int64     `json:"claim_seq,omitzero"`
	MaxAttempts int       `json:"max_attempts,omitzero"`
	RunAt       time.Time `json:"run_at,omitzero"`
	Deadline    time.Time `json:"deadline,omitzero"`
	UniqueKey   string    `json:"unique_key,omitempty"`
	// PartitionKey is the job's partition of its queue ("" = none),
	// counted by the queue's per-partition limit.
	PartitionKey string              `json:"partition_key,omitempty"`
	Tags         []string            `json:"tags,omitempty"`
	Metadata     map[string]string   `json:"metadata,omitempty"`
	Errors       []core.AttemptError `json:"errors,omitempty"` // oldest first
	// Result is the stored result as a JSON value: the result itself when
	// it is JSON, else a JSON string of its text (see FromCore); nil when
	// there is none or when it is not UTF-8 (ResultBase64).
	Result json.RawMessage `json:"result,omitempty"`
	// Archived is true for a job read from the archive of finished jobs
	// (core.Retention.Archive): GET /v1/jobs?archived=true, or GET
	// /v1/jobs/{id} of a job no longer in the jobs. FromCore leaves it
	// false; the server sets it.
	Archived bool `json:"archived,omitempty"`
	// ResultBase64 holds a stored result that is not valid UTF-8, which
	// no JSON string can carry: its exact bytes, standard base64 with
	// padding. Result is then empty.
	ResultBase64 string    `json:"result_base64,omitempty"`
	CreatedAt    time.Time `json:"created_at,omitzero"`
	AttemptedAt  time.Time `json:"attempted_at,omitzero"`
	FinishedAt   time.Time `json:"finished_at,omitzero"`
	WorkerID     string    `json:"worker_id,omitempty"`
	LeaseUntil   time.Time `json:"lease_until,omitzero"`
	// Progress is what the job's latest attempt reported of how far it
	// got (percent 0..100, message, at); absent when it reported none.
	// Every claim clears it.
	Progress *core.Progress `json:"progress,omitempty"`
	// Checkpoint is the JSON an attempt saved for the attempts after it
	// (at most core.MaxCheckpointBytes); absent when there is none.
	Checkpoint json.RawMessage `json:"checkpoint,omitempty"`
	// WorkflowID, Step, DependsOn, WaitingFor and OnDependencyFailure
	// are the job's place in a workflow and its dependencies
	// (core.Job's; docs/workflows.md); absent when it has none.
	WorkflowID          int64                 `json:"workflow_id,omitempty"`
	Step                string                `json:"step,omitempty"`
	DependsOn           []int64               `json:"depends_on,omitempty"`
	WaitingFor          int                   `json:"waiting_for,omitempty"`
	OnDependencyFailure core.DependencyPolicy `json:"on_dependency_failure,omitempty"`
	// DependencyEnds counts the job's settled dependencies by their end
	// (completed, cancelled, discarded): how the batch went, for a
	// batch's callback (core.Job.DependencyEnds); absent when none
	// settled.
	DependencyEnds core.DependencyEnds `json:"dependency_ends,omitzero"`
	// LeaseToken is set only on jobs returned by a claim: it names that
	// one claim of the job (a later claim of the same job, even at the
	// same attempt after a snooze, gets another token). A remote worker
	// presents it with every outcome of that execution and names it in
	// every heartbeat until the outcome is delivered. FromCore leaves it
	// empty.
	LeaseToken string `json:"lease_token,omitempty"`
}

// FromCore converts a stored job to its API form; nil stays nil. Times
// become UTC (zero stays zero). Args and Result are copied as they are
// when they are one JSON value in UTF-8; otherwise they become a JSON
// string of their bytes (args' bytes that are not UTF-8 read as U+FFFD:
// args are JSON when stored), and empty args become {}. A result that is
// not UTF-8 goes to ResultBase64 instead, byte for byte. j is not modified; the slices and map of the
// answer may share j's.
func FromCore(j *core.Job) *Job {
	if j == nil {
		return nil
	}
	out := &Job{
		ID: j.ID, Queue: j.Queue, Kind: j.Kind, Args: j.Args, Priority: j.Priority, State: j.State,
		Attempt: j.Attempt, ClaimSeq: j.ClaimSeq, MaxAttempts: j.MaxAttempts, RunAt: utc(j.RunAt), Deadline: utc(j.Deadline),
		UniqueKey: j.UniqueKey, PartitionKey: j.PartitionKey, Tags: j.Tags, Metadata: j.Metadata,
		CreatedAt: utc(j.CreatedAt), AttemptedAt: utc(j.AttemptedAt), FinishedAt: utc(j.FinishedAt),
		WorkerID: j.WorkerID, LeaseUntil: utc(j.LeaseUntil), Checkpoint: j.Checkpoint,
		WorkflowID: j.WorkflowID, Step: j.Step, DependsOn: j.DependsOn, WaitingFor: j.WaitingFor, OnDependencyFailure: j.OnDependencyFailure,
		DependencyEnds: j.DependencyEnds,
	}
	if j.Progress != nil {
		p := *j.Progress
		p.At = utc(p.At)
		out.Progress = &p
	}
	if len(j.Checkpoint) > 0 && !validJSON(j.Checkpoint) {
		out.Checkpoint, _ = json.Marshal(string(j.Checkpoint))
	}
	switch {
	case len(j.Args) == 0:
		out.Args = json.RawMessage("{}")
	case !validJSON(j.Args):
		out.Args, _ = json.Marshal(string(j.Args))
	}
	switch {
	case len(j.Result) == 0:
	case validJSON(j.Result):
		out.Result = j.Result
	case utf8.Valid(j.Result):
		out.Result, _ = json.Marshal(string(j.Result))
	default:
		out.ResultBase64 = base64.StdEncoding.EncodeToString(j.Result)
	}
	if len(j.Errors) > 0 {
		out.Errors = make([]core.AttemptError, len(j.Errors))
		for i, e := range j.Errors {
			e.At, e.StartedAt = utc(e.At), utc(e.StartedAt)
			out.Errors[i] = e
		}
	}
	return out
}

// FromCoreAll converts jobs with FromCore; the answer is never nil (an
// empty list encodes as []).
func FromCoreAll(jobs []*core.Job) []*Job {
	out := make([]*Job, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, FromCore(j))
	}
	return out
}

// CoreJob converts j to a *core.Job (for code shared with in-process
// handlers). Result is copied as its JSON bytes (a result the server
// turned into a JSON string stays that string), or decoded from
// ResultBase64; LeaseToken is dropped.
func (j *Job) CoreJob() *core.Job {
	result := []byte(j.Result)
	if j.ResultBase64 != "" {
		if b, err := base64.StdEncoding.DecodeString(j.ResultBase64); err == nil {
			result = b
		}
	}
	return &core.Job{
		ID: j.ID, Queue: j.Queue, Kind: j.Kind, Args: j.Args, Priority: j.Priority,
		State: j.State, Attempt: j.Attempt, ClaimSeq: j.ClaimSeq, MaxAttempts: j.MaxAttempts, RunAt: j.RunAt,
		Deadline: j.Deadline, UniqueKey: j.UniqueKey, PartitionKey: j.PartitionKey, Tags: j.Tags, Metadata: j.Metadata,
		Errors: j.Errors, Result: result, CreatedAt: j.CreatedAt,
		AttemptedAt: j.AttemptedAt, FinishedAt: j.FinishedAt, WorkerID: j.WorkerID,
		LeaseUntil: j.LeaseUntil, Progress: j.Progress, Checkpoint: j.Checkpoint,
		WorkflowID: j.WorkflowID, Step: j.Step, DependsOn: j.DependsOn, WaitingFor: j.WaitingFor, OnDependencyFailure: j.OnDependencyFailure,
		DependencyEnds: j.DependencyEnds,
	}
}

// validJSON reports whether b is one JSON value in UTF-8 (json.Valid alone
// lets invalid bytes inside strings through): only such bytes are copied
// into a job as they are.
func validJSON(b []byte) bool { return json.Valid(b) && utf8.Valid(b) }

func utc(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}
