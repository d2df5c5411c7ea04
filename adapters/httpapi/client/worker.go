package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backlogq/backlog/core/contract"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/backlogq/backlog/core"
)

// HandlerFunc runs one claimed job of a Worker. It returns the job's result
// (any JSON value, or nil for none) and an error that picks the outcome,
// as in-process handlers do (the engine's own core.Classify reads it):
//
//	nil                           completed with the result
//	wrapping *core.SnoozeError    snoozed for its delay (no attempt used)
//	wrapping *core.CancelError    cancelled
//	wrapping *core.ContinueError  the job moves on to its next step
//	wrapping *core.PermanentError discarded at once
//	any other error               a failed attempt: retried after RetryIn's
//	                              delay, else by the server's policy for the
//	                              kind, else its default policy; discarded
//	                              when attempts or the deadline run out
//
// An error with an `ErrorTrace() string` method (through wrapping) has its
// trace recorded; a panic is recovered and recorded with its stack. A
// failure is reported with its cause, as the engine records it in process
// (core.CauseOf: panic, a *core.TimeoutError's timeout,
// core.ErrUnknownKind's unknown_kind, …; deadline when the job's deadline
// stopped the handler), so the server's error entry and metrics tell a
// remote panic from a returned error. The
// context is cancelled when the job's lease is lost (cause wraps
// core.ErrLeaseLost; no outcome is reported), when the worker could not
// renew the lease before it would run out (cause ErrLeaseUnrenewed, which
// also wraps core.ErrLeaseLost; the job is snoozed back without using an
// attempt), when the job's deadline passes, and at a hard stop (cause
// ErrShutdown; the job is then snoozed back without using an attempt).
type HandlerFunc func(ctx context.Context, job *Job) (result json.RawMessage, err error)

// RetryInError is a failed attempt whose next try should come after Delay
// instead of the server's retry policy: the engine's core.RetryInError.
type RetryInError = core.RetryInError

// RetryIn returns an error that fails the attempt with err and asks for
// the next try after d (subject to the job's attempts and deadline); it
// is core.RetryIn, sent as the failure's retry_in_seconds.
func RetryIn(err error, d time.Duration) error { return core.RetryIn(err, d) }

// Defaults of a Worker.
const (
	// DefaultConcurrency is how many handlers a Worker runs at once.
	DefaultConcurrency = 10
	// DefaultWaitSeconds is the long-poll wait of a Worker's claims, in
	// seconds.
	DefaultWaitSeconds = 20
	// DefaultShutdownTimeout is how long a stopping Worker lets running
	// handlers finish before cancelling them.
	DefaultShutdownTimeout = 30 * time.Second
	// shutdownDeliveryGrace is how long, after the hard stop, handlers
	// have to return and outcomes to be delivered before the worker gives
	// up on them (their jobs come back when their leases end).
	shutdownDeliveryGrace = 30 * time.Second
	// deregisterTimeout bounds the final deregistration.
	deregisterTimeout = 10 * time.Second
	// maxClaimLimit is the most jobs the API hands out per claim.
	maxClaimLimit = 1000
)

