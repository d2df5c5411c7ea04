package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/backlogq/backlog/core"
)

// ErrLeaseUnrenewed is the cancellation cause of a Worker's handler whose
// lease the worker could not renew (the server was unreachable) and which
// would have run out before the next heartbeat: the handler is stopped one
// heartbeat interval before that, so it never runs on past its lease, and
// its job is snoozed back without using an attempt (once the server
// answers again; if the job was rescued meanwhile, nothing changes). It
// wraps core.ErrLeaseLost.
var ErrLeaseUnrenewed = fmt.Errorf("%w: the lease could not be renewed before it ran out (server unreachable)", core.ErrLeaseLost)

// Defaults used until the server's registration answer says otherwise.
const (
	defaultHeartbeatInterval = 10 * time.Second
	defaultLease             = 30 * time.Second
	// outageRetry is how often a Worker heartbeats while heartbeats fail.
	outageRetry = time.Second
)

// leaseUntil returns when, by this process's clock, t's lease runs out at
// the latest the worker knows of.
func (w *Worker) leaseUntil(t *task) time.Time {
	return w.epoch.Add(time.Duration(t.leaseUntil.Load()))
}

// setLeaseUntil records that t's lease lasts until at least until.
func (w *Worker) setLeaseUntil(t *task, until time.Time) {
	t.leaseUntil.Store(int64(until.Sub(w.epoch)))
}

// serverClock relates the server's clock to this process's: the server
// read serverAt no earlier than localAt (the moment the request that
// reported it was sent).
type serverClock struct {
	mu       sync.Mutex
	localAt  time.Time // with a monotonic reading
	serverAt time.Time
}

func (c *serverClock) set(localAt, serverAt time.Time) {
	if serverAt.IsZero() {
		return
	}
	c.mu.Lock()
	c.localAt, c.serverAt = localAt, serverAt
	c.mu.Unlock()
}

// local converts the server time x to this process's clock, erring early
// (by the round trip of the request that related the clocks); ok is false
// when the clocks were never related.
func (c *serverClock) local(x time.Time) (t time.Time, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.localAt.IsZero() || x.IsZero() {
		return time.Time{}, false
	}
	return c.localAt.Add(x.Sub(c.serverAt)), true
}

