package core

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

// RemoteWorkers is the engine's side of the remote-worker protocol: the
// operations a transport (the HTTP API of adapters/httpapi) performs for
// workers that run outside this process, named by their worker id. It
// claims for a named worker, extends that worker's leases, decides and
// applies the outcomes the worker reports, hands jobs back unrun, and
// keeps the worker's registry record; observers hear the same events as
// for the engine's own executions, and a failure is retried by the same
// per-kind policy (Client.RetryPolicy) and decided by the same rules
// (Decide). The transport keeps authentication, lease tokens and request
// validation. Get one with Client.RemoteWorkers; it is safe for
// concurrent use.
type RemoteWorkers struct{ c *Client }

// RemoteWorkers returns the engine's remote-worker operations over this
// client's store and configuration (lease duration, retry policies,
// encryption at rest, retention, observers).
func (c *Client) RemoteWorkers() *RemoteWorkers { return &RemoteWorkers{c: c} }

// Register writes w's registry record (Store.RegisterWorker): a
// registration, or with a new HeartbeatAt a heartbeat. Times are stored
// in UTC.
func (r *RemoteWorkers) Register(ctx context.Context, w WorkerInfo) error {
	defer r.c.ForgetWorkerKinds() // the kinds w announces count at once
	return r.c.store.RegisterWorker(ctx, w)
}

// Deregister removes worker id's registry record; a missing record is not
// an error.
func (r *RemoteWorkers) Deregister(ctx context.Context, id string) error {
	defer r.c.ForgetWorkerKinds()
	return r.c.store.DeregisterWorker(ctx, id)
}

// Worker returns worker id's registry record, or an error wrapping
// ErrNotFound.
func (r *RemoteWorkers) Worker(ctx context.Context, id string) (WorkerInfo, error) {
	return r.c.store.Worker(ctx, id)
}