// WorkerConfig configures a Worker.
type WorkerConfig struct {
	// ID is the worker's id, 1..255 bytes; "" means host-pid-random.
	ID string
	// Name is stored as the registry record's host; "" means the hostname.
	Name string
	// Queues to claim from, in order (at least one).
	Queues []string
	// Tags are the worker's capabilities: it gets jobs whose tags are all
	// among them, and untagged jobs.
	Tags []string
	// Kinds are the job kinds Handler runs, announced at registration
	// (RegisterRequest.Kinds): a server that rejects unknown kinds accepts
	// submissions of them while this worker lives. Nil announces none.
	Kinds []string
	// Metadata is stored in the worker's registry record.
	Metadata map[string]string
	// Concurrency is how many handlers run at once; 0 means 10.
	Concurrency int
	// Handler runs every claimed job (required).
	Handler HandlerFunc
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// WaitSeconds is the long-poll wait of a claim, 1..60; 0 means 20.
	WaitSeconds int
	// ShutdownTimeout is how long, once Run's context ends, running
	// handlers may go on before they are cancelled and their jobs snoozed
	// back; 0 means 30 s, negative means no wait.
	ShutdownTimeout time.Duration
	// OnRegister, if set, is called after each successful registration
	// (the first one, and again after the server forgot the worker).
	OnRegister func(*Registration)
	// OutcomeBatchWait is how long finished jobs' outcomes are gathered
	// before they are sent in one request (at most 1000 per request); 0
	// means DefaultOutcomeBatchWait (2 ms), negative means no wait (each
	// request carries what is queued when it is sent).
	OutcomeBatchWait time.Duration
	// Encryption opens args the server hands over sealed (encryption at
	// rest: the server holds no keys, or does not open values for the
	// worker role) and seals what the worker reports when asked (Results,
	// Errors), as an in-process worker does with core.Config.Encryption.
	// Nil: args the server hands over sealed fail their attempt with
	// core.ErrDecrypt (wrapped), as in process. See docs/security.md.
	Encryption *core.Encryption
	// TracerProvider, when set, traces each execution with the engine's
	// "process" span (core.Tracing.StartProcess): a child of the trace
	// context the job's metadata carries, so the execution continues the
	// producer's trace; the handler's context holds the span. Nil means
	// no tracing. See docs/tracing.md.
	TracerProvider trace.TracerProvider
	// Propagator reads the trace context from job metadata; nil means W3C
	// Trace Context. It should match the server's core.Config.Propagator.
	Propagator propagation.TextMapPropagator
}

// Worker is a remote worker: it registers with the server, heartbeats,
// long-polls for jobs up to its free slots, runs them with the handler and
// reports their outcomes. Create it with NewWorker and run it with Run.
//
// A Worker holds a job from the moment a claim's answer arrives until the
// job's outcome is delivered (or found lost, or given up at shutdown):
// every heartbeat names the lease tokens of exactly those jobs, which
// renews their leases; outcomes waiting while the server is unreachable
// keep their jobs held. The server hands back running jobs of the worker
// that a heartbeat does not name (claims whose answer never arrived).
type Worker struct {
	c     *Client
	cfg   WorkerConfig
	log   *slog.Logger
	epoch time.Time // origin of tasks' lease deadlines (monotonic)

	clock serverClock
	reach reachability

	ran     atomic.Bool
	stopNow chan struct{}
	stopped sync.Once

	regMu sync.Mutex
	reg   *Registration

	mu sync.Mutex
	// tasks are the held executions: claimed, handler or outcome pending.
	// One job can be held twice (a claim whose outcome is still on its way
	// when the job comes back in a later claim); each names its own lease.
	tasks map[*task]struct{}

	comp *completer // delivers outcomes in batches

	tracing *core.Tracing // nil: no tracing
}

// task is one claimed job on this worker.
type task struct {
	job      *Job
	ctx      context.Context // the handler's context, child of the work context
	cancel   context.CancelCauseFunc
	returned atomic.Bool // the handler returned; only its outcome is pending
	// leaseUntil is when the lease runs out at the latest known to the
	// worker, as the time since Worker.epoch (see Worker.leaseUntil).
	leaseUntil atomic.Int64
}

