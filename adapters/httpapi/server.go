package httpapi

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
)

// Tokens are the bearer tokens of the three roles. An empty token disables
// its role; when all three are empty the API is open (no authentication).
// The admin token may call every route.
type Tokens struct {
	Producer string // submit, list and get jobs, list queues and periodic jobs
	Worker   string // register, heartbeat, claim, deregister, outcomes, get a job
	Admin    string // everything, including cancel, retry, delete, pause, resume, run periodic jobs now, list workers, list and release unique-key holds
}

// Config configures a Server. The zero value is an open API with default
// limits.
type Config struct {
	// Tokens are the bearer tokens per role; all empty (and no
	// WorkerTokens) means no auth.
	Tokens Tokens
	// WorkerTokens are per-worker bearer tokens by credential name (1..64
	// bytes of letters, digits, '.', '_', '-'; not "admin", "worker" or
	// "producer"), each allowed the worker role's calls. A worker id is
	// bound to the credential that registers it: while its record lives,
	// no other credential but the admin token may heartbeat, claim,
	// report outcomes or deregister under it (403 forbidden). Each token
	// must differ from every other. See docs/security.md.
	WorkerTokens map[string]string
	// LeaseSecret signs lease tokens (HMAC-SHA256); at least
	// MinLeaseSecretBytes (32) bytes, the same on every server sharing
	// the store. Nil means the secret kept in the store (contract.Settings,
	// key LeaseSecretSetting, created from crypto/rand by the first server
	// that needs it and read by every other); on a store without
	// contract.Settings, a random secret of this process, with a warning:
	// its tokens are refused after a restart and by other servers.
	LeaseSecret []byte
	// PreviousLeaseSecrets still verify lease tokens but sign none: list
	// the old secret here while rotating, until the executions it signed
	// have ended. Each is at least MinLeaseSecretBytes bytes.
	PreviousLeaseSecrets [][]byte
	// MaxBodyBytes limits a request body; larger bodies get 413
	// body-too-large. 0 means DefaultMaxBodyBytes (8 MiB).
	MaxBodyBytes int64
	// MaxClaimWait caps a claim's wait_seconds (the spec allows 0..60 s;
	// a longer wait is rejected, a shorter cap shortens the wait). 0 means
	// 60 s.
	MaxClaimWait time.Duration
	// ClaimPollInterval is how often a long-polling claim looks for due
	// jobs when no wake-up arrives (scheduled jobs coming due, inserts by
	// other nodes on stores without notifications). 0 means 250 ms, or,
	// when the store sends notifications (contract.Notifier: inserts anywhere
	// wake waiting claims at once), the client's PollInterval (1 s by
	// default), as the engine polls: idle workers then cost a claim a
	// second each instead of four.
	ClaimPollInterval time.Duration
	// MaxQueues caps the queues submissions may create: once the store
	// holds MaxQueues queues (Store.Stats: queues with jobs or a pause), a
	// submission naming a queue it does not hold is refused whole with
	// 422 too-many-queues. 0 means DefaultMaxQueues (1000); negative
	// means no cap.
	MaxQueues int
	// AllowedQueues, when not nil, are the only queues submissions may
	// name: a job of any other queue is refused, with its submission, with
	// 422 queue-not-allowed (backlog serve --queues-from-config-only sets
	// it to the configured queues).
	AllowedQueues []string
	// Logger receives request logs (each with a correlation_id attribute);
	// nil means the client's logger.
	Logger *slog.Logger
	// StatsCacheTTL is how long GET /v1/queues reuses its answer: the
	// per-state counts scan every job, and each open dashboard polls them.
	// Requests arriving while a read is in flight share it. Pause and
	// resume answer with fresh counts. 0 means DefaultStatsCacheTTL (1 s);
	// negative disables reuse.
	StatsCacheTTL time.Duration
	// StatsCache is where GET /v1/queues reads its counts; nil means a
	// cache of the server's own. Share one core.StatsCache between the API,
	// the Prometheus gauges and anything else that reads Store.Stats in the
	// process, so that they all share one scan.
	StatsCache *core.StatsCache
	// BodyReadTimeout is how long a client has to send a request's body,
	// from the moment its headers have been read; a slower body is cut off
	// (400, connection closed). 0 means DefaultBodyReadTimeout (30 s);
	// negative means no deadline. Headers are the http.Server's business
	// (its ReadHeaderTimeout).
	BodyReadTimeout time.Duration
	// WriteTimeout bounds handling a request and writing its answer, from
	// the moment its headers have been read; a long-polling claim gets
	// MaxClaimWait on top. A client that reads its answer slower has its
	// connection closed. 0 means DefaultWriteTimeout (60 s); negative means
	// no deadline.
	WriteTimeout time.Duration
	// MaxPageBytes is the byte budget of a list page and of a claim's
	// answer: a page stops taking jobs, and a claim stops claiming, once
	// the args and results of its jobs reach it (at least one job is
	// always returned; a page cut short carries next_after). 0 means
	// DefaultMaxPageBytes (8 MiB).
	MaxPageBytes int
	// OpenSealedFor names the roles that receive sealed values (args,
	// results, error text: encryption at rest, core.Config.Encryption of
	// the server's client) opened: a comma-separated list of "producer",
	// "worker" and "admin", or "none". "" means DefaultOpenSealedFor
	// ("worker,admin": remote workers get args they can run, operators a
	// readable dashboard; producers read ciphertext). A caller holding
	// several roles through one token gets values opened when any of them
	// is listed; on an open API (no tokens) every caller holds every role.
	// Without keys on the client nothing is opened, and values sealed
	// with a key the server lacks stay sealed. See docs/security.md.
	OpenSealedFor string
	// AcceptSealedArgs accepts submitted args that producers sealed
	// themselves (the {"backlog_enc": …} envelope of core.Keyring.SealArgs),
	// for producers that seal on their side. Off (the default), such args
	// are refused with 400 invalid-request, so that no producer can submit
	// a copy of another job's sealed args (a replay: it runs with that
	// job's plaintext, which the producer never saw). Malformed envelopes
	// are refused either way; with keys on the client, so are envelopes
	// that do not open for the job's kind. See docs/security.md.
	AcceptSealedArgs bool
	// MaxHeavyRequests bounds how many list pages and claims hold jobs in
	// memory at once; a request that finds no slot free within 5 s is
	// answered 429 too-many-requests with Retry-After. Long-polling claims
	// hold a slot only while they hold jobs. 0 means
	// DefaultMaxHeavyRequests (4).
	MaxHeavyRequests int
	// MaxUniqueFor caps what a submission may ask for in
	// unique_for_seconds (how long its unique key stays held after the
	// job finishes): a longer one is refused with 400 invalid-request,
	// so no caller can hold a key for long beyond this. 0 means
	// DefaultMaxUniqueFor (30 days); at most contract.MaxUniqueFor.
	MaxUniqueFor time.Duration
}

