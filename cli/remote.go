package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/backlogq/backlog/adapters/httpapi/client"
	"github.com/backlogq/backlog/core"
)

// remoteFlags are the flags of work that make it a remote worker of a job
// server (the HTTP API) instead of a worker on a store.
type remoteFlags struct {
	server string
	token  string
}

// addRemote gives work --server and --token: with --server set, work runs
// the shell handlers as a remote worker of that job server (client.Worker)
// and opens no store.
func (a *app) addRemote(cmd *cobra.Command, f *workFlags) {
	rf := &remoteFlags{}
	fl := cmd.Flags()
	fl.StringVar(&rf.server, "server", "", "run as a remote worker of the job server at this URL (its HTTP API) instead of opening a store")
	fl.StringVar(&rf.token, "token", "", "bearer token (worker role) for --server (env BACKLOG_TOKEN)")
	local := cmd.RunE
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if rf.server == "" {
			return local(cmd, args)
		}
		return a.runRemote(cmd, f, rf)
	}
}

// Flags of work that the job server decides with --server.
var serverSideFlags = []string{"db", "completed-ttl", "cancelled-ttl", "discarded-ttl", "archive", "archive-ttl", "lease", "poll-interval", "migrate", "wait-for-db"}

// runRemote is work --server.
func (a *app) runRemote(cmd *cobra.Command, f *workFlags, rf *remoteFlags) error {
	for _, name := range serverSideFlags {
		if fl := cmd.Flag(name); fl != nil && fl.Changed {
			return usagef("--%s does not apply to a remote worker (--server): the job server decides it", name)
		}
	}
	wc, err := f.resolve(cmd.Flags(), "", false)
	if err != nil {
		return err
	}
	if err := refuseWebhooks(wc, "in a remote worker (--server)"); err != nil {
		return err
	}
	if wc.encryption, err = f.keys.encryption(a.env.getenv); err != nil {
		return err
	}
	token := rf.token
	if token == "" && a.env.getenv != nil {
		token = a.env.getenv("BACKLOG_TOKEN")
	}
	if err := checkServerURL(rf.server, "--server"); err != nil {
		return err
	}
	c, err := client.New(rf.server, client.WithToken(token), client.WithLogger(a.log), client.WithUserAgent("backlog-cli/1"))
	if err != nil {
		return usageError{err}
	}
	rw := &remoteWorker{app: a, cfg: wc, handlers: map[string]*remoteHandler{}}
	baseEnv := a.handlerEnv(wc)
	for kind, hc := range wc.handlers {
		env := make([]string, 0, len(hc.env))
		for _, k := range slices.Sorted(maps.Keys(hc.env)) {
			env = append(env, k+"="+hc.env[k])
		}
		rh := &remoteHandler{
			sh: &shellHandler{
				kind: kind, argv: hc.argv, baseEnv: baseEnv, env: env, snooze: hc.snooze,
				maxResult: core.DefaultMaxResultBytes, killGrace: wc.killGrace,
				log: a.log,
			},
			timeout: hc.timeout,
			retry:   hc.retry,
		}
		if rh.timeout <= 0 {
			rh.timeout = wc.timeout
		}
		if rh.retry == nil {
			rh.retry = wc.retry
		}
		rw.handlers[kind] = rh
	}
	concurrency := 0
	for _, n := range wc.queues {
		concurrency += n
	}
	shutdown := wc.shutdownTimeout
	if shutdown == 0 {
		shutdown = -1 // the flag's 0 means no wait; client.Worker reads 0 as its default
	}
	out := a.env.stdout
	tracer, stopTracing, err := a.tracerProvider(cmd.Context())
	if err != nil {
		return err
	}
	defer a.flushTracing(cmd.Context(), stopTracing)
	var once sync.Once
	w, err := client.NewWorker(c, client.WorkerConfig{
		ID:              wc.workerID,
		Queues:          wc.queueNames(),
		Tags:            wc.tags,
		Kinds:           slices.Sorted(maps.Keys(wc.handlers)),
		Concurrency:     concurrency,
		Handler:         rw.handle,
		Logger:          a.log,
		ShutdownTimeout: shutdown,
		Encryption:      wc.encryption,
		TracerProvider:  tracer,
		OnRegister: func(reg *client.Registration) {
			once.Do(func() {
				fmt.Fprintf(out, "backlog work: remote worker of %s: queues %s; kinds %s; worker %s; heartbeat every %s\n",
					redactURL(c.BaseURL()), strings.Join(wc.queueNames(), ", "), strings.Join(slices.Sorted(maps.Keys(wc.handlers)), ", "),
					reg.Worker.ID, roundDur(reg.HeartbeatInterval))
			})
		},
	})
	if err != nil {
		return usageError{err}
	}
	rw.w = w
	return rw.run(cmd.Context())
}

