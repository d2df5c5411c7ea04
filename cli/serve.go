package cli

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/backlogq/backlog/core/contract"

	promclient "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/pflag"

	"github.com/backlogq/backlog/adapters/dashboard"
	"github.com/backlogq/backlog/adapters/httpapi"
	"github.com/backlogq/backlog/adapters/prometheus"
	"github.com/backlogq/backlog/core"
)

// defaultListen is where serve listens unless told otherwise: loopback
// only, so a fresh server is never reachable from the network without a
// token.
const defaultListen = "127.0.0.1:8080"

// defaultMaxConnections is serve's default cap on open connections. Each
// long-polling remote worker holds one (two while it also reports), each
// open dashboard one or two.
const defaultMaxConnections = 1024

// metricsMaxAge is how old the store gauges of a /metrics scrape may be:
// at most one Stats and one Workers read per this period, however many
// scrapers there are.
const metricsMaxAge = 5 * time.Second

// serveFlags are the flags only serve has: its HTTP listener and tokens.
type serveFlags struct {
	listen                         string
	adminToken, producerToken      string
	workerToken                    string
	noDashboard                    bool
	maxBody                        int64
	workerStaleAfter, workerDeadAt time.Duration
	// Limits of the HTTP listener (docs/security.md, "Limits").
	metricsToken              string
	maxConnections            int
	bodyTimeout, writeTimeout time.Duration
	auth                      authFlags     // lease secret, per-worker tokens
	openSealedFor             string        // roles shown sealed values opened (with --keys-file)
	allowUnknownKinds         bool          // core.Config.AllowUnknownKinds of the server's client
	acceptSealedArgs          bool          // httpapi.Config.AcceptSealedArgs
	maxQueues                 int           // httpapi.Config.MaxQueues; ≤ 0: no cap
	queuesFromConfigOnly      bool          // httpapi.Config.AllowedQueues = configQueues
	maxUniqueFor              time.Duration // httpapi.Config.MaxUniqueFor
	// configQueues are the configured queues (workConfig.queueNames):
	// the allow-list of --queues-from-config-only, and the queues that
	// always get a metrics label of their own; not a flag.
	configQueues []string
}

func (f *serveFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.listen, "listen", defaultListen, "HOST:PORT of the HTTP API, dashboard and /metrics (env BACKLOG_LISTEN); port 0 picks a free one")
	fl.StringVar(&f.adminToken, "admin-token", "", "bearer token allowed every API call (env BACKLOG_ADMIN_TOKEN)")
	fl.StringVar(&f.producerToken, "producer-token", "", "bearer token allowed to submit and read jobs (env BACKLOG_PRODUCER_TOKEN)")
	fl.StringVar(&f.workerToken, "worker-token", "", "bearer token allowed the remote-worker calls (env BACKLOG_WORKER_TOKEN)")
	fl.BoolVar(&f.noDashboard, "no-dashboard", false, "do not serve the web dashboard")
	fl.Int64Var(&f.maxBody, "max-body", httpapi.DefaultMaxBodyBytes, "largest accepted request body in bytes")
	fl.DurationVar(&f.workerStaleAfter, "worker-stale-after", 30*time.Second, "a worker without a heartbeat this long shows as stale")
	fl.DurationVar(&f.workerDeadAt, "worker-dead-after", 2*time.Minute, "a worker without a heartbeat this long is dead: its jobs go back to the queue at once")
	fl.StringVar(&f.metricsToken, "metrics-token", "", "bearer token required by /metrics (env BACKLOG_METRICS_TOKEN; the admin token is accepted too); unset: /metrics is open")
	fl.IntVar(&f.maxConnections, "max-connections", defaultMaxConnections, "most HTTP connections open at once; more wait until one closes")
	fl.DurationVar(&f.bodyTimeout, "body-timeout", httpapi.DefaultBodyReadTimeout, "a request body must arrive within this, or the connection is closed")
	fl.DurationVar(&f.writeTimeout, "write-timeout", httpapi.DefaultWriteTimeout, "handling a request and writing its answer must end within this (long-polling claims get their wait on top)")
	fl.StringVar(&f.openSealedFor, "open-sealed-for", httpapi.DefaultOpenSealedFor, "with keys (--keys-file): the API roles that read sealed args, results and errors opened (comma-separated producer, worker, admin, or none); others read ciphertext")
	fl.IntVar(&f.maxQueues, "max-queues", httpapi.DefaultMaxQueues, "most queues the store may hold for submissions to create a new one (422 too-many-queues beyond); 0 or less: no cap")
	fl.BoolVar(&f.queuesFromConfigOnly, "queues-from-config-only", false, "accept jobs only for the configured queues (--queue, the config file's queues); others are refused with 422 queue-not-allowed")
	fl.BoolVar(&f.acceptSealedArgs, "accept-sealed-args", false, "accept job args that producers sealed themselves ({\"backlog_enc\": …}); unset: refused with 400, so that no producer can submit a copy of another job's sealed args (docs/security.md)")
	fl.BoolVar(&f.allowUnknownKinds, "allow-unknown-kinds", false, "accept a submitted job whose kind neither this server's handlers nor any live registered worker handles (off: 422 unknown-kind, nothing inserted; a server that neither handles nor sees a kind announced accepts every kind)")
	fl.DurationVar(&f.maxUniqueFor, "max-unique-for", httpapi.DefaultMaxUniqueFor, "longest a submission may keep its unique key held after its job finishes (unique_for_seconds; 400 invalid-request above it), at most 8784h (366 days)")
	f.auth.register(fl)
}