// Defaults of Config.
const (
	DefaultMaxBodyBytes      = 8 << 20
	DefaultMaxClaimWait      = 60 * time.Second
	DefaultClaimPollInterval = 250 * time.Millisecond
	DefaultStatsCacheTTL     = time.Second
	DefaultOpenSealedFor     = "worker,admin"
	// MaxLeaseExtension bounds extend_seconds of POST /v1/jobs/{id}/lease.
	MaxLeaseExtension = time.Hour
	// MaxBatch is the most jobs one POST /v1/jobs/batch may carry.
	MaxBatch = 1000
	// MaxClaimLimit is the most jobs one claim may ask for, and the most a
	// list page may hold.
	MaxClaimLimit = 1000
	// MaxOutcomeBatch is the most outcomes one POST
	// /v1/workers/{id}/outcomes may carry.
	MaxOutcomeBatch = 1000
)

//go:embed openapi.json
var openapiDoc []byte

// role is a bit set of the roles a token grants or a route accepts.
type role uint8

const (
	roleProducer role = 1 << iota
	roleWorker
	roleAdmin
	rolePublic // no authentication at all
)

// route is one registered endpoint.
type route struct {
	method, path string // path in http.ServeMux syntax
	roles        role   // who may call it (admin always may)
	handle       func(s *Server, w http.ResponseWriter, r *http.Request) error
}

