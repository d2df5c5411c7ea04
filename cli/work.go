package cli

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel/trace"

	"github.com/backlogq/backlog/core"
)

// newWorkCmd builds "work" and "serve". Both run shell-command handlers
// on this node; serve adds the job server: the HTTP API for producers and
// remote workers, the dashboard and /metrics (serve.go), and may run with
// no local handlers at all.
func (a *app) newWorkCmd(name string) *cobra.Command {
	f := &workFlags{handlersOptional: name == "serve"}
	var sf *serveFlags
	short := "Run workers whose handlers are shell commands"
	long := workLong
	if name == "serve" {
		sf = &serveFlags{}
		short = "Run the job server: HTTP API, remote workers, dashboard, metrics, and local shell handlers"
		long = serveLong + "\n\n" + workLong
	}
	cmd := &cobra.Command{
		Use:   name,
		Short: short,
		Long:  long,
		Example: fmt.Sprintf(`  backlog %[1]s --handler email='./send-email.sh' --handler thumbnail='convert - -resize 200x png:-'
  backlog %[1]s --queue default=20 --queue slow=2 --handler report='python3 report.py' --timeout 10m
  backlog %[1]s --config backlog.json`, name),
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dbFromUser := cmd.Flag("db").Changed || (a.env.getenv != nil && a.env.getenv("BACKLOG_DB") != "")
			wc, err := f.resolve(cmd.Flags(), a.dbURL, dbFromUser)
			if err != nil {
				return err
			}
			if wc.encryption, err = f.keys.encryption(a.env.getenv); err != nil {
				return err
			}
			if err := f.webhook.resolve(cmd.Flags(), wc, a.env.getenv); err != nil {
				return err
			}
			if sf != nil {
				if err := sf.resolve(cmd.Flags(), a.env.getenv); err != nil {
					return err
				}
				sf.configQueues = wc.queueNames()
			}
			s := &server{app: a, cfg: wc, mode: name, serve: sf}
			return s.run(cmd.Context())
		},
	}
	f.register(cmd.Flags())
	if sf != nil {
		sf.register(cmd.Flags())
	}
	if name == "work" {
		a.addRemote(cmd, f) // --server URL: a remote worker of a job server (remote.go)
	}
	runE := cmd.RunE
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		a.hideSecrets(cmd) // before any handler starts (secrets.go)
		return runE(cmd, args)
	}
	return cmd
}

const workLong = `work runs this process as a worker: it claims jobs of the given queues and
runs each job's handler, a shell command chosen by the job's kind. The job's
args arrive on the command's stdin; exit 0 completes the job (stdout becomes
its result), 75 snoozes it, 77 cancels it, anything else is a failed attempt
(retried with backoff, then discarded). See docs/cli.md for the contract and
the config file.

The first SIGINT/SIGTERM stops claiming and waits up to --shutdown-timeout for
running jobs; a second signal (or the timeout) stops at once and hands the
unfinished jobs back without using an attempt.`

const serveLong = `serve runs the job server on any store (SQLite by default): the HTTP API
under /v1/ for producers and remote workers in any language (docs/http-api.md),
the web dashboard at /dashboard/, Prometheus metrics at /metrics and /healthz,
all on --listen (127.0.0.1:8080). It refuses to listen on a non-loopback
address without a token (--admin-token, --producer-token, --worker-token).
Handlers given with --handler also run here; without any, remote workers
(backlog work --server URL, or any HTTP client) run the jobs.`

// service runs next to the workers for the life of a server (the HTTP API,
// dashboard and metrics of serve). Start must return once the service
// runs; Stop is called, before the workers stop, at shutdown.
type service interface {
	Name() string
	Start(ctx context.Context, c *core.Client) error
	Stop(ctx context.Context) error
}

// server is one work/serve run.
type server struct {
	app      *app
	cfg      *workConfig
	mode     string      // "work" or "serve"
	serve    *serveFlags // serve's HTTP settings; nil for work
	services []service   // started after the workers, stopped before them
	// tracer traces enqueues and executions (OTEL_* variables, otel.go);
	// nil: no tracing.
	tracer trace.TracerProvider
}