// NewWorker validates cfg, fills its defaults and returns a worker that
// calls the server through c. It returns an error for a nil client or
// handler, no queues, an id over 255 bytes or WaitSeconds outside 0..60.
func NewWorker(c *Client, cfg WorkerConfig) (*Worker, error) {
	switch {
	case c == nil:
		return nil, errors.New("backlog worker: no client")
	case cfg.Handler == nil:
		return nil, errors.New("backlog worker: no handler")
	case len(cfg.Queues) == 0:
		return nil, errors.New("backlog worker: no queues")
	case len(cfg.ID) > 255:
		return nil, fmt.Errorf("backlog worker: id is %d bytes, over 255", len(cfg.ID))
	case cfg.WaitSeconds < 0 || cfg.WaitSeconds > 60:
		return nil, fmt.Errorf("backlog worker: wait seconds %d outside 0..60", cfg.WaitSeconds)
	case cfg.Concurrency < 0:
		return nil, fmt.Errorf("backlog worker: concurrency %d is negative", cfg.Concurrency)
	}
	for _, q := range cfg.Queues {
		if err := contract.ValidateQueueName(q); err != nil {
			return nil, fmt.Errorf("backlog worker: %w", err)
		}
	}
	host, _ := os.Hostname()
	if host == "" {
		host = "host"
	}
	if cfg.ID == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		cfg.ID = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	if cfg.Name == "" {
		cfg.Name = host
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.WaitSeconds == 0 {
		cfg.WaitSeconds = DefaultWaitSeconds
	}
	if cfg.ShutdownTimeout == 0 {
		cfg.ShutdownTimeout = DefaultShutdownTimeout
	}
	if cfg.OutcomeBatchWait == 0 {
		cfg.OutcomeBatchWait = DefaultOutcomeBatchWait
	}
	cfg.ShutdownTimeout = max(cfg.ShutdownTimeout, 0)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Queues = slices.Clone(cfg.Queues)
	w := &Worker{
		c: c, cfg: cfg, log: cfg.Logger.With("worker_id", cfg.ID), epoch: time.Now(),
		stopNow: make(chan struct{}), tasks: map[*task]struct{}{},
		tracing: core.NewTracing(cfg.TracerProvider, cfg.Propagator),
	}
	w.comp = newCompleter(w, cfg.OutcomeBatchWait)
	return w, nil
}

// ID returns the worker's id.
func (w *Worker) ID() string { return w.cfg.ID }

// Running returns the jobs whose handlers run now, in no particular order.
func (w *Worker) Running() []*Job {
	var out []*Job
	for _, t := range w.handlersRunning() {
		out = append(out, t.job)
	}
	return out
}

// StopNow makes the shutdown of Run hard at once: running handlers are
// cancelled and their jobs snoozed back without waiting for
// ShutdownTimeout. It takes effect when Run's context ends (at once if it
// already has). Safe to call more than once.
func (w *Worker) StopNow() { w.stopped.Do(func() { close(w.stopNow) }) }

// ErrShutdown is the cancellation cause of handler contexts at a hard stop
// of a Worker (errors.Is(context.Cause(ctx), ErrShutdown), or
// core.ErrShutdown(context.Cause(ctx)) as for in-process handlers: it is
// the engine's own cause): the handler should return promptly; its job is
// snoozed back without using an attempt.
var ErrShutdown = core.ShutdownCause()

// Run registers the worker and works until ctx ends, then shuts down:
// no new claims; running handlers get ShutdownTimeout (or until StopNow)
// to finish, then are cancelled and their jobs snoozed back (no attempt
// used); pending outcomes are delivered; the worker deregisters.
// Outcomes go to the server in batches (POST /v1/workers/{id}/outcomes,
// see OutcomeBatchWait), or one request each against a server without
// that endpoint. It never exits on
// a transient failure (an unreachable server is retried with backoff). It
// returns nil after a shutdown caused by ctx, and an error when the server
// refuses the registration for good (unauthorized, forbidden, invalid
// request), or when Run was already called.
func (w *Worker) Run(ctx context.Context) error {
	if !w.ran.CompareAndSwap(false, true) {
		return errors.New("backlog worker: Run called twice")
	}
	if _, err := w.register(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	w.log.Info("backlog worker started", "queues", w.cfg.Queues, "concurrency", w.cfg.Concurrency)

	base := context.WithoutCancel(ctx)
	workCtx, cancelWork := context.WithCancelCause(base)
	defer cancelWork(nil)
	deliverCtx, cancelDeliver := context.WithCancel(base)
	defer cancelDeliver()
	beatCtx, stopBeat := context.WithCancel(base)
	defer stopBeat()
	w.comp.start(deliverCtx)

	var beats sync.WaitGroup
	beats.Add(1)
	go func() { defer beats.Done(); w.heartbeatLoop(beatCtx) }()

	var tasks sync.WaitGroup
	w.claimLoop(ctx, workCtx, deliverCtx, &tasks)

	// Shutdown: outcomes go out without waiting for more.
	w.comp.flush()
	done := make(chan struct{})
	go func() { tasks.Wait(); close(done) }()
	n := len(w.handlersRunning())
	w.log.Info("backlog worker stopping", "running", n, "shutdown_timeout", w.cfg.ShutdownTimeout)
	soft := time.NewTimer(w.cfg.ShutdownTimeout)
	defer soft.Stop()
	select {
	case <-done:
	case <-soft.C:
		w.hardStop(cancelWork, "shutdown timeout passed")
	case <-w.stopNow:
		w.hardStop(cancelWork, "stop now")
	}
	select {
	case <-done:
	case <-time.After(shutdownDeliveryGrace):
		cancelDeliver()
		select {
		case <-done:
		case <-time.After(time.Second):
		}
		w.log.Error("backlog worker: gave up on handlers or outcomes still pending; their jobs come back when their leases end",
			"jobs", w.pendingIDs())
	}
	w.comp.close()
	stopBeat()
	beats.Wait()
	dctx, cancel := context.WithTimeout(base, deregisterTimeout)
	defer cancel()
	if err := w.c.Deregister(dctx, w.cfg.ID); err != nil {
		w.log.Warn("backlog worker: deregister failed; the record goes when the server declares the worker dead", "err", err)
	}
	w.log.Info("backlog worker stopped")
	return nil
}

func (w *Worker) hardStop(cancelWork context.CancelCauseFunc, why string) {
	if n := len(w.handlersRunning()); n > 0 {
		w.log.Warn("backlog worker: hard stop; cancelling running handlers, their jobs are snoozed back", "why", why, "running", n)
	}
	cancelWork(ErrShutdown)
}

// register registers the worker, retrying transient failures with backoff
// until ctx ends. It returns an error for a refusal that retrying cannot
// fix.
func (w *Worker) register(ctx context.Context) (*Registration, error) {
	req := w.registerRequest()
	for failures := 1; ; failures++ {
		sent := time.Now()
		reg, err := w.c.RegisterWorker(ctx, w.cfg.ID, req)
		if err == nil {
			w.reach.observe(w, nil)
			w.registered(reg, sent)
			return reg, nil
		}
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		if !IsRetryable(err) {
			return nil, fmt.Errorf("backlog worker: register %s: %w", w.cfg.ID, err)
		}
		if !w.reach.observe(w, err) {
			w.log.Warn("backlog worker: cannot register yet; retrying", "err", err, "failures", failures)
		}
		if !sleep(ctx, backoff(failures, 200*time.Millisecond, 10*time.Second)) {
			return nil, context.Cause(ctx)
		}
	}
}

// registered records a registration whose request was sent at sent.
func (w *Worker) registered(reg *Registration, sent time.Time) {
	w.regMu.Lock()
	w.reg = reg
	w.regMu.Unlock()
	w.clock.set(sent, reg.Worker.HeartbeatAt)
	if w.cfg.OnRegister != nil {
		w.cfg.OnRegister(reg)
	}
}

// reregister registers again after the server forgot the worker (declared
// dead: its jobs were handed back), then stops the handlers of jobs it no
// longer holds.
func (w *Worker) reregister(ctx context.Context) {
	w.log.Warn("backlog worker: the server does not know this worker (declared dead?); registering again")
	if _, err := w.register(ctx); err != nil {
		if ctx.Err() == nil {
			w.log.Error("backlog worker: registering again failed", "err", err)
		}
		return
	}
	w.checkLeases(ctx, w.held())
}

// heartbeatInterval is the server's heartbeat interval.
func (w *Worker) heartbeatInterval() time.Duration {
	w.regMu.Lock()
	defer w.regMu.Unlock()
	if w.reg == nil || w.reg.HeartbeatInterval <= 0 {
		return defaultHeartbeatInterval
	}
	return w.reg.HeartbeatInterval
}

// leaseDuration is how long the server's claims and heartbeats hold a
// lease.
func (w *Worker) leaseDuration() time.Duration {
	w.regMu.Lock()
	defer w.regMu.Unlock()
	if w.reg == nil || w.reg.Lease <= 0 {
		return defaultLease
	}
	return w.reg.Lease
}

// claimLoop long-polls for jobs up to the free slots until ctx ends, and
// starts a task per job.
func (w *Worker) claimLoop(ctx, workCtx, deliverCtx context.Context, tasks *sync.WaitGroup) {
	slots := make(chan struct{}, w.cfg.Concurrency)
	wait := time.Duration(w.cfg.WaitSeconds) * time.Second
	failures := 0
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		free := 1
	more:
		for free < min(w.cfg.Concurrency, maxClaimLimit) {
			select {
			case slots <- struct{}{}:
				free++
			default:
				break more
			}
		}
		start := time.Now()
		jobs, err := w.c.Claim(ctx, w.cfg.ID, ClaimRequest{Limit: free, Wait: wait})
		for range free - len(jobs) {
			<-slots
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, ErrWorkerNotRegistered) {
				w.reach.observe(w, nil)
				w.reregister(ctx)
				continue
			}
			failures++
			if !w.reach.observe(w, err) {
				w.log.Warn("backlog worker: claim failed; retrying", "err", err, "failures", failures)
			}
			if !sleep(ctx, backoff(failures, 200*time.Millisecond, 10*time.Second)) {
				return
			}
			continue
		}
		failures = 0
		w.reach.observe(w, nil)
		for i, t := range w.hold(workCtx, jobs, start) {
			tasks.Add(1)
			release := func() { <-slots }
			var why string
			switch {
			case i >= free:
				// Not asked for: no slot of its own. It is held until it
				// is handed back.
				why, release = "the server answered with more jobs than asked for", func() {}
			case ctx.Err() != nil:
				why = "claimed as the shutdown began"
			}
			if why != "" {
				w.log.Warn("backlog worker: handing a claimed job back unrun", "job_id", t.job.ID, "kind", t.job.Kind, "why", why)
				go func() {
					defer tasks.Done()
					defer w.forget(t)
					w.handBack(t, release)
				}()
				continue
			}
			go func() {
				defer tasks.Done()
				defer w.forget(t)
				w.runTask(t, release)
			}()
		}
		if len(jobs) == 0 && time.Since(start) < 100*time.Millisecond {
			// An empty answer that came back at once (a server that does
			// not long-poll): don't spin.
			if !sleep(ctx, 500*time.Millisecond) {
				return
			}
		}
	}
}