// resolve fills tokens and the listen address from the environment where
// the flags were not given, and refuses a listener reachable from other
// hosts when no token is set.
func (f *serveFlags) resolve(fl *pflag.FlagSet, getenv func(string) string) error {
	env := func(flag, name string, dst *string) {
		if !fl.Changed(flag) && getenv != nil {
			if v := getenv(name); v != "" {
				*dst = v
			}
		}
	}
	env("listen", "BACKLOG_LISTEN", &f.listen)
	env("admin-token", "BACKLOG_ADMIN_TOKEN", &f.adminToken)
	env("producer-token", "BACKLOG_PRODUCER_TOKEN", &f.producerToken)
	env("worker-token", "BACKLOG_WORKER_TOKEN", &f.workerToken)
	env("metrics-token", "BACKLOG_METRICS_TOKEN", &f.metricsToken)
	if err := httpapi.CheckOpenSealedFor(f.openSealedFor); err != nil {
		return usageError{fmt.Errorf("--open-sealed-for: %w", err)}
	}
	if err := f.auth.resolve(fl, getenv); err != nil {
		return err
	}
	host, _, err := net.SplitHostPort(f.listen)
	if err != nil {
		return usagef("--listen %q: want HOST:PORT, e.g. 127.0.0.1:8080 (%v)", f.listen, err)
	}
	if f.maxBody < 1024 {
		return usagef("--max-body %d is below 1024 bytes", f.maxBody)
	}
	if f.maxConnections < 1 {
		return usagef("--max-connections %d: want at least 1", f.maxConnections)
	}
	if f.bodyTimeout <= 0 || f.writeTimeout <= 0 {
		return usagef("--body-timeout (%s) and --write-timeout (%s) must be positive", f.bodyTimeout, f.writeTimeout)
	}
	if f.workerStaleAfter <= 0 || f.workerDeadAt <= f.workerStaleAfter {
		return usagef("--worker-dead-after (%s) must exceed --worker-stale-after (%s), and both be positive", f.workerDeadAt, f.workerStaleAfter)
	}
	if f.maxUniqueFor <= 0 || f.maxUniqueFor > contract.MaxUniqueFor {
		return usagef("--max-unique-for %s is outside (0, %s]", f.maxUniqueFor, contract.MaxUniqueFor)
	}
	if f.tokens() == (httpapi.Tokens{}) && !loopbackHost(host) {
		return usagef("refusing to listen on %s without a token: anyone who can reach it could run and delete jobs; "+
			"set --admin-token (or BACKLOG_ADMIN_TOKEN, and optionally producer/worker tokens), or listen on 127.0.0.1", f.listen)
	}
	return nil
}

func (f *serveFlags) tokens() httpapi.Tokens {
	return httpapi.Tokens{Producer: f.producerToken, Worker: f.workerToken, Admin: f.adminToken}
}

// loopbackHost reports whether host (from HOST:PORT) only accepts
// connections from this machine. The empty host and unspecified addresses
// (0.0.0.0, ::) listen on every interface.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// httpService is serve's HTTP listener: the JSON API under /v1/, the
// dashboard under /dashboard/, Prometheus metrics at /metrics, and
// /healthz.
type httpService struct {
	flags   *serveFlags
	out     io.Writer
	log     *slog.Logger
	metrics *prometheus.Metrics
	reg     *promclient.Registry
	stats   *core.StatsCache            // one per process: the API's queue list and the metrics' gauges
	client  atomic.Pointer[core.Client] // set by Start; read by the running-jobs gauge

	api   *httpapi.Server
	srv   *http.Server
	bound net.Listener // bound by bind before the workers start; nil until then
	ln    *limitListener
	url   string // base URL, known once listening
}

// newHTTPService builds the service; its metrics must be added to the
// client's observers before the client starts (see observers).
func newHTTPService(f *serveFlags, st contract.Store, out io.Writer, log *slog.Logger) *httpService {
	reg := promclient.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	h := &httpService{flags: f, out: out, log: log, reg: reg, stats: core.NewStatsCache(st)}
	h.metrics = prometheus.New(st, prometheus.Options{
		StaleAfter: f.workerStaleAfter, DeadAfter: f.workerDeadAt, Logger: log,
		StatsCache: h.stats, MaxAge: metricsMaxAge, Queues: f.configQueues,
		Running: func() int {
			if c := h.client.Load(); c != nil {
				return len(c.Running())
			}
			return 0
		},
	})
	return h
}

func (h *httpService) Name() string { return "http" }