// run opens the store, starts the workers and services, and blocks until
// ctx ends or a signal arrives, then shuts down (soft, then hard).
func (s *server) run(ctx context.Context) error {
	a, wc := s.app, s.cfg
	out := a.env.stdout

	// Listen for signals first: they also stop a wait for the database,
	// and none is missed before the workers start.
	sigs, stopSignals := s.signals()
	defer stopSignals()

	tracer, stopTracing, err := a.tracerProvider(ctx)
	if err != nil {
		return err
	}
	s.tracer = tracer
	// After the workers stopped: their last spans are flushed.
	defer a.flushTracing(ctx, stopTracing)

	st, err := a.openStoreWaiting(ctx, wc.db, wc.migrate, wc.waitForDB, sigs)
	if stopped, ok := errors.AsType[errStoppedWaiting](err); ok {
		fmt.Fprintf(out, "backlog: %s: stopped\n", stopped)
		return nil
	}
	if err != nil {
		return err
	}
	defer st.Close()

	if s.serve != nil {
		h := newHTTPService(s.serve, st, out, a.log)
		// Bound before the workers start: a taken port fails at once,
		// with nothing to stop.
		if err := h.bind(); err != nil {
			return fmt.Errorf("start %s: %w", h.Name(), err)
		}
		s.services = append(s.services, h)
	}
	closeBound := func() {
		for _, svc := range s.services {
			_ = svc.Stop(context.WithoutCancel(ctx))
		}
	}
	tr := &tracker{running: map[int64]runningJob{}}
	client, err := core.NewClient(st, s.clientConfig(tr))
	if err != nil {
		closeBound()
		return err
	}

	if err := client.Start(ctx); err != nil {
		closeBound()
		return err
	}
	for i, svc := range s.services {
		if err := svc.Start(ctx, client); err != nil {
			for _, started := range slices.Backward(s.services[:i+1]) { // the failed one too: it may hold its bound listener
				_ = started.Stop(context.WithoutCancel(ctx))
			}
			_ = client.StopAndCancel(context.WithoutCancel(ctx))
			return fmt.Errorf("start %s: %w", svc.Name(), err)
		}
	}
	if len(wc.handlers) == 0 {
		fmt.Fprintf(out, "backlog %s: serving %s: no local handlers; remote workers run the jobs%s\n", s.mode, redactURL(wc.db), periodicSuffix(wc.periodic))
	} else {
		fmt.Fprintf(out, "backlog %s: serving %s: queues %s; kinds %s; worker %s%s\n",
			s.mode, redactURL(wc.db), s.describeQueues(), strings.Join(slices.Sorted(maps.Keys(wc.handlers)), ", "), client.WorkerID(), periodicSuffix(wc.periodic))
	}

	var why string
	select {
	case <-ctx.Done():
		why = "context ended"
	case sig := <-sigs:
		why = "received " + sig.String()
	}
	return s.shutdown(ctx, client, tr, sigs, why)
}

// shutdown stops services, then the workers: soft stop first, hard stop on
// a second signal or after the shutdown timeout.
func (s *server) shutdown(ctx context.Context, client *core.Client, tr *tracker, sigs <-chan os.Signal, why string) error {
	out := s.app.env.stdout
	base := context.WithoutCancel(ctx)
	for _, svc := range slices.Backward(s.services) {
		sctx, cancel := context.WithTimeout(base, 5*time.Second)
		if err := svc.Stop(sctx); err != nil {
			fmt.Fprintf(s.app.env.stderr, "backlog: stop %s: %v\n", svc.Name(), err)
		}
		cancel()
	}

	timeout := s.cfg.shutdownTimeout
	if n := tr.count(); n > 0 {
		fmt.Fprintf(out, "backlog: %s: stopping; waiting up to %s for %d running jobs: %s (signal again to stop now)\n",
			why, timeout, n, tr.describe(10))
	} else {
		fmt.Fprintf(out, "backlog: %s: stopping\n", why)
	}

	stopCtx, cancelStop := context.WithTimeout(base, timeout)
	defer cancelStop()
	var hard sync.Once
	hardStop := func(reason string) {
		hard.Do(func() {
			if n := tr.count(); n > 0 {
				fmt.Fprintf(out, "backlog: %s: hard stop; handing back %d unfinished jobs: %s\n", reason, n, tr.describe(10))
			}
			cancelStop()
		})
	}
	stopped := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(5 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stopped:
				return
			case sig := <-sigs:
				hardStop("received " + sig.String() + " again")
			case <-stopCtx.Done():
				if !errors.Is(context.Cause(stopCtx), context.Canceled) {
					hardStop(fmt.Sprintf("shutdown timeout %s passed", timeout))
				}
				<-stopped
				return
			case <-tick.C:
				if n := tr.count(); n > 0 {
					fmt.Fprintf(out, "backlog: still waiting for %d running jobs: %s\n", n, tr.describe(10))
				}
			}
		}
	}()
	err := client.Stop(stopCtx)
	close(stopped)
	wg.Wait()
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("stop: %w", err)
	}
	fmt.Fprintf(out, "backlog: stopped\n")
	return nil
}

// signals starts SIGINT/SIGTERM delivery; without a notifier (tests that
// stop by cancelling the context) the channel never fires.
func (s *server) signals() (<-chan os.Signal, func()) {
	if s.app.env.notifySignals == nil {
		return make(chan os.Signal), func() {}
	}
	return s.app.env.notifySignals()
}