// hold starts holding the jobs of a claim's answer (the claim was sent at
// sent): from now until its outcome is delivered each is named by the
// heartbeats. It returns their tasks, in the answer's order.
func (w *Worker) hold(workCtx context.Context, jobs []*Job, sent time.Time) []*task {
	arrived := time.Now()
	ts := make([]*task, len(jobs))
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, j := range jobs {
		tctx, cancel := context.WithCancelCause(workCtx)
		t := &task{job: j, ctx: tctx, cancel: cancel}
		w.setLeaseUntil(t, w.claimLease(j, sent, arrived))
		w.tasks[t] = struct{}{}
		ts[i] = t
	}
	return ts
}

// handBack snoozes a held job back without running it (no attempt used).
func (w *Worker) handBack(t *task, release func()) {
	defer t.cancel(nil)
	t.returned.Store(true)
	w.report(t.job, outcome{kind: "snooze", snooze: SnoozeRequest{LeaseToken: t.job.LeaseToken}}, release)
}

// forget stops holding t's job: its outcome was delivered, found lost or
// given up.
func (w *Worker) forget(t *task) {
	w.mu.Lock()
	delete(w.tasks, t)
	w.mu.Unlock()
}

// held returns every task the worker holds: handlers running, and
// handlers returned whose outcome is not delivered yet.
func (w *Worker) held() []*task {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]*task, 0, len(w.tasks))
	for t := range w.tasks {
		out = append(out, t)
	}
	return out
}