// Claim claims up to limit jobs for worker w from queues, read in order
// (the next queue only while fewer than limit were claimed), each leased
// for the client's Config.LeaseDuration from the clock's now and
// restricted to w.Tags (capability routing). A paused queue is skipped.
// On an error it returns the jobs claimed before it with the error; the
// caller owns them (deliver them, or give them back with HandBack).
// Nothing is reported to observers: Delivered does once the worker has
// them.
func (r *RemoteWorkers) Claim(ctx context.Context, w WorkerInfo, queues []string, limit int) ([]*Job, error) {
	var out []*Job
	for _, q := range queues {
		if limit-len(out) <= 0 {
			break
		}
		now := r.c.clock.Now()
		jobs, err := r.c.store.Claim(ctx, contract.ClaimParams{
			Queue: q, WorkerID: w.ID, Limit: limit - len(out),
			Now: now, LeaseUntil: now.Add(r.c.cfg.LeaseDuration), Tags: w.Tags,
		})
		if errors.Is(err, ErrQueuePaused) {
			continue
		}
		out = append(out, jobs...)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// Delivered reports claimed job j, handed to its worker at now, to
// observers (EventJobClaimed with its queue wait), as the engine reports
// the jobs it starts.
func (r *RemoteWorkers) Delivered(j *Job, now time.Time) { r.c.emit(claimedEvent(j, now)) }

// claimedEvent is the EventJobClaimed of j starting at now: its queue
// wait runs from when it became due (its RunAt, or its creation when
// later).
func claimedEvent(j *Job, now time.Time) Event {
	due := j.RunAt
	if j.CreatedAt.After(due) {
		due = j.CreatedAt
	}
	return Event{Kind: EventJobClaimed, At: now, Queue: j.Queue, Job: j, QueueWait: max(now.Sub(due), 0)}
}

// Extend sets the lease of each of leases that worker workerID still
// holds (fenced by job id and ClaimSeq) to until, and returns how many
// it extended; the others are no longer that worker's (rescued,
// finished, cancelled, deleted). until is stored in UTC.
func (r *RemoteWorkers) Extend(ctx context.Context, workerID string, leases []contract.Lease, until time.Time) (int, error) {
	return r.c.store.ExtendLeases(ctx, workerID, leases, until)
}

// RecordProgress writes u (the progress and checkpoint of the execution
// its JobID, WorkerID and ClaimSeq name) with the store's
// contract.ProgressRecorder, fenced like an outcome: an error wrapping
// ErrLeaseLost when that execution no longer holds the job,
// ErrInvalidArgument for values out of their bounds, ErrUnsupported when
// the store cannot record progress.
func (r *RemoteWorkers) RecordProgress(ctx context.Context, u contract.ProgressUpdate) error {
	rec, ok := r.c.store.(contract.ProgressRecorder)
	if !ok {
		return fmt.Errorf("backlog: record progress: %w", ErrUnsupported)
	}
	return rec.RecordProgress(ctx, u)
}

// Report is one attempt's end as a remote worker reported it.
type Report struct {
	// Job is the job as the transport knows it: at least ID, WorkerID,
	// ClaimSeq and Attempt (the fence of the execution the report ends).
	// A failure or continuation needs the job as read (MaxAttempts,
	// Deadline, Kind for its retry policy); events carry what it holds
	// (Queue, Kind, AttemptedAt for the duration).
	Job *Job
	// Verdict is what the worker's handler asked for (see RemoteFailure
	// for a failure the worker reports as text).
	Verdict Verdict
	// HandBack, when set, gives the job back unrun for this cause
	// instead (core.HandBack: no attempt used, an entry in its history);
	// Verdict is then ignored.
	HandBack string
}

// ReportResult is the fate of one Report.
type ReportResult struct {
	// Applied is false when the execution no longer held the job (its
	// fence failed: rescued, re-claimed, cancelled, finished or deleted);
	// nothing changed then.
	Applied bool
	// Decision is the outcome decided for the report, as written (sealed
	// under encryption at rest).
	Decision Decision
}

// Report decides each report's outcome as the engine decides its own
// (Decide, under the kind's Client.RetryPolicy, the client's
// MaxArgsBytes and completed-job retention; HandBack for a hand-back),
// seals it under encryption at rest (a hand-back's entry stays in clear,
// as the engine's own), applies them all with one
// Store.Finish at now, and tells observers: the decision's event for
// each applied outcome (its Duration from the job's AttemptedAt when
// known, its Cause from the error entry), EventLeaseLost for each that
// did not apply. It returns one result per report, in order; an error
// (the store failed) means nothing was reported to observers and the
// caller cannot know what applied.
func (r *RemoteWorkers) Report(ctx context.Context, now time.Time, reports []Report) ([]ReportResult, error) {
	c := r.c
	now = contract.UTC(now)
	outs := make([]contract.Outcome, len(reports))
	results := make([]ReportResult, len(reports))
	for i, rep := range reports {
		var d Decision
		if rep.HandBack != "" {
			// Stored in clear, as the engine's own hand-backs are.
			d = Decision{Outcome: HandBack(rep.Job, rep.HandBack, now), Event: EventJobSnoozed}
		} else {
			d = Decide(rep.Job, rep.Verdict, c.decidePolicy(rep.Job.Kind, now))
			c.cfg.Encryption.SealOutcome(&d.Outcome, rep.Job.Kind)
		}
		outs[i] = d.Outcome
		results[i].Decision = d
	}
	if len(outs) == 0 {
		return results, nil
	}
	res, err := c.store.Finish(ctx, outs)
	if err != nil {
		return nil, err
	}
	if len(res) != len(outs) {
		return nil, fmt.Errorf("backlog: store returned %d finish results for %d outcomes", len(res), len(outs))
	}
	for i, rep := range reports {
		j := rep.Job
		if !res[i].Applied {
			c.emit(Event{Kind: EventLeaseLost, At: now, Queue: j.Queue, Job: j})
			continue
		}
		results[i].Applied = true
		d := results[i].Decision
		c.jobFinished(&d.Outcome, j) // wakes Wait's callers of a final outcome (wait.go)
		var dur time.Duration
		if !j.AttemptedAt.IsZero() {
			dur = max(d.Outcome.At.Sub(j.AttemptedAt), 0)
		}
		var cause string
		if d.Outcome.Error != nil {
			cause = d.Outcome.Error.Cause
		}
		c.emit(Event{Kind: d.Event, At: d.Outcome.At, Queue: j.Queue, Job: j, Err: d.Err, Reason: d.Reason, Duration: dur, Cause: cause})
	}
	return results, nil
}

// HandBack gives running jobs back unrun at now, fenced by each job's
// WorkerID and ClaimSeq, using no attempt, and returns which applied. With
// a cause (CauseClaimLost, CauseUndeliverable, …) each is core.HandBack's
// outcome, due again after the given delay (0: at its own RunAt, keeping
// its place), and each applied one is reported to observers as
// EventJobSnoozed with that cause. Without a cause (jobs claimed for a
// worker that went away before it received them) each is due again at
// now plus delay with no entry in its history and no event: nothing of
// the claim reached anyone.
func (r *RemoteWorkers) HandBack(ctx context.Context, jobs []*Job, cause string, delay time.Duration, now time.Time) ([]bool, error) {
	c := r.c
	now = contract.UTC(now)
	outs := make([]contract.Outcome, len(jobs))
	for i, j := range jobs {
		if cause == "" {
			outs[i] = contract.Outcome{JobID: j.ID, WorkerID: j.WorkerID, ClaimSeq: j.ClaimSeq, Attempt: j.Attempt, Kind: contract.OutcomeSnooze, At: now, RunAt: ClampTime(now.Add(max(delay, 0)))}
			continue
		}
		// Like the engine's own hand-backs, the entry (the server's
		// words, no data of the job) is stored in clear.
		outs[i] = HandBack(j, cause, now)
		if delay > 0 {
			outs[i].RunAt = ClampTime(now.Add(delay))
		}
	}
	if len(outs) == 0 {
		return nil, nil
	}
	res, err := c.store.Finish(ctx, outs)
	if err != nil {
		return nil, err
	}
	if len(res) != len(outs) {
		return nil, fmt.Errorf("backlog: store returned %d finish results for %d outcomes", len(res), len(outs))
	}
	applied := make([]bool, len(jobs))
	for i, fr := range res {
		applied[i] = fr.Applied
		if fr.Applied && cause != "" {
			j := jobs[i]
			c.emit(Event{Kind: EventJobSnoozed, At: now, Queue: j.Queue, Job: j, Cause: cause})
		}
	}
	return applied, nil
}

// RemoteFailure is the verdict of a failed attempt that a remote worker
// reported as text: msg and trace become the attempt's error entry as
// they are (bounded), with cause as its Cause ("" means
// CauseHandlerError; CauseDeadline discards the job for its deadline, as
// the engine does when an attempt ends by the job's deadline, whatever
// this node's clock says). kind is OutcomeRetry (retried by the kind's
// policy, or after retryIn when set), OutcomeDiscard or OutcomeCancel.
func RemoteFailure(msg, trace, cause string, kind contract.OutcomeKind, retryIn *time.Duration) Verdict {
	if cause == "" {
		cause = CauseHandlerError
	}
	v := Verdict{Kind: kind, Err: &reportedError{msg: msg, trace: trace, cause: cause}}
	if kind == contract.OutcomeRetry {
		v.RetryIn = retryIn
	}
	return v
}

// reportedError is a failure as a remote worker reported it; CauseOf
// returns its cause and it is errDeadline when its cause is
// CauseDeadline.
type reportedError struct{ msg, trace, cause string }

func (e *reportedError) Error() string      { return e.msg }
func (e *reportedError) ErrorTrace() string { return e.trace }
func (e *reportedError) errorCause() string { return e.cause }
func (e *reportedError) Is(target error) bool {
	return target == errDeadline && e.cause == CauseDeadline
}