// clientConfig turns the work configuration into a core.Config with one
// shell handler per kind.
func (s *server) clientConfig(tr *tracker) core.Config {
	wc := s.cfg
	handlers := core.NewHandlers()
	baseEnv := s.app.handlerEnv(wc)
	for kind, hc := range wc.handlers {
		env := make([]string, 0, len(hc.env))
		for _, k := range slices.Sorted(maps.Keys(hc.env)) {
			env = append(env, k+"="+hc.env[k])
		}
		sh := &shellHandler{
			kind: kind, argv: hc.argv, baseEnv: baseEnv, env: env, snooze: hc.snooze,
			maxResult: core.DefaultMaxResultBytes, killGrace: wc.killGrace,
			log: s.app.log,
		}
		var opts []core.KindOption
		if hc.timeout > 0 {
			opts = append(opts, core.WithTimeout(hc.timeout))
		}
		opts = append(opts, wc.kindOptions(kind)...)
		fn := sh.handle
		if hc.webhook != nil {
			fn = hc.webhook
		}
		handlers.HandleRaw(kind, fn, opts...)
	}
	// Kinds run elsewhere (remote workers, other nodes) with a policy of
	// their own: the engine and serve's HTTP API retry them by it, and
	// give their jobs its max attempts.
	for _, kind := range slices.Sorted(maps.Keys(wc.retryByKind)) {
		if _, here := wc.handlers[kind]; !here {
			handlers.Declare(kind, wc.kindOptions(kind)...)
		}
	}
	queues := make(map[string]core.QueueConfig, len(wc.queues))
	for q, n := range wc.queues {
		if len(wc.handlers) > 0 { // without handlers this node claims nothing
			queues[q] = core.QueueConfig{MaxWorkers: n, ClaimAhead: wc.claimAhead[q], Limits: wc.limits[q]}
		}
	}
	ret := core.Retention{Completed: wc.completedTTL, Cancelled: wc.cancelledTTL, Discarded: wc.discardedTTL, Archive: wc.archive, ArchiveTTL: wc.archiveTTL}
	cfg := core.Config{
		Queues:            queues,
		Handlers:          handlers,
		Middleware:        []core.Middleware{tr.middleware},
		Logger:            s.app.log,
		WorkerID:          wc.workerID,
		PollInterval:      wc.pollInterval,
		LeaseDuration:     wc.lease,
		HeartbeatInterval: wc.lease / 3,
		DefaultTimeout:    wc.timeout,
		Retention:         &ret,
		WorkerTags:        wc.tags,
		Encryption:        wc.encryption,
		Periodic:          wc.periodic,
		TracerProvider:    s.tracer,
	}
	if s.serve != nil {
		cfg.WorkerStaleAfter, cfg.WorkerDeadAfter = s.serve.workerStaleAfter, s.serve.workerDeadAt
		// The API's submissions go through this client's one kind rule
		// (core.Client.CheckKinds: its handlers, and the kinds live
		// remote and engine workers announced).
		cfg.AllowUnknownKinds = s.serve.allowUnknownKinds
	}
	for _, svc := range s.services {
		if o, ok := svc.(interface{ observers() []core.Observer }); ok {
			cfg.Observers = append(cfg.Observers, o.observers()...)
		}
	}
	if wc.retry != nil {
		cfg.Retry = wc.retry
	}
	return cfg
}

func (s *server) describeQueues() string {
	parts := make([]string, 0, len(s.cfg.queues))
	for _, q := range s.cfg.queueNames() {
		parts = append(parts, fmt.Sprintf("%s(%d)", q, s.cfg.queues[q]))
	}
	return strings.Join(parts, ", ")
}

// tracker knows which jobs run on this node (through a middleware), so
// shutdown can say what it waits for.
type tracker struct {
	mu      sync.Mutex
	running map[int64]runningJob
}

type runningJob struct {
	id    int64
	kind  string
	start time.Time
}

func (t *tracker) middleware(next core.HandlerFunc) core.HandlerFunc {
	return func(ctx context.Context, job *core.Job) error {
		t.mu.Lock()
		t.running[job.ID] = runningJob{id: job.ID, kind: job.Kind, start: time.Now()}
		t.mu.Unlock()
		defer func() {
			t.mu.Lock()
			delete(t.running, job.ID)
			t.mu.Unlock()
		}()
		return next(ctx, job)
	}
}

func (t *tracker) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.running)
}

// describe lists up to max running jobs, longest-running first, as
// "#12 email (running 4s)".
func (t *tracker) describe(max int) string {
	t.mu.Lock()
	jobs := make([]runningJob, 0, len(t.running))
	for _, j := range t.running {
		jobs = append(jobs, j)
	}
	t.mu.Unlock()
	slices.SortFunc(jobs, func(a, b runningJob) int { return a.start.Compare(b.start) })
	now := time.Now()
	var parts []string
	for i, j := range jobs {
		if i == max {
			parts = append(parts, fmt.Sprintf("and %d more", len(jobs)-max))
			break
		}
		parts = append(parts, fmt.Sprintf("#%d %s (running %s)", j.id, j.kind, roundDur(now.Sub(j.start))))
	}
	return strings.Join(parts, ", ")
}