// handlersRunning returns the tasks whose handlers have not returned.
func (w *Worker) handlersRunning() []*task {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]*task, 0, len(w.tasks))
	for t := range w.tasks {
		if !t.returned.Load() {
			out = append(out, t)
		}
	}
	return out
}

func (w *Worker) pendingIDs() []int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	ids := make([]int64, 0, len(w.tasks))
	for t := range w.tasks {
		ids = append(ids, t.job.ID)
	}
	slices.Sort(ids)
	return ids
}

// runTask runs the handler of one job and reports its outcome; the job's
// slot is freed once the outcome is queued for delivery.
func (w *Worker) runTask(t *task, release func()) {
	job, ctx := t.job, t.ctx
	defer t.cancel(nil)
	var span core.ProcessSpan
	if w.tracing != nil {
		ctx, span = w.tracing.StartProcess(ctx, job.CoreJob())
	}
	runCtx := ctx
	if !job.Deadline.IsZero() {
		var stop context.CancelFunc
		runCtx, stop = context.WithDeadlineCause(ctx, job.Deadline, errJobDeadline)
		defer stop()
	}
	// The handler reports progress and saves checkpoints with
	// core.ReportProgress and core.SaveCheckpoint, as in process.
	runCtx, flushProgress := core.WithProgressSink(runCtx, nil, func(ctx context.Context, p *core.Progress, checkpoint json.RawMessage) error {
		req := ProgressRequest{LeaseToken: job.LeaseToken, Checkpoint: checkpoint}
		if p != nil {
			req.Percent, req.Message = &p.Percent, p.Message
		}
		return w.c.RecordProgress(ctx, job.ID, req)
	})
	var res json.RawMessage
	hjob, err := w.openForHandler(job)
	ran := err == nil // the handler is called
	if ran {
		err = core.CallSafely(func() error {
			var herr error
			res, herr = w.cfg.Handler(runCtx, hjob)
			return herr
		})
		if ferr := flushProgress(ctx); ferr != nil && !errors.Is(ferr, core.ErrLeaseLost) {
			w.log.Warn("backlog worker: the last progress report was not written", "job_id", job.ID, "kind", job.Kind, "error", ferr)
		}
	}
	if err != nil && errors.Is(context.Cause(runCtx), errJobDeadline) {
		err = fmt.Errorf("%w: %w", errJobDeadline, err)
	}
	t.returned.Store(true)

	cause := context.Cause(ctx)
	unrenewed := errors.Is(cause, ErrLeaseUnrenewed)
	if unrenewed && !(ran && core.Classify(ctx, err).Kind != contract.OutcomeRetry) {
		// Stopped before a lease the worker could not renew ran out: hand
		// the job back without using an attempt, with an error entry
		// saying why (as in process). If the server answers again before
		// the job is rescued, this applies; otherwise it is refused as
		// lease-lost and changes nothing. A handler that returned a
		// deliberate outcome all the same (a result, Continue, Snooze,
		// Cancel, Permanent) did its work: that outcome is reported
		// instead, so a finished job is never handed back to run again.
		span.End(string(contract.OutcomeSnooze), nil)
		w.report(job, outcome{kind: "snooze", snooze: SnoozeRequest{LeaseToken: job.LeaseToken, HandBack: core.CauseLeaseUnrenewed}}, release)
		return
	}
	if errors.Is(cause, core.ErrLeaseLost) && !unrenewed {
		span.End(core.OutcomeLeaseLost, err)
		release()
		w.log.Warn("backlog worker: handler stopped after its lease was lost; no outcome reported", "job_id", job.ID, "kind", job.Kind, "cause", cause)
		return
	}
	o := w.decide(ctx, job, res, err)
	if o.kind == "fail" {
		if err == nil {
			err = errors.New(o.fail.Error)
		}
		span.End(string(o.fail.Action), err)
	} else {
		span.End(o.kind, err)
	}
	w.report(job, w.seal(job.Kind, o), release)
}