// routes lists every endpoint of the API.
var routes = []route{
	{"GET", "/healthz", rolePublic, (*Server).healthz},
	{"GET", "/v1/openapi.json", rolePublic, (*Server).openapi},

	{"POST", "/v1/jobs", roleProducer, (*Server).submit},
	{"POST", "/v1/jobs/batch", roleProducer, (*Server).submitBatch},
	{"POST", "/v1/jobs/bulk", roleAdmin, (*Server).bulk},
	{"GET", "/v1/jobs", roleProducer, (*Server).listJobs},
	{"GET", "/v1/jobs/{id}", roleProducer | roleWorker, (*Server).getJob},
	{"POST", "/v1/jobs/{id}/cancel", roleAdmin, (*Server).cancelJob},
	{"POST", "/v1/jobs/{id}/retry", roleAdmin, (*Server).retryJob},
	{"DELETE", "/v1/jobs/{id}", roleAdmin, (*Server).deleteJob},

	{"POST", "/v1/jobs/{id}/complete", roleWorker, (*Server).complete},
	{"POST", "/v1/jobs/{id}/fail", roleWorker, (*Server).fail},
	{"POST", "/v1/jobs/{id}/snooze", roleWorker, (*Server).snooze},
	{"POST", "/v1/jobs/{id}/continue", roleWorker, (*Server).continueJob},
	{"POST", "/v1/jobs/{id}/lease", roleWorker, (*Server).extendLease},
	{"POST", "/v1/jobs/{id}/progress", roleWorker, (*Server).recordProgress},

	{"POST", "/v1/workflows", roleProducer, (*Server).submitWorkflow},
	{"GET", "/v1/workflows", roleProducer, (*Server).listWorkflows},
	{"GET", "/v1/workflows/{id}", roleProducer, (*Server).getWorkflow},
	{"POST", "/v1/workflows/{id}/cancel", roleAdmin, (*Server).cancelWorkflow},
	{"POST", "/v1/batches", roleProducer, (*Server).submitBatchJobs},
	{"GET", "/v1/batches", roleProducer, (*Server).listBatches},
	{"GET", "/v1/batches/{id}", roleProducer, (*Server).getBatch},
	{"POST", "/v1/batches/{id}/cancel", roleAdmin, (*Server).cancelBatch},

	{"GET", "/v1/queues", roleProducer, (*Server).listQueues},
	{"POST", "/v1/queues/{name}/pause", roleAdmin, (*Server).pauseQueue},
	{"POST", "/v1/queues/{name}/resume", roleAdmin, (*Server).resumeQueue},
	{"GET", "/v1/queues/{name}/limits", roleProducer, (*Server).getQueueLimits},
	{"PUT", "/v1/queues/{name}/limits", roleAdmin, (*Server).setQueueLimits},
	{"GET", "/v1/queues/{name}/history", roleProducer, (*Server).queueHistory},

	{"GET", "/v1/kinds", roleProducer, (*Server).listKinds},

	{"GET", "/v1/periodic", roleProducer, (*Server).listPeriodic},
	{"POST", "/v1/periodic/{name}/pause", roleAdmin, (*Server).pausePeriodic},
	{"POST", "/v1/periodic/{name}/resume", roleAdmin, (*Server).resumePeriodic},
	{"POST", "/v1/periodic/{name}/run", roleAdmin, (*Server).runPeriodic},

	{"GET", "/v1/unique", roleAdmin, (*Server).listUniqueHolds},
	{"DELETE", "/v1/unique/{key}", roleAdmin, (*Server).releaseUniqueHold},

	{"GET", "/v1/workers", roleAdmin, (*Server).listWorkers},
	{"PUT", "/v1/workers/{id}", roleWorker, (*Server).registerWorker},
	{"POST", "/v1/workers/{id}/heartbeat", roleWorker, (*Server).heartbeat},
	{"POST", "/v1/workers/{id}/claim", roleWorker, (*Server).claim},
	{"POST", "/v1/workers/{id}/outcomes", roleWorker, (*Server).outcomes},
	{"DELETE", "/v1/workers/{id}", roleWorker, (*Server).deregisterWorker},
}

