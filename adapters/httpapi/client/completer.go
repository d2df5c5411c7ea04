package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backlogq/backlog/core"
)

// Limits of a Worker's outcome batches.
const (
	// DefaultOutcomeBatchWait is how long a Worker gathers finished jobs'
	// outcomes before sending them in one request.
	DefaultOutcomeBatchWait = 2 * time.Millisecond
	// outcomeBatchBytes bounds the estimated body of one batch, well
	// under the server's default request limit of 8 MiB.
	outcomeBatchBytes = 4 << 20
	// internalFailuresBeforeSplit is how many 500 answers in a row a
	// batch gets before its outcomes are sent one by one.
	internalFailuresBeforeSplit = 3
)

// pendingOutcome is a finished job's outcome waiting for delivery.
type pendingOutcome struct {
	job  *Job
	o    outcome
	done chan struct{} // closed once delivered, found lost, or given up
}

// size estimates the bytes of p in a batch's body.
func (p *pendingOutcome) size() int {
	return 160 + len(p.job.LeaseToken) + len(p.o.complete.Result) + len(p.o.fail.Error) + len(p.o.fail.Trace) + len(p.o.cont.Kind) + len(p.o.cont.Args)
}

// request is p as a batch item.
func (p *pendingOutcome) request() OutcomeRequest {
	switch p.o.kind {
	case "complete":
		return CompleteOutcome(p.job.ID, p.o.complete)
	case "fail":
		return FailOutcome(p.job.ID, p.o.fail)
	case "continue":
		return ContinueOutcome(p.job.ID, p.o.cont)
	}
	return SnoozeOutcome(p.job.ID, p.o.snooze)
}

// completer delivers a Worker's outcomes in batches: it gathers them for
// up to OutcomeBatchWait (or 1000, or about 4 MiB) and sends one Outcomes
// request, retrying with backoff while the server is unreachable. Against
// a server without the batch endpoint it falls back to one request per
// outcome.
type completer struct {
	w    *Worker
	wait time.Duration
	in   chan *pendingOutcome

	mu     sync.RWMutex // add holds it shared; close exclusively
	closed bool
	quit   chan struct{}
	done   chan struct{}

	hurry     chan struct{} // closed by flush: stop gathering, send at once
	hurryOnce sync.Once

	single atomic.Bool // the server has no batch endpoint
}

func newCompleter(w *Worker, wait time.Duration) *completer {
	return &completer{
		w: w, wait: wait, in: make(chan *pendingOutcome, 2*MaxOutcomes),
		quit: make(chan struct{}), done: make(chan struct{}), hurry: make(chan struct{}),
	}
}

// flush makes the loop send what it has at once from now on, without
// waiting for more (the worker is shutting down).
func (c *completer) flush() { c.hurryOnce.Do(func() { close(c.hurry) }) }

// gathering reports whether the loop should wait for more outcomes.
func (c *completer) gathering() bool {
	select {
	case <-c.hurry:
		return false
	default:
		return c.wait > 0
	}
}

// start runs the delivery loop with ctx (delivery gives up when it ends).
func (c *completer) start(ctx context.Context) { go c.loop(ctx) }

// add queues job's outcome and returns it, or nil when the completer was
// closed (the outcome is not delivered; the job comes back when its lease
// ends). It blocks while the queue is full: the server falls far behind,
// and the job's slot stays taken (back-pressure on claims).
func (c *completer) add(job *Job, o outcome) *pendingOutcome {
	p := &pendingOutcome{job: job, o: o, done: make(chan struct{})}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return nil
	}
	c.in <- p
	return p
}

// close stops taking outcomes, gives up those still queued (there are none
// unless the shutdown gave up on delivery) and waits for the loop to end.
func (c *completer) close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	close(c.quit)
	<-c.done
}

