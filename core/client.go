package core

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

// Client enqueues jobs and, when configured with queues, runs them. It is
// safe for concurrent use. One process normally has one Client per store.
type Client struct {
	cfg   Config
	store contract.Store
	log   *slog.Logger
	clock Clock

	producers map[string]*producer // by queue; fixed after NewClient
	periodic  []*periodicEntry     // Config.Periodic, validated; fixed after NewClient
	tracing   *Tracing             // Config.TracerProvider's; nil: tracing off

	mu       sync.Mutex
	started  bool
	stopped  bool
	running  map[int64]*execution // jobs executing on this node, by id
	stopLoop context.CancelFunc   // stops producers and maintenance (soft stop begins)
	stopBeat context.CancelFunc   // stops heartbeat and listener, once executions ended
	// workCtx parents every handler context; cancelled (with errShutdown) on
	// a hard stop.
	workCtx    context.Context
	cancelWork context.CancelCauseFunc

	// claimGate is held shared by claims until their jobs are tracked and
	// exclusively by the orphan check (see handBackOrphans).
	claimGate sync.RWMutex
	reach     reachability

	loops     sync.WaitGroup // producers, maintenance
	beats     sync.WaitGroup // heartbeat, listener
	execs     sync.WaitGroup // executions
	completer *completer
	startedAt time.Time
	// history counts this node's completions and failed attempts for the
	// store's queue history; nil when the store is not a QueueHistory or
	// maintenance is off (see maintainHistory).
	history *history
	// waits are the callers of Wait and their shared loop (wait.go).
	waits waitHub
	// announced caches the worker registry CheckKinds reads (kinds.go).
	announced announcedKinds
}

// NewClient returns a client over store. It validates cfg and fills its
// defaults; it does not touch the store until Start or an enqueue.
func NewClient(store contract.Store, cfg Config) (*Client, error) {
	if store == nil {
		return nil, errors.New("backlog: NewClient needs a store")
	}
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if c.Encryption != nil && c.Encryption.Keys == nil {
		return nil, errors.New("backlog: Config.Encryption needs a keyring (Keys)")
	}
	if c.WorkerID == "" {
		c.WorkerID = defaultWorkerID()
	}
	if err := checkTxHandlers(store, c.Handlers); err != nil {
		return nil, err
	}
	if _, ok := store.(contract.Archiver); c.Retention.Archive && !ok {
		return nil, fmt.Errorf("backlog: Retention.Archive: %T has no archive (contract.Archiver): %w", store, ErrUnsupported)
	}
	cl := &Client{
		cfg:       c,
		store:     store,
		log:       c.Logger.With("worker_id", c.WorkerID),
		clock:     c.Clock,
		tracing:   NewTracing(c.TracerProvider, c.Propagator),
		producers: map[string]*producer{},
		running:   map[int64]*execution{},
	}
	for name, q := range c.Queues {
		cl.producers[name] = newProducer(cl, name, q)
	}
	if qh, ok := store.(contract.QueueHistory); ok && c.MaintenanceInterval > 0 {
		queues := make([]string, 0, len(c.Queues))
		for name := range c.Queues {
			queues = append(queues, name)
		}
		sortStrings(queues)
		cl.history = newHistory(qh, queues)
	}
	if cl.periodic, err = validatePeriodic(c.Periodic, cl.limits(), cl.clock.Now()); err != nil {
		return nil, err
	}
	for _, e := range cl.periodic {
		e.since = cl.clock.Now()
		if err := cl.checkLocalKinds([]InsertParams{{Kind: e.job.Kind}}); err != nil {
			return nil, fmt.Errorf("backlog: periodic job %q: %w", e.job.Name, err)
		}
	}
	return cl, nil
}

