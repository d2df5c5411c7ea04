package core

import (
	"fmt"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

// DecideRescue is the engine's one decision for a running job whose holder
// is lost, used by Maintain through Store.Rescue (cause CauseLeaseExpired,
// lastSeen = the expired lease) and Store.RescueWorkers (CauseWorkerDead,
// lastSeen = the worker's last heartbeat). The lost attempt counts: the job
// is discarded when its attempts are used up or its deadline has passed at
// now, and otherwise retried at once at its own RunAt, so it keeps its place
// in the queue (claim order is priority, run_at, id) instead of going to
// the back. Either way it gets one error entry for that attempt whose Cause
// is cause and whose StartedAt is the job's AttemptedAt; when discarded,
// its DiscardReason is ReasonWorkerLost (attempts used up) or
// ReasonDeadline (attempts left but the deadline passed). The outcome is fenced like any other (WorkerID, ClaimSeq).
func DecideRescue(j *Job, cause string, lastSeen, now time.Time) contract.Outcome {
	now = contract.UTC(now)
	what := "lease expired at "
	if cause == CauseWorkerDead {
		what = "no heartbeat since "
	}
	o := contract.Outcome{
		JobID: j.ID, WorkerID: j.WorkerID, ClaimSeq: j.ClaimSeq, Attempt: j.Attempt, At: now,
		Error: &AttemptError{Attempt: j.Attempt, At: now, Cause: cause, StartedAt: contract.UTC(j.AttemptedAt),
			Error: fmt.Sprintf("worker %s lost: %s%s", j.WorkerID, what, contract.UTC(lastSeen).Format(time.RFC3339Nano))},
	}
	if j.Attempt >= j.MaxAttempts || (!j.Deadline.IsZero() && j.Deadline.Before(now)) {
		o.Kind = contract.OutcomeDiscard
		o.Error.DiscardReason = ReasonWorkerLost
		if j.Attempt < j.MaxAttempts {
			o.Error.DiscardReason = ReasonDeadline
		}
		return o
	}
	o.Kind, o.RunAt = contract.OutcomeRetry, contract.UTC(j.RunAt)
	if o.RunAt.After(now) || o.RunAt.IsZero() {
		o.RunAt = now
	}
	return o
}

// rescueFunc binds DecideRescue to a cause and a time for a Store call.
func rescueFunc(cause string, now time.Time) contract.RescueFunc {
	return func(j *Job, lastSeen time.Time) contract.Outcome { return DecideRescue(j, cause, lastSeen, now) }
}

// HandBack is the outcome that gives a running job back unrun: the attempt
// its claim used is returned (an OutcomeSnooze), it is due again at its own
// RunAt so it keeps its place in the queue, and its history gets an entry
// whose Cause is cause (CauseClaimLost, CauseLeaseUnrenewed,
// CauseUndeliverable). Fenced by the job's WorkerID and ClaimSeq.
func HandBack(j *Job, cause string, now time.Time) contract.Outcome {
	now = contract.UTC(now)
	msg := "handed back unrun: " + cause
	switch cause {
	case CauseClaimLost:
		msg = fmt.Sprintf("worker %s never received this claim (its reply was lost); handed back unrun", j.WorkerID)
	case CauseUndeliverable:
		msg = fmt.Sprintf("claimed for worker %s but could not be sent to it (a stored value JSON cannot carry); handed back unrun", j.WorkerID)
	case CauseLeaseUnrenewed:
		msg = fmt.Sprintf("worker %s could not renew the lease (store unreachable); handler stopped and job handed back", j.WorkerID)
	}
	runAt := contract.UTC(j.RunAt)
	if runAt.IsZero() || runAt.After(now) {
		runAt = now
	}
	return contract.Outcome{
		JobID: j.ID, WorkerID: j.WorkerID, ClaimSeq: j.ClaimSeq, Attempt: j.Attempt, At: now,
		Kind: contract.OutcomeSnooze, RunAt: runAt,
		Error: &AttemptError{Attempt: j.Attempt, At: now, Error: msg, Cause: cause, StartedAt: contract.UTC(j.AttemptedAt)},
	}
}