// openForHandler returns the job the handler sees: args and error text
// opened by the worker's keys (core.Encryption.OpenForHandler); job itself
// keeps the values as served.
func (w *Worker) openForHandler(job *Job) (*Job, error) {
	if !contract.IsSealed(job.Args) && w.cfg.Encryption == nil {
		return job, nil
	}
	opened, err := w.cfg.Encryption.OpenForHandler(job.CoreJob())
	if err != nil {
		return job, err
	}
	hj := *job
	hj.Args, hj.Errors = opened.Args, opened.Errors
	return &hj, nil
}

// seal seals what o reports for a job of kind under the worker's keys
// (core.Encryption.SealOutcome); without keys it returns o as it is.
func (w *Worker) seal(kind string, o outcome) outcome {
	enc := w.cfg.Encryption
	if enc == nil {
		return o
	}
	switch o.kind {
	case "complete":
		co := contract.Outcome{Kind: contract.OutcomeComplete, Result: o.complete.Result}
		enc.SealOutcome(&co, kind)
		o.complete.Result = co.Result
	case "fail":
		ae := core.AttemptError{Error: o.fail.Error, Trace: o.fail.Trace}
		co := contract.Outcome{Kind: contract.OutcomeRetry, Error: &ae}
		enc.SealOutcome(&co, kind)
		o.fail.Error, o.fail.Trace = co.Error.Error, co.Error.Trace
	case "continue":
		if !json.Valid(o.cont.Args) {
			break // left as it is for the server to find invalid
		}
		co := contract.Outcome{Kind: contract.OutcomeContinue, NextKind: o.cont.Kind, NextArgs: o.cont.Args}
		enc.SealOutcome(&co, kind)
		o.cont.Args = co.NextArgs
	}
	return o
}