// Server is the HTTP API over a core.Client: an http.Handler serving /v1/…
// and /healthz. Create it with New; Close it before closing the client's
// store. It is safe for concurrent use.
type Server struct {
	c     *core.Client
	rw    *core.RemoteWorkers // the engine's remote-worker operations
	st    contract.Store
	cfg   Config
	ccfg  core.Config
	log   *slog.Logger
	clock core.Clock
	mux   *http.ServeMux

	open   bool
	tokens []tokenHash  // role tokens, then per-worker tokens
	lease  *leaseSigner // signs and verifies lease tokens
	opens  role         // roles that receive sealed values opened (OpenSealedFor)

	wake      *broadcaster
	workers   *workerCache
	claims    *claimMemory     // jobs this server handed out, for batched outcomes' events
	heavy     heavySlots       // list pages and claims holding jobs in memory now
	stats     *core.StatsCache // GET /v1/queues answers, shared for StatsCacheTTL
	queueGate queueGate        // MaxQueues and AllowedQueues (queuecap.go)
	waiting   atomic.Int64     // long-polls waiting now (for tests)

	ctx       context.Context // ended by Close: long-polls return, the listener stops
	cancel    context.CancelFunc
	bg        sync.WaitGroup
	closeOnce sync.Once
}

// New returns the API server over c: it uses c's store, validation, clock,
// lease and retry settings and observers. When the store implements
// contract.Notifier, New starts one listener goroutine that wakes long-polling
// claims; Close stops it. New returns an error for a nil client or a
// negative limit.
func New(c *core.Client, cfg Config) (*Server, error) {
	if c == nil {
		return nil, errors.New("httpapi: New needs a client")
	}
	if cfg.MaxBodyBytes < 0 || cfg.MaxClaimWait < 0 || cfg.ClaimPollInterval < 0 {
		return nil, errors.New("httpapi: MaxBodyBytes, MaxClaimWait and ClaimPollInterval must not be negative")
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.MaxClaimWait == 0 {
		cfg.MaxClaimWait = DefaultMaxClaimWait
	}
	if cfg.ClaimPollInterval == 0 {
		cfg.ClaimPollInterval = DefaultClaimPollInterval
		if _, ok := c.Store().(contract.Notifier); ok {
			cfg.ClaimPollInterval = max(c.Config().PollInterval, DefaultClaimPollInterval)
		}
	}
	if cfg.StatsCacheTTL == 0 {
		cfg.StatsCacheTTL = DefaultStatsCacheTTL
	}
	if cfg.BodyReadTimeout == 0 {
		cfg.BodyReadTimeout = DefaultBodyReadTimeout
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if cfg.MaxUniqueFor < 0 || cfg.MaxUniqueFor > contract.MaxUniqueFor {
		return nil, fmt.Errorf("httpapi: MaxUniqueFor %s is outside 0..%s", cfg.MaxUniqueFor, contract.MaxUniqueFor)
	}
	if cfg.MaxUniqueFor == 0 {
		cfg.MaxUniqueFor = DefaultMaxUniqueFor
	}
	if cfg.MaxPageBytes < 0 || cfg.MaxHeavyRequests < 0 {
		return nil, errors.New("httpapi: MaxPageBytes and MaxHeavyRequests must not be negative")
	}
	if cfg.MaxPageBytes == 0 {
		cfg.MaxPageBytes = DefaultMaxPageBytes
	}
	if cfg.MaxHeavyRequests == 0 {
		cfg.MaxHeavyRequests = DefaultMaxHeavyRequests
	}
	ccfg := c.Config()
	if cfg.Logger == nil {
		cfg.Logger = ccfg.Logger
	}
	s := &Server{
		c: c, rw: c.RemoteWorkers(), st: c.Store(), cfg: cfg, ccfg: ccfg, log: cfg.Logger, clock: ccfg.Clock,
		mux: http.NewServeMux(), wake: newBroadcaster(), workers: newWorkerCache(),
		claims: newClaimMemory(ccfg.LeaseDuration), heavy: make(heavySlots, cfg.MaxHeavyRequests),
	}
	s.stats = cfg.StatsCache
	if s.stats == nil {
		s.stats = core.NewStatsCache(s.st)
	}
	var err error
	if s.tokens, err = buildTokens(cfg); err != nil {
		return nil, err
	}
	s.open = len(s.tokens) == 0
	if s.lease, err = newLeaseSigner(s.st, cfg, cfg.Logger); err != nil {
		return nil, err
	}
	if s.opens, err = parseOpenSealedFor(cfg.OpenSealedFor); err != nil {
		return nil, err
	}
	for _, rt := range routes {
		s.mux.Handle(rt.method+" "+rt.path, s.endpoint(rt))
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if n, ok := s.st.(contract.Notifier); ok {
		s.bg.Add(1)
		go func() { defer s.bg.Done(); s.listen(n) }()
	}
	return s, nil
}

// Close ends waiting long-polls (they answer with the jobs they have,
// usually none) and stops the notification listener. It does not close
// the client or its store. It is idempotent and returns nil.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.cancel()
		s.bg.Wait()
	})
	return nil
}

