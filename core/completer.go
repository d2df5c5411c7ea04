package core

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

// pendingOutcome is an outcome waiting to be written, with what observers
// are told once it applies.
type pendingOutcome struct {
	o      contract.Outcome
	job    *Job
	exec   *execution // untracked once the outcome is written
	cause  string     // Event.Cause of hand-backs
	dur    time.Duration
	ev     EventKind
	reason string
	err    error
	quiet  bool // completed in the handler's transaction: a failed fence is expected
	// committed: o itself was committed in the handler's transaction
	// (HandleTx); the fenced write here then finds the job moved on and
	// counts as applied.
	committed bool
}

// completer gathers outcomes for CompleterInterval (or until
// CompleterMaxBatch) and writes each batch with one Store.Finish call,
// retrying failed writes with backoff: an outcome is dropped only if the
// client stops while the store stays unreachable, and then its job comes
// back through lease expiry and rescue (at-least-once).
type completer struct {
	c    *Client
	in   chan pendingOutcome
	done chan struct{}
	// stopCtx is cancelled when Stop gives up on an unreachable store.
	stopCtx    context.Context
	cancelStop context.CancelFunc
}

func newCompleter(c *Client) *completer {
	ctx, cancel := context.WithCancel(context.Background())
	return &completer{
		c:  c,
		in: make(chan pendingOutcome, 4*c.cfg.CompleterMaxBatch),
		// done is closed when the loop has written everything.
		done:    make(chan struct{}),
		stopCtx: ctx, cancelStop: cancel,
	}
}

func (q *completer) start() { go q.loop() }

// add queues one outcome; it blocks when the store falls far behind
// (back-pressure on executions, and through them on claims).
func (q *completer) add(p pendingOutcome) { q.in <- p }

// stop closes the input (all executions have returned), waits up to 30 s
// for the rest to be written, then abandons them.
func (q *completer) stop() {
	close(q.in)
	select {
	case <-q.done:
	case <-time.After(30 * time.Second):
		q.c.log.Error("backlog: completer could not write outcomes before stopping; their jobs return after lease expiry")
		q.cancelStop()
		<-q.done
	}
	q.cancelStop()
}

func (q *completer) loop() {
	defer close(q.done)
	max := q.c.cfg.CompleterMaxBatch
	batch := make([]pendingOutcome, 0, max)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		p, ok := <-q.in
		if !ok {
			return
		}
		batch = append(batch[:0], p)
		timer.Reset(q.c.cfg.CompleterInterval)
		open := true
	gather:
		for len(batch) < max {
			select {
			case p, ok := <-q.in:
				if !ok {
					open = false
					break gather
				}
				batch = append(batch, p)
			case <-timer.C:
				break gather
			}
		}
		timer.Stop()
		q.write(batch)
		if !open {
			return
		}
	}
}