// report queues job's outcome for the completer, then frees the job's
// slot (release) and waits until the outcome is delivered, found lost or
// given up. The job stays among the worker's pending tasks meanwhile.
func (w *Worker) report(job *Job, o outcome, release func()) {
	p := w.comp.add(job, o)
	release()
	if p == nil {
		w.log.Error("backlog worker: outcome not delivered before shutdown; the job comes back when its lease ends",
			"job_id", job.ID, "kind", job.Kind, "attempt", job.Attempt, "outcome", o.kind)
		return
	}
	<-p.done
}

var errJobDeadline = errors.New("job deadline passed")

// outcome is what to report for one job.
type outcome struct {
	kind     string // "complete", "fail", "snooze", "continue"
	complete CompleteRequest
	fail     FailRequest
	snooze   SnoozeRequest
	cont     ContinueRequest
}

// decide turns a handler's return into the outcome to report: the
// engine's verdict (core.Classify) in its wire form. The server makes the
// rest of the decision (core.Decide: attempts, deadline, retry policy).
func (w *Worker) decide(ctx context.Context, job *Job, res json.RawMessage, err error) outcome {
	tok := job.LeaseToken
	v := core.Classify(ctx, err)
	switch v.Kind {
	case contract.OutcomeComplete:
		if len(res) > 0 && !json.Valid(res) {
			return failOutcome(job, FailRetry, errors.New("the handler's result is not valid JSON"), nil)
		}
		return outcome{kind: "complete", complete: CompleteRequest{LeaseToken: tok, Result: res}}
	case contract.OutcomeSnooze:
		return outcome{kind: "snooze", snooze: SnoozeRequest{LeaseToken: tok, Delay: v.Delay}}
	case contract.OutcomeContinue:
		return outcome{kind: "continue", cont: ContinueRequest{LeaseToken: tok, Kind: v.Next.Kind, Args: v.Next.Args, RunAt: v.Next.RunAt}}
	case contract.OutcomeCancel:
		return failOutcome(job, FailCancel, v.Err, nil)
	case contract.OutcomeDiscard:
		return failOutcome(job, FailDiscard, v.Err, nil)
	}
	return failOutcome(job, FailRetry, v.Err, v.RetryIn)
}

// failOutcome is the failure of job's attempt with err: its error entry
// (core.ErrorEntry: message, trace and cause, bounded), action and retry
// delay. The cause is sent only when it is not handler_error, which is
// what a failure without one means.
func failOutcome(job *Job, action FailAction, err error, retryIn *time.Duration) outcome {
	ae := core.ErrorEntry(job.Attempt, time.Now(), err)
	if ae.Error == "" {
		ae.Error = "error"
	}
	cause := attemptCause(err)
	if cause == core.CauseHandlerError {
		cause = ""
	}
	return outcome{kind: "fail", fail: FailRequest{
		LeaseToken: job.LeaseToken, Action: action, RetryIn: retryIn, Error: ae.Error, Trace: ae.Trace, Cause: cause,
	}}
}