// ServeHTTP implements http.Handler: it answers /v1/… and /healthz, with
// problem+json for unknown routes (404 not-found) and wrong methods (405
// method-not-allowed).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r = setDeadlines(w, r, s.cfg.BodyReadTimeout, s.cfg.WriteTimeout)
	r = s.withCorrelation(w, r)
	if _, pattern := s.mux.Handler(r); pattern == "" {
		RefuseBody(w, r)
		// Let the mux decide between 404 and 405 (it sets Allow), then
		// answer with a problem instead of its plain text.
		cw := &captureWriter{header: http.Header{}}
		s.mux.ServeHTTP(cw, r)
		if cw.status == http.StatusMethodNotAllowed {
			if allow := cw.header.Get("Allow"); allow != "" {
				w.Header().Set("Allow", allow)
			}
			s.writeProblem(w, r, newProblem(SlugMethodNotAllowed, "method "+r.Method+" is not allowed on "+r.URL.Path))
			return
		}
		if cw.status >= 300 && cw.status < 400 {
			// A redirect to the clean path.
			for k, v := range cw.header {
				w.Header()[k] = v
			}
			w.WriteHeader(cw.status)
			return
		}
		s.writeProblem(w, r, newProblem(SlugNotFound, "no route for "+r.Method+" "+r.URL.Path))
		return
	}
	s.mux.ServeHTTP(w, r)
}

// captureWriter records what the mux's fallback handlers write.
type captureWriter struct {
	header http.Header
	status int
}

func (c *captureWriter) Header() http.Header { return c.header }
func (c *captureWriter) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	return len(b), nil
}
func (c *captureWriter) WriteHeader(code int) {
	if c.status == 0 {
		c.status = code
	}
}

// endpoint wraps a route's handler with authentication and error writing.
func (s *Server) endpoint(rt route) http.Handler {
	longPoll := longPollRoutes[rt.method+" "+rt.path]
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The token is checked before anything reads the body; a refused
		// request's connection is closed without reading its body.
		if rt.roles&rolePublic == 0 {
			if p := s.authorize(r, rt.roles); p != nil {
				RefuseBody(w, r)
				s.writeProblem(w, r, p)
				return
			}
		}
		if longPoll && s.cfg.WriteTimeout > 0 {
			extendWrite(w, r, s.cfg.WriteTimeout+s.cfg.MaxClaimWait)
		}
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				reqFrom(r.Context()).log.Error("backlog http: handler panicked", "panic", v)
				s.writeProblem(w, r, &problem{slug: SlugInternal, detail: "internal error; see the server log for this correlation id"})
			}
		}()
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		if err := rt.handle(s, sw, r); err != nil {
			s.writeError(sw, r, err)
		}
		reqFrom(r.Context()).log.Debug("backlog http: request", "method", r.Method, "path", r.URL.Path,
			"status", sw.status, "duration", time.Since(start))
	})
}

