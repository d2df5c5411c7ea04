package client

import (
	"context"
	"log/slog"
	"time"

	"github.com/backlogq/backlog/core"
)

// appliedEarlier reads job back after an outcome of its execution was
// refused as lease-lost, and reports whether the job shows that outcome
// applied by an earlier try whose answer was lost (the server committed
// it, then the connection or the server died before it answered): the job
// has left running but still names this worker and this claim
// (Job.ClaimSeq), its state is one the outcome leads to, and its last
// error entry is not a rescue's (a rescue also leaves worker and claim in
// place). It is the in-process completer's reasoning (core's completer,
// appliedBefore) for what a remote worker can see of the job. A job that
// cannot be read, a server that does not send claim_seq, or a job deleted
// since, report false: the outcome is then taken as not applied.
func (w *Worker) appliedEarlier(job *Job, o outcome) bool {
	if job.ClaimSeq == 0 {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	j, err := w.c.GetJob(ctx, job.ID)
	if err != nil || j.State == core.StateRunning || j.WorkerID != w.cfg.ID || j.ClaimSeq != job.ClaimSeq {
		return false
	}
	if n := len(j.Errors); n > 0 {
		if c := j.Errors[n-1].Cause; j.Errors[n-1].Attempt == job.Attempt && (c == core.CauseLeaseExpired || c == core.CauseWorkerDead) {
			return false
		}
	}
	switch o.kind {
	case "complete":
		return j.State == core.StateCompleted
	case "snooze", "continue":
		return j.State == core.StateScheduled || j.State == core.StateAvailable
	}
	switch o.fail.Action {
	case FailCancel:
		return j.State == core.StateCancelled
	case FailDiscard:
		return j.State == core.StateDiscarded
	}
	return j.State == core.StateRetryable || j.State == core.StateDiscarded // discarded: its last attempt
}

// logLeaseLost says what became of an outcome refused as lease-lost, once
// the job was read back: applied by an earlier try (Info), or not applied
// (Warn).
func (w *Worker) logLeaseLost(log *slog.Logger, job *Job, o outcome) {
	if w.appliedEarlier(job, o) {
		log.Info("backlog worker: outcome applied by an earlier try whose answer was lost")
		return
	}
	log.Warn("backlog worker: lease lost; the outcome did not apply (the job was rescued, cancelled or finished elsewhere)")
}