// observers are the core observers the service needs on the client.
func (h *httpService) observers() []core.Observer { return []core.Observer{h.metrics} }

// bind binds the listen address (--listen) without serving yet, so that a
// taken port fails the start-up before any worker runs. The error wraps
// the net.Listen error (syscall.EADDRINUSE for a port in use).
func (h *httpService) bind() error {
	if h.bound != nil {
		return nil
	}
	ln, err := net.Listen("tcp", h.flags.listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", h.flags.listen, err)
	}
	h.bound = ln
	return nil
}

// Start binds the listener unless bind did already, then serves in the
// background.
func (h *httpService) Start(ctx context.Context, c *core.Client) error {
	acfg := httpapi.Config{
		Tokens: h.flags.tokens(), MaxBodyBytes: h.flags.maxBody, Logger: h.log, StatsCache: h.stats,
		BodyReadTimeout: h.flags.bodyTimeout, WriteTimeout: h.flags.writeTimeout,
		OpenSealedFor: h.flags.openSealedFor, AcceptSealedArgs: h.flags.acceptSealedArgs,
		MaxQueues:    h.flags.maxQueues,
		MaxUniqueFor: h.flags.maxUniqueFor,
	}
	if acfg.MaxQueues <= 0 {
		acfg.MaxQueues = -1 // no cap
	}
	if h.flags.queuesFromConfigOnly {
		acfg.AllowedQueues = append([]string{}, h.flags.configQueues...)
	}
	h.flags.auth.apply(&acfg)
	api, err := httpapi.New(c, acfg)
	if err != nil {
		return err
	}
	h.api = api
	h.client.Store(c)
	if err := h.reg.Register(h.metrics); err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/", api)
	mux.Handle("/healthz", api)
	// The API sets its own deadlines; the other handlers get the same.
	limits := func(hd http.Handler) http.Handler {
		return httpapi.Deadlines(hd, h.flags.bodyTimeout, h.flags.writeTimeout)
	}
	metrics := promhttp.HandlerFor(h.reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(h.log.Handler(), slog.LevelError)})
	mux.Handle("GET /metrics", limits(requireToken(metrics, h.flags.metricsToken, h.flags.adminToken)))
	if !h.flags.noDashboard {
		mux.Handle("/dashboard/", limits(http.StripPrefix("/dashboard", dashboard.Handler(dashboard.Options{Logger: h.log}))))
		mux.Handle("GET /{$}", limits(http.RedirectHandler("/dashboard/", http.StatusFound)))
	}
	mux.Handle("/", api) // unknown paths get the API's problem+json 404

	if err := h.bind(); err != nil {
		_ = api.Close()
		return err
	}
	ln := h.bound
	h.url = "http://" + displayAddr(ln.Addr(), h.flags.listen)
	h.ln = newLimitListener(ln, h.flags.maxConnections)
	h.srv = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(h.log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	go func() {
		if err := h.srv.Serve(h.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			h.log.Error("backlog: http server stopped", "err", err)
		}
	}()
	if !h.flags.noDashboard {
		fmt.Fprintf(h.out, "backlog serve: dashboard %s/dashboard/\n", h.url)
	}
	fmt.Fprintf(h.out, "backlog serve: API %s/v1/ (docs/http-api.md), metrics %s/metrics\n", h.url, h.url)
	if h.flags.tokens() == (httpapi.Tokens{}) {
		fmt.Fprintf(h.out, "backlog serve: no tokens set: the API is open to anyone who can reach %s\n", h.url)
	}
	return nil
}

// Stop ends long-polls and shuts the listener down, waiting for requests
// in flight until ctx ends.
func (h *httpService) Stop(ctx context.Context) error {
	if h.api != nil {
		_ = h.api.Close()
	}
	if h.srv == nil {
		if h.bound != nil { // bound, never served
			return h.bound.Close()
		}
		return nil
	}
	return h.srv.Shutdown(ctx)
}

// requireToken lets requests through to next only with one of the
// non-empty tokens as "Authorization: Bearer <token>", compared in
// constant time; others get 401. With no non-empty token every request
// passes.
func requireToken(next http.Handler, tokens ...string) http.Handler {
	var sums [][sha256.Size]byte
	for _, t := range tokens {
		if t != "" {
			sums = append(sums, sha256.Sum256([]byte(t)))
		}
	}
	if sums == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
		ok := 0
		for _, s := range sums { // every token compared, whichever matches
			ok |= subtle.ConstantTimeCompare(sum[:], s[:])
		}
		if ok != 1 || !strings.EqualFold(scheme, "Bearer") {
			httpapi.RefuseBody(w, r)
			w.Header().Set("WWW-Authenticate", `Bearer realm="backlog metrics"`)
			http.Error(w, "401 unauthorized: send Authorization: Bearer <metrics or admin token>", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// displayAddr is the address to print: the bound port, and 127.0.0.1 when
// the listener is on every interface.
func displayAddr(a net.Addr, asked string) string {
	host, _, _ := net.SplitHostPort(asked)
	_, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
