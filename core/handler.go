package core

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

// HandlerFunc runs one attempt of a job. Its returned error decides the
// outcome (see Snooze, Cancel, Permanent, Continue). ctx is cancelled at the
// kind's timeout, the job's deadline, when the job is cancelled elsewhere,
// and at a hard stop.
type HandlerFunc func(ctx context.Context, job *Job) error

// Middleware wraps handler execution, composing like net/http middleware:
// the first in Config.Middleware is the outermost.
type Middleware func(next HandlerFunc) HandlerFunc

// TypedJob is a job whose args were decoded into T. The embedded *Job keeps
// every stored field; Args shadows the raw Job.Args bytes.
type TypedJob[T Args] struct {
	*Job
	Args T
}

// KindOption configures one kind's handler.
type KindOption func(*kindConfig)

type kindConfig struct {
	timeout     time.Duration
	retry       RetryPolicy
	maxAttempts int // 0: DefaultMaxAttempts (see WithMaxAttempts)
}

// WithTimeout bounds one attempt of the kind; at the timeout the handler's
// context is cancelled and the attempt fails (and is retried by policy).
// Zero or negative means no timeout beyond Config.DefaultTimeout.
func WithTimeout(d time.Duration) KindOption { return func(c *kindConfig) { c.timeout = d } }

// WithRetry sets the kind's retry policy, for example
// DelayList{10 * time.Second, 20 * time.Second, 30 * time.Second}.
func WithRetry(p RetryPolicy) KindOption { return func(c *kindConfig) { c.retry = p } }

type handlerEntry struct {
	fn HandlerFunc
	tx bool // registered by HandleTx: needs a TxRunner store
	kindConfig
}

// Handlers maps kinds to handlers. Register everything before the client
// starts; it is safe for concurrent reads after that.
type Handlers struct {
	mu sync.RWMutex
	m  map[string]*handlerEntry
}

// NewHandlers returns an empty registry.
func NewHandlers() *Handlers { return &Handlers{m: map[string]*handlerEntry{}} }