// claimLease estimates, by this process's clock, when the lease of j runs
// out: j.LeaseUntil converted through the server's clock, no later than a
// full lease from when the claim's answer arrived; without a clock
// relation, a full lease from when the claim was sent.
func (w *Worker) claimLease(j *Job, sent, arrived time.Time) time.Time {
	lease := w.leaseDuration()
	if t, ok := w.clock.local(j.LeaseUntil); ok {
		return minTime(t, arrived.Add(lease))
	}
	return sent.Add(lease)
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// heldTokens returns the tasks the worker holds (from the claim's answer
// until their outcome is delivered, found lost or given up) and their
// lease tokens.
func (w *Worker) heldTokens() ([]*task, []string) {
	held := w.held()
	tokens := make([]string, len(held))
	for i, t := range held {
		tokens[i] = t.job.LeaseToken
	}
	return held, tokens
}

// heartbeatLoop heartbeats at the server's interval, naming the lease of
// every job the worker holds (running, or finished with its outcome not
// delivered yet), which renews exactly those leases. While heartbeats
// fail it retries every second, and it stops, with cause
// ErrLeaseUnrenewed, the handlers whose lease would run out within one
// heartbeat interval, so that no handler runs on past its lease while the
// server is out of reach.
func (w *Worker) heartbeatLoop(ctx context.Context) {
	wait := w.heartbeatInterval()
	for {
		if !sleep(ctx, wait) {
			return
		}
		wait = w.heartbeatInterval()
		if !w.heartbeatRound(ctx) {
			wait = min(wait, outageRetry)
		}
	}
}

// heartbeatRound runs one heartbeat and reports whether the server
// answered it. The round is bounded by the heartbeat interval, so a hung
// connection never keeps the worker from checking its leases again.
func (w *Worker) heartbeatRound(ctx context.Context) bool {
	interval := w.heartbeatInterval()
	rctx, cancel := context.WithTimeout(ctx, interval)
	defer cancel()
	if w.beat(rctx) {
		return true
	}
	if ctx.Err() == nil {
		// The next round starts after the retry wait and may take a
		// whole interval: stop now what could run out before it ends.
		// (Only after a failed round: a lease at most twice the interval
		// must not stop healthy handlers.)
		w.stopUnrenewed(time.Now(), interval+outageRetry)
	}
	return false
}

// beat sends one heartbeat (registering again first when the server has
// forgotten the worker) and settles the leases it renewed.
func (w *Worker) beat(ctx context.Context) bool {
	for try := 0; ; try++ {
		held, tokens := w.heldTokens()
		sent := time.Now()
		res, err := w.c.Heartbeat(ctx, w.cfg.ID, tokens)
		if errors.Is(err, ErrWorkerNotRegistered) && try == 0 {
			w.reach.observe(w, nil)
			w.log.Warn("backlog worker: the server does not know this worker (declared dead?); registering again")
			if !w.registerOnce(ctx) {
				return false
			}
			continue // the heartbeat finds out which jobs were handed back
		}
		if err != nil {
			if !w.reach.observe(w, err) && ctx.Err() == nil {
				w.reach.refused(w, "heartbeat", err)
			}
			return false
		}
		w.reach.observe(w, nil)
		w.reach.answered()
		w.clock.set(sent, res.Worker.HeartbeatAt)
		if res.HandedBack > 0 {
			w.log.Warn("backlog worker: the server handed back jobs claimed for this worker whose claim answer never arrived", "jobs", res.HandedBack)
		}
		if res.LeasesExtended >= len(held) {
			until := sent.Add(w.leaseDuration())
			for _, t := range held {
				w.setLeaseUntil(t, until)
			}
			return true
		}
		// Fewer renewed than named: find which job is no longer held and
		// stop its handler.
		w.checkLeases(ctx, held)
		return true
	}
}

// registerOnce registers again (one request) and reports whether it
// worked.
func (w *Worker) registerOnce(ctx context.Context) bool {
	req := w.registerRequest()
	sent := time.Now()
	reg, err := w.c.RegisterWorker(ctx, w.cfg.ID, req)
	if err != nil {
		if !w.reach.observe(w, err) && ctx.Err() == nil {
			w.log.Error("backlog worker: registering again failed", "err", err)
		}
		return false
	}
	w.reach.observe(w, nil)
	w.registered(reg, sent)
	return true
}

// stopUnrenewed cancels, with cause ErrLeaseUnrenewed, the handlers whose
// lease runs out within interval of now: the worker could not renew it in
// time (a renewed lease lasts a full lease from its heartbeat, well beyond
// the next one).
func (w *Worker) stopUnrenewed(now time.Time, interval time.Duration) {
	limit := now.Add(interval)
	for _, t := range w.held() {
		if t.returned.Load() || t.ctx.Err() != nil {
			continue
		}
		until := w.leaseUntil(t)
		if until.After(limit) {
			continue
		}
		w.log.Warn("backlog worker: lease could not be renewed; stopping the handler before it runs out, the job is handed back",
			"job_id", t.job.ID, "kind", t.job.Kind, "attempt", t.job.Attempt, "lease_until", until.Round(0).UTC())
		t.cancel(ErrLeaseUnrenewed)
	}
}

// checkLeases asks the server, job by job, whether each task's claim still
// holds its job (by renewing that one lease) and cancels the handlers of
// jobs it no longer holds (cause wraps core.ErrLeaseLost).
func (w *Worker) checkLeases(ctx context.Context, held []*task) {
	for _, t := range held {
		sent := time.Now()
		_, err := w.c.ExtendLease(ctx, t.job.ID, ExtendLeaseRequest{LeaseToken: t.job.LeaseToken})
		switch {
		case err == nil:
			w.setLeaseUntil(t, sent.Add(w.leaseDuration()))
			continue
		case errors.Is(err, core.ErrLeaseLost), errors.Is(err, core.ErrNotFound):
		default:
			return // checked again at the next heartbeat
		}
		if t.returned.Load() {
			continue // its outcome is on its way; the completer reports it
		}
		detail := err.Error()
		var p *Problem
		if errors.As(err, &p) && p.Detail != "" {
			detail = p.Detail
		}
		w.log.Warn("backlog worker: lease lost; stopping the handler", "job_id", t.job.ID, "kind", t.job.Kind,
			"attempt", t.job.Attempt, "detail", detail)
		t.cancel(fmt.Errorf("%w: %s", core.ErrLeaseLost, detail))
	}
}

// reachability follows whether the worker reaches the server, from the
// results of its own calls (heartbeats, claims, outcomes, registrations),
// so that an outage is logged once when it starts and once when it ends,
// not by every failing call.
type reachability struct {
	mu        sync.Mutex
	down      bool
	downSince time.Time
	refusal   string // the last refusal logged by a failing heartbeat streak
}

// unreachable reports whether err says the server could not be reached or
// could not serve (no answer, 502/503/504, a call that timed out).
func unreachable(err error) bool {
	return errors.Is(err, ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)
}

// observe records the result of one call. For a failure that means the
// server is out of reach it logs the start of the outage (once; later
// failures at debug level) and returns true; other failures are left to
// the caller (false). A success ends the outage (logged once).
func (r *reachability) observe(w *Worker, err error) (handled bool) {
	if err != nil && !unreachable(err) {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		if r.down {
			r.down = false
			w.log.Info("backlog worker: server reachable again", "unreachable_for", time.Since(r.downSince).Round(time.Millisecond).String())
		}
		return true
	}
	if r.down {
		w.log.Debug("backlog worker: server still unreachable", "err", err)
		return true
	}
	r.down, r.downSince = true, time.Now()
	w.log.Error("backlog worker: server unreachable; retrying until it answers (further failures are logged at debug level)", "err", err)
	return true
}

// refused logs a call the server answered with a refusal other than an
// outage, once per kind of refusal in a row (heartbeats retry every
// second while they fail).
func (r *reachability) refused(w *Worker, what string, err error) {
	key := err.Error()
	var p *Problem
	if errors.As(err, &p) {
		key = fmt.Sprint(p.Status, p.Type)
	}
	r.mu.Lock()
	same := r.refusal == what+key
	r.refusal = what + key
	r.mu.Unlock()
	if same {
		w.log.Debug("backlog worker: "+what+" failed", "err", err)
		return
	}
	w.log.Warn("backlog worker: "+what+" failed; retrying", "err", err)
}

// answered ends a streak of refused heartbeats.
func (r *reachability) answered() {
	r.mu.Lock()
	r.refusal = ""
	r.mu.Unlock()
}