// attemptCause is the cause of an attempt that failed with err, as the
// engine finds it (core.CauseOf), with the job's deadline this worker
// runs handlers under (errJobDeadline) read as the engine reads its own:
// after a panic or a timeout, before the rest.
func attemptCause(err error) string {
	switch c := core.CauseOf(err); {
	case c == core.CausePanic || c == core.CauseTimeout:
		return c
	case errors.Is(err, errJobDeadline):
		return core.CauseDeadline
	default:
		return c
	}
}

// deliver reports an outcome with its single endpoint, retrying until it
// applies, the lease is found lost, or ctx ends (then the job comes back
// when its lease ends). The completer uses it against servers without the
// batch endpoint.
func (w *Worker) deliver(ctx context.Context, job *Job, o outcome) {
	log := w.log.With("job_id", job.ID, "kind", job.Kind, "attempt", job.Attempt, "outcome", o.kind)
	for failures := 0; ; failures++ {
		var err error
		switch o.kind {
		case "complete":
			_, err = w.c.Complete(ctx, job.ID, o.complete)
		case "fail":
			_, err = w.c.Fail(ctx, job.ID, o.fail)
		case "continue":
			_, err = w.c.Continue(ctx, job.ID, o.cont)
		default:
			_, err = w.c.Snooze(ctx, job.ID, o.snooze)
		}
		switch {
		case err == nil:
			w.reach.observe(w, nil)
			return
		case errors.Is(err, core.ErrLeaseLost):
			// Read back: an earlier try whose answer was lost may have
			// applied it.
			w.logLeaseLost(log, job, o)
			return
		case errors.Is(err, core.ErrNotFound):
			log.Warn("backlog worker: the job was deleted; outcome dropped")
			return
		case o.kind == "complete" && errors.Is(err, ErrInvalidRequest):
			// A result the server refuses (over its limit): the attempt
			// fails instead, so the job is not left running.
			log.Error("backlog worker: completion refused; failing the attempt instead", "err", err)
			var p *Problem
			detail := err.Error()
			if errors.As(err, &p) && p.Detail != "" {
				detail = p.Detail
			}
			o = failOutcome(job, FailRetry, fmt.Errorf("completion refused by the server: %s", detail), nil)
			continue
		case o.kind == "snooze" && o.snooze.HandBack != "" && errors.Is(err, ErrInvalidRequest):
			// A server older than hand-backs refuses the field: the job is
			// handed back as a plain snooze (no error entry).
			log.Warn("backlog worker: the server refused the hand-back's cause; handing the job back without it", "cause", o.snooze.HandBack, "err", err)
			o.snooze.HandBack = ""
			continue
		case o.kind == "fail" && o.fail.Cause != "" && errors.Is(err, ErrInvalidRequest):
			// A server older than failure causes refuses the field: the
			// failure is reported without it (recorded as handler_error).
			log.Warn("backlog worker: the server refused the failure's cause; reporting the failure without it", "cause", o.fail.Cause, "err", err)
			o.fail.Cause = ""
			continue
		case ctx.Err() != nil:
			log.Error("backlog worker: outcome not delivered before shutdown; the job comes back when its lease ends", "err", err)
			return
		case IsRetryable(err) || errors.Is(err, ErrUnauthorized) || errors.Is(err, ErrForbidden):
			if !w.reach.observe(w, err) {
				log.Warn("backlog worker: delivering outcome failed; retrying", "err", err, "failures", failures+1)
			}
			if !sleep(ctx, backoff(failures+1, 200*time.Millisecond, 10*time.Second)) {
				log.Error("backlog worker: outcome not delivered before shutdown; the job comes back when its lease ends", "err", err)
				return
			}
		default:
			log.Error("backlog worker: the server refused the outcome; the job comes back when its lease ends", "err", err)
			return
		}
	}
}

// registerRequest is the worker's registration.
func (w *Worker) registerRequest() RegisterRequest {
	return RegisterRequest{Name: w.cfg.Name, Queues: w.cfg.Queues, Tags: w.cfg.Tags, Kinds: w.cfg.Kinds, Metadata: w.cfg.Metadata}
}