// statusWriter remembers the status a handler wrote, for the request log.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap gives http.ResponseController the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// authorize checks the bearer token against every configured token in
// constant time (all are compared whatever matches) and returns a problem
// when the token is missing, unknown (401) or of a role the route does not
// accept (403). It records the token's credential name in the request's
// reqCtx.
func (s *Server) authorize(r *http.Request, allowed role) *problem {
	if s.open {
		reqFrom(r.Context()).roles = roleProducer | roleWorker | roleAdmin
		return nil
	}
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return newProblem(SlugUnauthorized, "send Authorization: Bearer <token>")
	}
	granted, name := s.authenticate(strings.TrimSpace(tok))
	rc := reqFrom(r.Context())
	rc.cred, rc.roles = name, granted
	switch {
	case granted == 0:
		return newProblem(SlugUnauthorized, "the bearer token is not valid")
	case granted&roleAdmin != 0 || granted&allowed != 0:
		return nil
	}
	return newProblem(SlugForbidden, "this token's role may not call "+r.Method+" "+r.URL.Path)
}

// reqCtx is the per-request state kept in the request context.
type reqCtx struct {
	id    string
	log   *slog.Logger
	cred  string // the credential name of the request's token ("" when open)
	roles role   // the roles its token grants (every role when open)
}

type reqKey struct{}

func reqFrom(ctx context.Context) *reqCtx {
	if rc, ok := ctx.Value(reqKey{}).(*reqCtx); ok {
		return rc
	}
	return &reqCtx{log: slog.Default()}
}

// CorrelationID returns the correlation id of the request whose context
// ctx is (as seen by handlers behind a Server), or "".
func CorrelationID(ctx context.Context) string { return reqFrom(ctx).id }

// withCorrelation accepts or generates the request's correlation id, echoes
// it and puts it, with a request-scoped logger, into the context.
func (s *Server) withCorrelation(w http.ResponseWriter, r *http.Request) *http.Request {
	id := r.Header.Get("X-Correlation-Id")
	if !validCorrelationID(id) {
		var b [16]byte
		_, _ = rand.Read(b[:])
		id = hex.EncodeToString(b[:])
	}
	w.Header().Set("X-Correlation-Id", id)
	rc := &reqCtx{id: id, log: s.log.With("correlation_id", id)}
	return r.WithContext(context.WithValue(r.Context(), reqKey{}, rc))
}

// validCorrelationID accepts 1..128 printable ASCII characters.
func validCorrelationID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x20 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

// now is the client's clock, UTC to the microsecond.
func (s *Server) now() time.Time { return contract.UTC(s.clock.Now()) }

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	if _, err := s.c.GetJob(ctx, 0); err != nil && !errors.Is(err, core.ErrNotFound) {
		return &problem{slug: SlugUnavailable, detail: "the job store is unavailable", cause: err}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

func (s *Server) openapi(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(openapiDoc)
	return nil
}

// broadcaster wakes every waiting long-poll at once.
type broadcaster struct {
	mu sync.Mutex
	ch chan struct{}
}

func newBroadcaster() *broadcaster { return &broadcaster{ch: make(chan struct{})} }

// wait returns a channel closed at the next broadcast.
func (b *broadcaster) wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ch
}

// broadcast wakes every waiter.
func (b *broadcaster) broadcast() {
	b.mu.Lock()
	close(b.ch)
	b.ch = make(chan struct{})
	b.mu.Unlock()
}

// listen turns store notifications into wake-ups until Close, listening
// again after the store drops the channel (core.FollowNotifications).
func (s *Server) listen(n contract.Notifier) {
	err := core.FollowNotifications(s.ctx, n, s.log, "backlog http: ", 5*time.Second, nil, func(note contract.Notification) {
		switch note.Kind {
		case contract.NotifyInsert, contract.NotifyResume:
			s.wake.broadcast()
		}
	}, s.wake.broadcast)
	if err != nil {
		s.log.Debug("backlog http: store notifications are off; long-polls poll", "err", err)
	}
}