// HandleRaw registers fn for kind, receiving args as raw JSON in job.Args.
// Registering a kind that already has a handler panics, naming the kind
// (as http.ServeMux does for a pattern registered twice).
func (h *Handlers) HandleRaw(kind string, fn HandlerFunc, opts ...KindOption) {
	e := &handlerEntry{fn: fn}
	for _, o := range opts {
		o(&e.kindConfig)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, dup := h.m[kind]; dup {
		panic(fmt.Sprintf("backlog: kind %q registered twice: a kind has one handler", kind))
	}
	h.m[kind] = e
}

// Declare names a kind that other processes run (remote workers of the
// HTTP API, shell or webhook handlers of another node) with the options
// that hold for its jobs wherever they run: WithRetry sets the policy
// that schedules the retry of every failure of the kind, whether a local
// handler, a remote worker (RemoteWorkers.Report decides through
// Client.RetryPolicy) or a rescue reports it, so a kind has one retry
// policy; WithMaxAttempts, or WithRetries ("N delays mean N retries"),
// sets the attempts its jobs get when enqueued without their own
// (Client.MaxAttempts). A declared kind counts as known to Enqueue's unknown-kind
// check; this client does not run it: a job of the kind that one of its
// queues claims fails its attempt with ErrUnknownKind and is retried, as
// for a kind it has no word of. Like a handler, a declaration makes the
// client check kinds at Enqueue (Config.AllowUnknownKinds turns that off).
// Declaring a kind that has a handler, or twice, panics, as registering
// twice does.
func (h *Handlers) Declare(kind string, opts ...KindOption) {
	e := &handlerEntry{}
	for _, o := range opts {
		o(&e.kindConfig)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, dup := h.m[kind]; dup {
		panic(fmt.Sprintf("backlog: kind %q registered twice: a kind has one handler or one declaration", kind))
	}
	h.m[kind] = e
}

// Has reports whether kind has a handler here; a nil registry has none
// (a declared kind has none: see Declare).
func (h *Handlers) Has(kind string) bool {
	e := h.lookup(kind)
	return e != nil && e.fn != nil
}

// Known reports whether kind has a handler here or was declared (see
// Declare): the kinds Client.CheckKinds accepts without reading the
// worker registry.
func (h *Handlers) Known(kind string) bool { return h.lookup(kind) != nil }

// count returns how many kinds are registered or declared; 0 for a nil
// registry.
func (h *Handlers) count() int {
	if h == nil {
		return 0
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.m)
}

// Kinds returns the kinds that have a handler here, sorted (declared
// kinds are not among them).
func (h *Handlers) Kinds() []string {
	h.mu.RLock()
	defer h.mu.RUnlock()
	out := make([]string, 0, len(h.m))
	for k, e := range h.m {
		if e.fn != nil {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func (h *Handlers) lookup(kind string) *handlerEntry {
	if h == nil {
		return nil
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.m[kind]
}

// Handle registers a typed handler for T's kind (the Kind of T's zero
// value). Args are decoded from JSON before fn runs; args that don't decode
// discard the job (retrying cannot fix them). It panics when T's kind
// already has a handler (see HandleRaw).
func Handle[T Args](h *Handlers, fn func(ctx context.Context, job *TypedJob[T]) error, opts ...KindOption) {
	var zero T
	h.HandleRaw(zero.Kind(), func(ctx context.Context, job *Job) error {
		var args T
		if err := json.Unmarshal(job.Args, &args); err != nil {
			return Permanent(fmt.Errorf("decode %s args: %w", job.Kind, err))
		}
		return fn(ctx, &TypedJob[T]{Job: job, Args: args})
	}, opts...)
}

// execState travels in a handler's context: the fence of the running
// attempt, its result, and whether it completed inside a transaction.
type execState struct {
	mu          sync.Mutex
	job         *Job
	workerID    string
	maxResult   int
	result      []byte
	completedTx bool
	committedTx bool // HandleTx committed the attempt's outcome with its transaction
	store       contract.Store
	clock       Clock
	client      *Client // decides the outcome HandleTx writes in its transaction
}

type execKey struct{}

func execFrom(ctx context.Context) *execState {
	s, _ := ctx.Value(execKey{}).(*execState)
	return s
}

// RecordResult stores v's JSON encoding as the job's result when the
// attempt completes. It returns an error (and records nothing) outside a
// handler, when v does not encode, or when the encoding exceeds the client's
// MaxResultBytes.
func RecordResult(ctx context.Context, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("backlog: encode result: %w", err)
	}
	return RecordRawResult(ctx, b)
}

// RecordRawResult stores b as the job's result when the attempt completes;
// see RecordResult for the errors.
func RecordRawResult(ctx context.Context, b []byte) error {
	s := execFrom(ctx)
	if s == nil {
		return fmt.Errorf("backlog: RecordResult called outside a job handler")
	}
	if len(b) > s.maxResult {
		return fmt.Errorf("backlog: result is %d bytes, over the limit of %d", len(b), s.maxResult)
	}
	s.mu.Lock()
	s.result = append([]byte(nil), b...)
	s.mu.Unlock()
	return nil
}

// CompleteTx marks the running job completed inside tx, the caller's open
// transaction on the same database, so the handler's own writes and the
// completion commit together or not at all (transactional completion). Call
// it last in the transaction, commit, then return nil. It returns
// ErrUnsupported when the store lacks contract.TxCompleter or does not accept
// tx's type, and ErrLeaseLost when this attempt no longer holds the job (then
// roll back).
func CompleteTx(ctx context.Context, tx any) error {
	s := execFrom(ctx)
	if s == nil {
		return fmt.Errorf("backlog: CompleteTx called outside a job handler")
	}
	tc, ok := s.store.(contract.TxCompleter)
	if !ok {
		return fmt.Errorf("%w: transactional completion", ErrUnsupported)
	}
	s.mu.Lock()
	res := s.result
	s.mu.Unlock()
	err := tc.CompleteTx(ctx, tx, contract.Outcome{
		JobID: s.job.ID, WorkerID: s.workerID, ClaimSeq: s.job.ClaimSeq, Attempt: s.job.Attempt,
		Kind: contract.OutcomeComplete, At: s.clock.Now(), Result: res,
	})
	if err == nil {
		s.mu.Lock()
		s.completedTx = true
		s.mu.Unlock()
	}
	return err
}

// ResultLimit returns the most bytes RecordRawResult accepts in this
// handler's context (the client's MaxResultBytes), or 0 outside a handler.
func ResultLimit(ctx context.Context) int {
	if s := execFrom(ctx); s != nil {
		return s.maxResult
	}
	return 0
}