func defaultWorkerID() string {
	host, _ := os.Hostname()
	if host == "" {
		host = "host"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// WorkerID returns the id this client claims jobs under.
func (c *Client) WorkerID() string { return c.cfg.WorkerID }

// Running returns snapshots of the jobs executing on this node now, in no
// particular order.
func (c *Client) Running() []*Job {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*Job, 0, len(c.running))
	for _, e := range c.running {
		j := *e.job
		out = append(out, &j)
	}
	return out
}

// Store returns the store the client was built on, for administration
// (List, Stats, Cancel, …).
func (c *Client) Store() contract.Store { return c.store }

// Config returns the client's configuration with every default filled in
// (lease duration, heartbeat interval, retry policy, limits, clock, …), so
// components built on a client (the HTTP API's remote workers) apply the
// same settings. Maps and pointers are shared: don't modify them.
func (c *Client) Config() Config { return c.cfg }

// Emit delivers e to the client's observers, as if the engine had produced
// it. Components that execute jobs outside the engine (the HTTP API's
// remote workers) report claims and outcomes through it, so metrics and
// logs cover them too.
func (c *Client) Emit(e Event) { c.emit(e) }

// NewInsert builds validated InsertParams for typed args: the kind is
// args.Kind() and the args their JSON encoding. now is used for defaults
// (zero RunAt); pass the client's clock time or time.Now(). Errors wrap
// ErrInvalidJob.
func NewInsert(args Args, opts *Options, now time.Time) (InsertParams, error) {
	b, err := encodeArgs(args)
	if err != nil {
		return InsertParams{}, err
	}
	return buildInsert(args.Kind(), b, opts, contract.UTC(now), limits{maxArgs: DefaultMaxArgsBytes})
}

// encodeArgs returns the JSON encoding of typed args; errors wrap
// ErrInvalidJob.
func encodeArgs(args Args) ([]byte, error) {
	if args == nil {
		return nil, invalid("args are nil")
	}
	b, err := json.Marshal(args)
	if err != nil {
		return nil, invalid("kind %q: encode args: %v", args.Kind(), err)
	}
	return b, nil
}

// NewInsertRaw builds validated InsertParams from a kind and JSON args (nil
// args mean {}). Errors wrap ErrInvalidJob.
func NewInsertRaw(kind string, args []byte, opts *Options, now time.Time) (InsertParams, error) {
	return buildInsert(kind, args, opts, contract.UTC(now), limits{maxArgs: DefaultMaxArgsBytes})
}

// Enqueue inserts one typed job. A unique-key duplicate returns the live job
// with Duplicate set, and no error. Invalid input returns an error wrapping
// ErrInvalidJob and inserts nothing. A kind that neither this client nor
// any live registered worker handles is refused with an error wrapping
// ErrUnknownKind (see CheckKinds), unless Config.AllowUnknownKinds is set.
func (c *Client) Enqueue(ctx context.Context, args Args, opts *Options) (InsertResult, error) {
	b, err := encodeArgs(args)
	if err != nil {
		return InsertResult{}, err
	}
	return c.EnqueueRaw(ctx, args.Kind(), b, opts)
}

// EnqueueRaw inserts one job given its kind and JSON args (nil means {}).
func (c *Client) EnqueueRaw(ctx context.Context, kind string, args []byte, opts *Options) (InsertResult, error) {
	p, err := buildInsert(kind, args, opts, c.clock.Now(), c.limits())
	if err != nil {
		return InsertResult{}, err
	}
	return c.enqueueOne(ctx, p)
}

// enqueueOne inserts one built job through EnqueueMany.
func (c *Client) enqueueOne(ctx context.Context, p InsertParams) (InsertResult, error) {
	res, err := c.EnqueueMany(ctx, []InsertParams{p})
	if err != nil {
		return InsertResult{}, err
	}
	return res[0], nil
}

// EnqueueMany inserts many jobs in one store round trip and returns one
// result per input, in order. Every input is validated first (defaults are
// filled for zero fields); one invalid input fails the whole call, naming
// its index, and inserts nothing; so does one job of a kind the client
// refuses (ErrUnknownKind, see Enqueue). With Config.Encryption, args are sealed
// after validation (a unique key stays in clear and works as before), and
// the returned jobs hold the sealed args.
func (c *Client) EnqueueMany(ctx context.Context, jobs []InsertParams) ([]InsertResult, error) {
	ps, err := c.prepare(ctx, jobs)
	if err != nil {
		return nil, err
	}
	ctx, span := c.tracing.startSend(ctx, ps)
	res, err := c.store.Insert(ctx, c.clock.Now(), ps)
	endSend(span, res, err)
	if err != nil {
		return nil, fmt.Errorf("backlog: insert %d jobs: %w", len(ps), err)
	}
	c.afterInsert(res)
	return res, nil
}

// EnqueueTx inserts jobs inside tx, the caller's open transaction (the type
// the store documents: *sql.Tx for the database/sql stores, pgx.Tx for
// Postgres). The jobs become visible when the caller commits and vanish on
// rollback. Returns ErrUnsupported when the store lacks TxInserter;
// validation and unknown kinds fail as in EnqueueMany.
// In-process workers are woken at once; other nodes see the jobs at their
// next poll or notification after the commit.
func (c *Client) EnqueueTx(ctx context.Context, tx any, jobs []InsertParams) ([]InsertResult, error) {
	ps, err := c.prepare(ctx, jobs)
	if err != nil {
		return nil, err
	}
	ti, ok := c.store.(contract.TxInserter)
	if !ok {
		return nil, fmt.Errorf("%w: transactional insert", ErrUnsupported)
	}
	ctx, span := c.tracing.startSend(ctx, ps)
	res, err := ti.InsertTx(ctx, tx, c.clock.Now(), ps)
	endSend(span, res, err)
	if err != nil {
		return nil, fmt.Errorf("backlog: insert %d jobs in transaction: %w", len(ps), err)
	}
	c.afterInsert(res)
	return res, nil
}

// EnqueueArgsTx inserts one typed job inside tx, the caller's open
// transaction: the single form of EnqueueTx, as Enqueue is of
// EnqueueMany. The kind is args.Kind() and the args their JSON encoding;
// opts are Enqueue's (nil: the defaults). The job becomes visible when
// the caller commits and vanishes on rollback. A unique-key duplicate
// returns the live job with Duplicate set, and no error. Errors: invalid
// input wraps ErrInvalidJob, an unknown kind ErrUnknownKind (see
// Enqueue), a store without transactional inserts ErrUnsupported, and a
// transaction of a type the store does not take the store's error.
func (c *Client) EnqueueArgsTx(ctx context.Context, tx any, args Args, opts *Options) (InsertResult, error) {
	b, err := encodeArgs(args)
	if err != nil {
		return InsertResult{}, err
	}
	p, err := buildInsert(args.Kind(), b, opts, c.clock.Now(), c.limits())
	if err != nil {
		return InsertResult{}, err
	}
	res, err := c.EnqueueTx(ctx, tx, []InsertParams{p})
	if err != nil {
		return InsertResult{}, err
	}
	return res[0], nil
}

func (c *Client) limits() limits { return limits{maxArgs: c.cfg.MaxArgsBytes, kinds: c.cfg.Handlers} }

// keys returns the keyring of encryption at rest, nil when it is off.
func (c *Client) keys() *Keyring {
	if c.cfg.Encryption == nil {
		return nil
	}
	return c.cfg.Encryption.Keys
}

// checkLocalKinds refuses a job of a kind this client neither handles
// nor declares, when it has handlers and Config.AllowUnknownKinds is off:
// NewClient's check of periodic jobs, made before any worker registered.
func (c *Client) checkLocalKinds(jobs []InsertParams) error {
	h := c.cfg.Handlers
	if c.cfg.AllowUnknownKinds || h.count() == 0 {
		return nil
	}
	for _, j := range jobs {
		if !h.Known(j.Kind) {
			return fmt.Errorf("%w %q: this client runs handlers and has none for it (Config.AllowUnknownKinds lets it enqueue kinds other nodes handle)", ErrUnknownKind, j.Kind)
		}
	}
	return nil
}

func (c *Client) prepare(ctx context.Context, jobs []InsertParams) ([]InsertParams, error) {
	if err := c.CheckKinds(ctx, jobs); err != nil {
		return nil, err
	}
	now := c.clock.Now()
	out := make([]InsertParams, len(jobs))
	for i, j := range jobs {
		opts := &Options{
			Queue: j.Queue, Priority: j.Priority, RunAt: j.RunAt, MaxAttempts: j.MaxAttempts,
			UniqueKey: j.UniqueKey, UniqueScope: j.UniqueScope, UniqueFor: j.UniqueFor,
			PartitionKey: j.PartitionKey, Tags: j.Tags, Metadata: j.Metadata, Deadline: j.Deadline,
		}
		p, err := buildInsert(j.Kind, j.Args, opts, now, c.limits())
		if err == nil {
			p.UniqueFingerprint = j.UniqueFingerprint
			err = checkFingerprint(&p)
		}
		if err == nil {
			p.DependsOn, p.DependsOnIndex, p.OnDependencyFailure, p.Step, p.InWorkflow = j.DependsOn, j.DependsOnIndex, j.OnDependencyFailure, j.Step, j.InWorkflow
			err = c.checkDependencies(&p, i)
		}
		if err != nil {
			if len(jobs) == 1 {
				return nil, err
			}
			return nil, fmt.Errorf("job %d: %w", i, err)
		}
		if k := c.keys(); k != nil {
			// After validation: limits apply to the plaintext. Args a
			// producer already sealed are kept as given.
			p.Args = k.SealArgs(p.Kind, p.Args)
		}
		out[i] = p
	}
	return out, nil
}

// afterInsert wakes local producers of queues that received due jobs and
// tells observers.
func (c *Client) afterInsert(res []InsertResult) {
	now := c.clock.Now()
	woken := map[string]bool{}
	for _, r := range res {
		if r.Duplicate || r.Job == nil {
			continue
		}
		c.emit(Event{Kind: EventJobInserted, At: now, Queue: r.Job.Queue, Job: r.Job})
		if !woken[r.Job.Queue] && !r.Job.RunAt.After(now) {
			woken[r.Job.Queue] = true
			if p := c.producers[r.Job.Queue]; p != nil {
				p.wake()
			}
		}
	}
}

// PauseQueue stops every node from claiming jobs of queue (persisted in the
// store) until ResumeQueue; running jobs finish normally.
func (c *Client) PauseQueue(ctx context.Context, queue string) error {
	if err := contract.ValidateQueueName(queue); err != nil {
		return err
	}
	return c.store.PauseQueue(ctx, queue, c.clock.Now())
}

// ResumeQueue lifts a pause; this node's producer is woken at once, others
// by notification or at their next poll.
func (c *Client) ResumeQueue(ctx context.Context, queue string) error {
	if err := contract.ValidateQueueName(queue); err != nil {
		return err
	}
	if err := c.store.ResumeQueue(ctx, queue, c.clock.Now()); err != nil {
		return err
	}
	if p := c.producers[queue]; p != nil {
		p.wake()
	}
	return nil
}

// SetQueueLimits stores the concurrency limits of queue in the store,
// where every node's claims obey them (see QueueLimiter); zero limits
// lift them. It returns an error wrapping ErrUnsupported when the store
// is not a QueueLimiter, and one wrapping ErrInvalidJob for an invalid
// queue name or limits.
func (c *Client) SetQueueLimits(ctx context.Context, queue string, limits QueueLimits) error {
	if err := contract.ValidateQueueName(queue); err != nil {
		return err
	}
	if err := limits.Validate(); err != nil {
		return err
	}
	ql, ok := c.store.(contract.QueueLimiter)
	if !ok {
		return fmt.Errorf("backlog: queue limits: %w", ErrUnsupported)
	}
	return ql.SetQueueLimits(ctx, queue, limits.Normalized(), c.clock.Now())
}

// QueueLimits returns the concurrency limits of queue stored in the store
// (zero when none were set). It returns an error wrapping ErrUnsupported
// when the store is not a QueueLimiter.
func (c *Client) QueueLimits(ctx context.Context, queue string) (QueueLimits, error) {
	if err := contract.ValidateQueueName(queue); err != nil {
		return QueueLimits{}, err
	}
	ql, ok := c.store.(contract.QueueLimiter)
	if !ok {
		return QueueLimits{}, fmt.Errorf("backlog: queue limits: %w", ErrUnsupported)
	}
	return ql.QueueLimits(ctx, queue)
}

// seedLimits stores the configured limits of the queues whose limits the
// store has never had (QueueConfig.Limits: the database wins).
func (c *Client) seedLimits(ctx context.Context) error {
	for name, q := range c.cfg.Queues {
		if q.Limits == nil {
			continue
		}
		ql, ok := c.store.(contract.QueueLimiter)
		if !ok {
			return fmt.Errorf("backlog: queue %q has limits: %w", name, ErrUnsupported)
		}
		if _, _, err := ql.InitQueueLimits(ctx, name, q.Limits.Normalized(), c.clock.Now()); err != nil {
			return fmt.Errorf("backlog: queue %q: store its limits: %w", name, err)
		}
	}
	return nil
}

// CancelJob cancels a job in the store and, if it runs on this node,
// cancels its handler's context. Other nodes running it learn of it by
// notification (when the store has them) or when their fenced finish fails.
func (c *Client) CancelJob(ctx context.Context, id int64) (*Job, error) {
	j, err := c.store.Cancel(ctx, id, c.clock.Now())
	if err != nil {
		return nil, err
	}
	c.cancelLocal(id)
	c.waits.deliver(j)
	return j, nil
}

// GetJob returns the job with id as the store holds it: values sealed by
// Config.Encryption stay sealed (Keyring.OpenJob opens them). A missing job
// returns ErrNotFound.
func (c *Client) GetJob(ctx context.Context, id int64) (*Job, error) {
	return c.store.Get(ctx, id)
}

// ListJobs returns one page of the jobs matching p, ordered by id
// (ascending, or descending when p.Desc), starting after p.AfterID when it
// is non-zero: pass the last id of a page to get the next. p.Limit caps the
// page (0 means 100); a page shorter than its limit is the last. Jobs are
// returned as stored, sealed values sealed (see GetJob). A WorkflowID or
// WorkflowFirst filter on a store without contract.Dependencies returns
// an error wrapping ErrUnsupported.
func (c *Client) ListJobs(ctx context.Context, p ListParams) ([]*Job, error) {
	if _, ok := c.store.(contract.Dependencies); (p.WorkflowID != 0 || p.WorkflowFirst) && !ok {
		return nil, fmt.Errorf("backlog: workflow filter: %w (the store does not implement contract.Dependencies)", ErrUnsupported)
	}
	return c.store.List(ctx, p)
}

// ListArchivedJobs is ListJobs over the archive of finished jobs (see
// Retention.Archive): the same filters, orders and keyset paging. It
// returns an error wrapping ErrUnsupported when the store has no archive
// (contract.Archiver).
func (c *Client) ListArchivedJobs(ctx context.Context, p ListParams) ([]*Job, error) {
	a, ok := c.store.(contract.Archiver)
	if !ok {
		return nil, fmt.Errorf("backlog: archived jobs: %w", ErrUnsupported)
	}
	return a.ListArchived(ctx, p)
}

// GetArchivedJob returns a job from the archive of finished jobs (see
// Retention.Archive), as stored: ErrNotFound when the archive has no job
// with that id, ErrUnsupported when the store has no archive.
func (c *Client) GetArchivedJob(ctx context.Context, id int64) (*Job, error) {
	a, ok := c.store.(contract.Archiver)
	if !ok {
		return nil, fmt.Errorf("backlog: archived job %d: %w", id, ErrUnsupported)
	}
	return a.GetArchived(ctx, id)
}

// FindJob returns the job with id from the jobs or, when they have none
// with that id, from the archive (on a store that has one); archived
// reports which. A job in neither returns ErrNotFound.
func (c *Client) FindJob(ctx context.Context, id int64) (j *Job, archived bool, err error) {
	j, err = c.store.Get(ctx, id)
	if err == nil || !errors.Is(err, ErrNotFound) {
		return j, false, err
	}
	a, ok := c.store.(contract.Archiver)
	if !ok {
		return nil, false, err
	}
	if aj, aerr := a.GetArchived(ctx, id); aerr == nil {
		return aj, true, nil
	} else if !errors.Is(aerr, ErrNotFound) {
		return nil, false, aerr
	}
	return nil, false, err
}

// RetryJob makes a job that is not running available now (RunAt is the
// client's clock time, FinishedAt cleared) and returns it as stored; a job
// whose attempts are used up gets exactly one more. This node's producer of
// the job's queue is woken at once, others by notification or at their
// next poll. A running job returns ErrInvalidState, and so does a job
// whose unique key is now held by another live job; a missing one
// ErrNotFound.
func (c *Client) RetryJob(ctx context.Context, id int64) (*Job, error) {
	j, err := c.store.Retry(ctx, id, contract.UTC(c.clock.Now()))
	if err != nil {
		return nil, err
	}
	if p := c.producers[j.Queue]; p != nil {
		p.wake()
	}
	return j, nil
}

// DeleteJob removes a job that is not running, whatever its state. A
// running job returns ErrInvalidState (cancel it first, see CancelJob); a
// missing one ErrNotFound.
func (c *Client) DeleteJob(ctx context.Context, id int64) error {
	return c.store.Delete(ctx, id)
}

// ListWorkers returns every record of the worker registry (in-process
// clients that work queues and registered remote workers), ordered by id;
// judge each one's liveness with WorkerInfo.Liveness
// and the client's WorkerStaleAfter and WorkerDeadAfter.
func (c *Client) ListWorkers(ctx context.Context) ([]WorkerInfo, error) {
	return c.store.Workers(ctx)
}

func (c *Client) cancelLocal(id int64) {
	c.mu.Lock()
	e := c.running[id]
	c.mu.Unlock()
	if e != nil {
		e.cancel(errJobCancelled)
	}
}

var errJobCancelled = errors.New("backlog: job cancelled")

func (c *Client) emit(e Event) {
	if c.history != nil {
		c.history.observe(e, c.clock.Now())
	}
	for _, o := range c.cfg.Observers {
		o.Observe(e)
	}
}

// Start registers the worker and starts the queues' fetch loops, the
// completer, heartbeat, maintenance and (when the store has it) the
// notification listener. It returns at once. A client without queues still
// runs maintenance. Start fails if called twice or after Stop.
func (c *Client) Start(ctx context.Context) error {
	c.mu.Lock()
	if c.started || c.stopped {
		c.mu.Unlock()
		return errors.New("backlog: client already started or stopped")
	}
	c.started = true
	c.mu.Unlock()

	c.startedAt = c.clock.Now()
	if err := c.seedLimits(ctx); err != nil {
		return err
	}
	if len(c.producers) > 0 {
		if err := c.store.RegisterWorker(ctx, c.workerInfo()); err != nil {
			return fmt.Errorf("backlog: register worker: %w", err)
		}
		c.emit(Event{Kind: EventWorkerRegistered, At: c.startedAt, Reason: c.cfg.WorkerID})
	}
	loopCtx, stopLoop := context.WithCancel(context.WithoutCancel(ctx))
	beatCtx, stopBeat := context.WithCancel(context.WithoutCancel(ctx))
	workCtx, cancelWork := context.WithCancelCause(context.WithoutCancel(ctx))
	c.mu.Lock()
	c.stopLoop, c.stopBeat, c.workCtx, c.cancelWork = stopLoop, stopBeat, workCtx, cancelWork
	c.mu.Unlock()

	c.completer = newCompleter(c)
	c.completer.start()
	for _, p := range c.producers {
		c.loops.Add(1)
		go func() { defer c.loops.Done(); p.run(loopCtx) }()
	}
	// Heartbeat and listener outlive the producers: during a soft stop the
	// running jobs' leases must still be extended, and cancellations still
	// reach them.
	if len(c.producers) > 0 {
		c.beats.Add(1)
		go func() { defer c.beats.Done(); c.heartbeatLoop(beatCtx) }()
		if n, ok := c.store.(contract.Notifier); ok {
			c.beats.Add(1)
			go func() { defer c.beats.Done(); c.listenLoop(beatCtx, n) }()
		}
	}
	if c.cfg.MaintenanceInterval > 0 {
		c.loops.Add(1)
		go func() { defer c.loops.Done(); c.maintenanceLoop(loopCtx) }()
	}
	if len(c.periodic) > 0 {
		c.loops.Add(1)
		go func() { defer c.loops.Done(); c.periodicLoop(loopCtx) }()
	}
	c.log.Info("backlog client started", "queues", len(c.producers))
	return nil
}

func (c *Client) workerInfo() WorkerInfo {
	host, _ := os.Hostname()
	qs := make([]string, 0, len(c.producers))
	var meta map[string]string
	for q, p := range c.producers {
		qs = append(qs, q)
		if meta == nil {
			meta = make(map[string]string, len(c.producers))
		}
		meta[WorkersMetadataPrefix+q] = strconv.Itoa(p.workers())
	}
	sortStrings(qs)
	w := WorkerInfo{
		ID: c.cfg.WorkerID, Host: host, PID: os.Getpid(), Queues: qs, Tags: c.cfg.WorkerTags, Metadata: meta,
		StartedAt: c.startedAt, HeartbeatAt: c.clock.Now(),
	}
	if len(c.producers) > 0 && c.cfg.Handlers != nil {
		// The kinds this node runs, for every client's CheckKinds.
		w = WithWorkerKinds(w, c.cfg.Handlers.Kinds())
	}
	return w
}

// Stop shuts the client down. Soft stop first: no new claims, running jobs
// go on until they finish or ctx is done. Then, if jobs are still running,
// hard stop: their contexts are cancelled (ErrShutdown reports the cause)
// and each job whose handler returns is handed back (available again, no
// attempt used). Pending outcomes are written, the worker deregisters. Stop
// returns ctx.Err() when it had to hard-stop, nil otherwise. It waits at most
// HardStopGrace after the hard stop for handlers to return; jobs whose
// handlers ignore their context are left to lease expiry and rescue.
func (c *Client) Stop(ctx context.Context) error {
	defer c.waits.close()
	c.mu.Lock()
	if !c.started || c.stopped {
		c.stopped = true
		c.mu.Unlock()
		return nil
	}
	c.stopped = true
	c.mu.Unlock()

	c.stopLoop()
	c.loops.Wait()

	done := make(chan struct{})
	go func() { c.execs.Wait(); close(done) }()
	var hardErr error
	select {
	case <-done:
	case <-ctx.Done():
		hardErr = ctx.Err()
		c.log.Warn("backlog soft stop timed out; cancelling running jobs")
		c.cancelWork(errShutdown)
		select {
		case <-done:
		case <-time.After(HardStopGrace):
			c.log.Error("backlog hard stop: some handlers ignored cancellation; their jobs return after lease expiry")
		}
	}
	c.cancelWork(errShutdown)
	c.stopBeat()
	c.beats.Wait()
	c.completer.stop()
	c.flushHistory(ctx)
	if len(c.producers) > 0 {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if err := c.store.DeregisterWorker(dctx, c.cfg.WorkerID); err != nil {
			c.log.Warn("backlog: deregister worker", "err", err)
		}
		cancel()
	}
	c.log.Info("backlog client stopped")
	return hardErr
}

// StopAndCancel hard-stops at once: handler contexts are cancelled and
// their jobs handed back without using an attempt (see Stop).
func (c *Client) StopAndCancel(ctx context.Context) error {
	done, cancel := context.WithCancel(ctx)
	cancel()
	err := c.Stop(done)
	if errors.Is(err, context.Canceled) && ctx.Err() == nil {
		return nil
	}
	return err
}

// HardStopGrace is how long Stop waits, after cancelling handler contexts,
// for handlers to return before giving up on them.
const HardStopGrace = 5 * time.Second