func (c *completer) loop(ctx context.Context) {
	defer close(c.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var next []*pendingOutcome // carried over to the next batch
	for {
		batch := next
		next = nil
		if len(batch) == 0 {
			select {
			case p := <-c.in:
				batch = append(batch, p)
			case <-c.quit:
				c.abandon()
				return
			}
		}
		size := 0
		for _, p := range batch {
			size += p.size()
		}
		wait := c.gathering()
		if wait {
			timer.Reset(c.wait)
		}
	gather:
		for len(batch) < MaxOutcomes {
			var p *pendingOutcome
			if wait {
				select {
				case p = <-c.in:
				case <-timer.C:
					break gather
				case <-c.hurry:
					wait = false
					continue
				}
			} else {
				select {
				case p = <-c.in:
				default:
					break gather
				}
			}
			if size+p.size() > outcomeBatchBytes {
				next = append(next, p)
				break gather
			}
			size += p.size()
			batch = append(batch, p)
		}
		timer.Stop()
		next = append(c.send(ctx, batch), next...)
	}
}

// abandon gives up the outcomes still queued at close.
func (c *completer) abandon() {
	for {
		select {
		case p := <-c.in:
			c.w.log.Error("backlog worker: outcome not delivered before shutdown; the job comes back when its lease ends",
				"job_id", p.job.ID, "kind", p.job.Kind, "outcome", p.o.kind)
			close(p.done)
		default:
			return
		}
	}
}

// send delivers one batch, retrying the request while the server is
// unreachable, and settles each outcome. It returns the outcomes to send
// again: completions the server refused (a result over its limit), now
// failed attempts.
func (c *completer) send(ctx context.Context, batch []*pendingOutcome) []*pendingOutcome {
	if c.single.Load() {
		c.sendSingly(ctx, batch)
		return nil
	}
	reqs := make([]OutcomeRequest, len(batch))
	for i, p := range batch {
		reqs[i] = p.request()
	}
	log := c.w.log.With("outcomes", len(batch))
	for failures := 1; ; failures++ {
		res, err := c.w.c.Outcomes(ctx, c.w.cfg.ID, reqs)
		switch {
		case err == nil:
			c.w.reach.observe(c.w, nil)
			return c.settle(batch, res)
		case noBatchEndpoint(err):
			log.Info("backlog worker: the server has no batch outcome endpoint; reporting outcomes one by one", "err", err)
			c.single.Store(true)
			c.sendSingly(ctx, batch)
			return nil
		case ctx.Err() != nil:
			c.giveUp(batch, err)
			return nil
		case errors.Is(err, ErrInternal) && failures >= internalFailuresBeforeSplit:
			// The server keeps failing on this batch: one request per
			// outcome keeps one troublesome outcome from holding up the
			// others.
			log.Warn("backlog worker: the server keeps failing on a batch of outcomes; reporting them one by one", "err", err)
			c.sendSingly(ctx, batch)
			return nil
		case IsRetryable(err) || errors.Is(err, ErrUnauthorized) || errors.Is(err, ErrForbidden):
			if !c.w.reach.observe(c.w, err) {
				log.Warn("backlog worker: delivering outcomes failed; retrying", "err", err, "failures", failures)
			}
			if !sleep(ctx, backoff(failures, 200*time.Millisecond, 10*time.Second)) {
				c.giveUp(batch, err)
				return nil
			}
		default:
			// Refused as a whole (too large, unreadable): nothing
			// changed; one request per outcome gives each its own answer.
			log.Warn("backlog worker: the server refused a batch of outcomes; reporting them one by one", "err", err)
			c.sendSingly(ctx, batch)
			return nil
		}
	}
}

// noBatchEndpoint reports whether err says the server does not know POST
// /v1/workers/{id}/outcomes (an older server, or a proxy's plain 404).
func noBatchEndpoint(err error) bool {
	var p *Problem
	return errors.Is(err, ErrRouteNotFound) || (errors.As(err, &p) && p.Status == http.StatusNotFound && p.Slug() == "")
}

// sendSingly delivers each outcome with its single endpoint, concurrently,
// as the worker did before batches.
func (c *completer) sendSingly(ctx context.Context, batch []*pendingOutcome) {
	for _, p := range batch {
		go func() {
			defer close(p.done)
			c.w.deliver(ctx, p.job, p.o)
		}()
	}
}

// giveUp abandons a batch whose delivery ctx ended.
func (c *completer) giveUp(batch []*pendingOutcome, err error) {
	for _, p := range batch {
		c.w.log.Error("backlog worker: outcome not delivered before shutdown; the job comes back when its lease ends",
			"job_id", p.job.ID, "kind", p.job.Kind, "attempt", p.job.Attempt, "outcome", p.o.kind, "err", err)
		close(p.done)
	}
}

// settle handles the results of a delivered batch. An item refused as
// lease-lost is read back: an earlier try whose answer was lost may have
// applied it.
func (c *completer) settle(batch []*pendingOutcome, res []OutcomeResult) (again []*pendingOutcome) {
	for i, r := range res {
		p := batch[i]
		err := r.Err()
		if err == nil && !r.Unknown {
			close(p.done)
			continue
		}
		log := c.w.log.With("job_id", p.job.ID, "kind", p.job.Kind, "attempt", p.job.Attempt, "outcome", p.o.kind)
		switch {
		case r.Unknown || errors.Is(err, core.ErrLeaseLost):
			// Read back: an earlier try whose answer was lost may have
			// applied it.
			c.w.logLeaseLost(log, p.job, p.o)
		case p.o.kind == "snooze" && p.o.snooze.HandBack != "" && errors.Is(err, ErrInvalidRequest):
			// A server older than hand-backs refuses the field: the job is
			// handed back as a plain snooze (no error entry).
			log.Warn("backlog worker: the server refused the hand-back's cause; handing the job back without it", "cause", p.o.snooze.HandBack, "err", err)
			p.o.snooze.HandBack = ""
			again = append(again, p)
			continue
		case p.o.kind == "complete" && errors.Is(err, ErrInvalidRequest):
			// A result the server refuses (over its limit): the attempt
			// fails instead, so the job is not left running.
			log.Error("backlog worker: completion refused; failing the attempt instead", "err", err)
			detail := err.Error()
			if r.Problem != nil && r.Problem.Detail != "" {
				detail = r.Problem.Detail
			}
			p.o = failOutcome(p.job, FailRetry, fmt.Errorf("completion refused by the server: %s", detail), nil)
			again = append(again, p)
			continue
		default:
			log.Error("backlog worker: the server refused the outcome; the job comes back when its lease ends", "err", err)
		}
		close(p.done)
	}
	return again
}