// remoteWorker is one run of work --server.
type remoteWorker struct {
	app      *app
	cfg      *workConfig
	handlers map[string]*remoteHandler
	w        *client.Worker
}

// remoteHandler is one kind's shell command with its time limit and retry
// schedule.
type remoteHandler struct {
	sh      *shellHandler
	timeout time.Duration    // 0 = none
	retry   core.RetryPolicy // nil = the server's policy
}

var errRemoteTimeout = errors.New("attempt timed out")

// handle runs a job's shell command and turns its exit into the job's
// result and outcome.
func (rw *remoteWorker) handle(ctx context.Context, job *client.Job) (json.RawMessage, error) {
	rh := rw.handlers[job.Kind]
	if rh == nil {
		return nil, fmt.Errorf("%w %q (worker %s knows %d kinds)", core.ErrUnknownKind, job.Kind, rw.w.ID(), len(rw.handlers))
	}
	cj := job.CoreJob()
	runCtx := ctx
	if rh.timeout > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeoutCause(ctx, rh.timeout, errRemoteTimeout)
		defer cancel()
	}
	out, err := rh.sh.run(runCtx, cj)
	if err != nil {
		if errors.Is(context.Cause(runCtx), errRemoteTimeout) {
			err = &core.TimeoutError{After: rh.timeout, Err: err}
		}
		var (
			se *core.SnoozeError
			ce *core.CancelError
			pe *core.PermanentError
		)
		if rh.retry != nil && !errors.As(err, &se) && !errors.As(err, &ce) && !errors.As(err, &pe) {
			err = client.RetryIn(err, rh.retry.NextRetry(cj, err))
		}
		return nil, err
	}
	return resultJSON(out, core.DefaultMaxResultBytes), nil
}

// resultJSON turns a command's stdout into a job result: nil when empty, as
// is when it is valid JSON, otherwise a JSON string of its (UTF-8 cleaned)
// text, keeping the tail so the encoding fits in limit bytes.
func resultJSON(out []byte, limit int) json.RawMessage {
	if len(out) == 0 {
		return nil
	}
	if json.Valid(out) && len(out) <= limit {
		return out
	}
	s := strings.ToValidUTF8(string(out), "\uFFFD")
	for {
		b, _ := json.Marshal(s)
		if len(b) <= limit || s == "" {
			return b
		}
		cut := min(len(b)-limit, len(s))
		for cut < len(s) && !utf8.RuneStart(s[cut]) {
			cut++
		}
		s = s[cut:]
	}
}

// run works until ctx ends or a signal arrives; a second signal stops at
// once (handlers cancelled, jobs snoozed back).
func (rw *remoteWorker) run(ctx context.Context) error {
	out := rw.app.env.stdout
	sigs, stopSignals := (&server{app: rw.app}).signals()
	defer stopSignals()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- rw.w.Run(runCtx) }()

	timeout := rw.cfg.shutdownTimeout
	var err error
	select {
	case err = <-done:
		// Refused registration (or ctx ended before it).
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "backlog: stopped\n")
		return nil
	case <-ctx.Done():
		rw.stopping("context ended", timeout)
	case sig := <-sigs:
		rw.stopping("received "+sig.String(), timeout)
	}
	stop()
	for {
		select {
		case err = <-done:
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "backlog: stopped\n")
			return nil
		case sig := <-sigs:
			if n := len(rw.w.Running()); n > 0 {
				fmt.Fprintf(out, "backlog: received %s again: hard stop; handing back %d unfinished jobs: %s\n", sig, n, rw.describe(10))
			}
			rw.w.StopNow()
		}
	}
}

func (rw *remoteWorker) stopping(why string, timeout time.Duration) {
	out := rw.app.env.stdout
	if n := len(rw.w.Running()); n > 0 {
		fmt.Fprintf(out, "backlog: %s: stopping; waiting up to %s for %d running jobs: %s (signal again to stop now)\n",
			why, timeout, n, rw.describe(10))
		return
	}
	fmt.Fprintf(out, "backlog: %s: stopping\n", why)
}

// describe lists up to max running jobs by id, as "#12 email".
func (rw *remoteWorker) describe(max int) string {
	jobs := rw.w.Running()
	slices.SortFunc(jobs, func(a, b *client.Job) int { return a.AttemptedAt.Compare(b.AttemptedAt) })
	var parts []string
	for i, j := range jobs {
		if i == max {
			parts = append(parts, fmt.Sprintf("and %d more", len(jobs)-max))
			break
		}
		parts = append(parts, fmt.Sprintf("#%d %s", j.ID, j.Kind))
	}
	return strings.Join(parts, ", ")
}