// write finishes one batch, retrying until it succeeds or stop gives up,
// and reports which outcomes applied (nil when it gave up).
func (q *completer) write(batch []pendingOutcome) (applied []bool) {
	c := q.c
	outs := make([]contract.Outcome, len(batch))
	for i := range batch {
		outs[i] = batch[i].o
	}
	var res []contract.FinishResult
	failures := 0
	for {
		var err error
		res, err = c.store.Finish(q.stopCtx, outs)
		if err == nil && len(res) == len(outs) {
			c.reach.observe(c, nil)
			break
		}
		if err == nil {
			err = errShortFinish
		}
		failures++
		if c.reach.observe(c, err) {
			c.log.Error("backlog: finish failed; retrying", "jobs", len(outs), "err", err, "failures", failures)
		} else {
			c.log.Debug("backlog: finish failed; retrying", "jobs", len(outs), "err", err, "failures", failures)
		}
		c.emit(Event{Kind: EventStoreError, At: c.clock.Now(), Err: err, Count: len(outs)})
		// Retry every second at most: after an outage the outcomes must
		// land before other nodes' rescue grace ends.
		if !sleepCtx(q.stopCtx, retryDelay(failures, time.Second)) {
			q.untrackAll(batch)
			return nil
		}
	}
	defer q.untrackAll(batch)
	applied = make([]bool, len(batch))
	for i, r := range res {
		p := batch[i]
		if !r.Applied && failures > 0 && q.appliedBefore(&p.o) {
			// An earlier try committed but its reply was lost.
			r.Applied = true
		}
		r.Applied = r.Applied || p.committed
		applied[i] = r.Applied
		if !r.Applied {
			if !p.quiet {
				c.log.Warn("backlog: lease lost; outcome not applied", "job_id", p.o.JobID, "kind", p.job.Kind, "attempt", p.o.Attempt, "outcome", p.o.Kind)
				c.emit(Event{Kind: EventLeaseLost, At: p.o.At, Queue: p.job.Queue, Job: p.job})
			}
			continue
		}
		switch p.o.Kind {
		case contract.OutcomeRetry, contract.OutcomeSnooze, contract.OutcomeContinue:
			c.wakeAt(p.job.Queue, p.o.RunAt)
		}
		c.jobFinished(&p.o, p.job)
		if p.err != nil {
			// A retry is routine; a discard dead-letters the job and
			// wants a look.
			lvl := slog.LevelInfo
			if p.o.Kind == contract.OutcomeDiscard {
				lvl = slog.LevelWarn
			}
			var errAttr any = p.err
			if enc := c.cfg.Encryption; enc != nil && enc.Errors {
				// Error text is sealed at rest: keep it out of the logs too.
				errAttr = "(sealed)"
			}
			c.log.Log(context.Background(), lvl, "backlog: job attempt failed", "job_id", p.o.JobID, "kind", p.job.Kind, "attempt", p.o.Attempt, "outcome", p.o.Kind, "err", errAttr)
		}
		cause := p.cause
		if cause == "" && p.o.Error != nil {
			cause = p.o.Error.Cause
		}
		c.emit(Event{Kind: p.ev, At: p.o.At, Queue: p.job.Queue, Job: p.job, Err: p.err, Reason: p.reason, Duration: p.dur, Cause: cause})
	}
	return applied
}

// untrackAll forgets the executions of a written (or abandoned) batch.
func (q *completer) untrackAll(batch []pendingOutcome) {
	for i := range batch {
		if e := batch[i].exec; e != nil {
			q.c.untrack(e)
		}
	}
}

// appliedBefore reports whether o, whose fence failed on a retry, was in
// fact applied by an earlier try whose reply was lost (an ambiguous
// commit): the job has left running but still names this execution's
// worker and claim, or it was deleted by a completion with Delete.
func (q *completer) appliedBefore(o *contract.Outcome) bool {
	j, err := q.c.store.Get(q.stopCtx, o.JobID)
	if errors.Is(err, ErrNotFound) {
		return o.Kind == contract.OutcomeComplete && o.Delete
	}
	if err != nil {
		return false
	}
	if j.State == StateRunning || j.WorkerID != o.WorkerID || j.ClaimSeq != o.ClaimSeq {
		return false
	}
	// A rescue of this execution also leaves worker and claim in place:
	// tell it apart by the state and the error entry this outcome wrote.
	switch o.Kind {
	case contract.OutcomeComplete:
		return j.State == StateCompleted
	case contract.OutcomeCancel:
		if j.State != StateCancelled {
			return false
		}
	case contract.OutcomeDiscard:
		if j.State != StateDiscarded {
			return false
		}
	case contract.OutcomeRetry:
		if j.State != StateRetryable {
			return false
		}
	case contract.OutcomeSnooze, contract.OutcomeContinue:
		if j.State != StateScheduled && j.State != StateAvailable {
			return false
		}
	}
	if o.Error == nil {
		return true
	}
	return len(j.Errors) > 0 && j.Errors[len(j.Errors)-1].Error == o.Error.Error && j.Errors[len(j.Errors)-1].Cause == o.Error.Cause
}

var errShortFinish = errorString("store returned fewer finish results than outcomes")

type errorString string

func (e errorString) Error() string { return string(e) }
