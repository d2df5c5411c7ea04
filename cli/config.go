package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/backlogq/backlog/core/contract"

	"github.com/spf13/pflag"

	"github.com/backlogq/backlog/core"
)

// fileConfig is the JSON config file of work/serve (--config). Every field
// is optional; command-line flags override it. See docs/cli.md.
type fileConfig struct {
	DB         string                 `json:"db"`
	WorkerID   string                 `json:"worker_id"`
	Queues     map[string]fileQueue   `json:"queues"`
	Handlers   map[string]fileHandler `json:"handlers"`
	HandlerEnv []string               `json:"handler_env"`
	Timeout    *duration              `json:"timeout"`
	Retry      *retryPolicy           `json:"retry"`
	// RetryByKind is the retry policy per kind, for kinds whose handler
	// has none here (remote workers' kinds above all; see
	// workConfig.kindRetry).
	RetryByKind     map[string]*retryPolicy `json:"retry_by_kind"`
	CompletedTTL    *duration               `json:"completed_ttl"`
	CancelledTTL    *duration               `json:"cancelled_ttl"`
	DiscardedTTL    *duration               `json:"discarded_ttl"`
	Archive         *bool                   `json:"archive"`
	ArchiveTTL      *duration               `json:"archive_ttl"`
	Lease           *duration               `json:"lease"`
	PollInterval    *duration               `json:"poll_interval"`
	ShutdownTimeout *duration               `json:"shutdown_timeout"`
	// Periodic is name → periodic job (core.PeriodicJob).
	Periodic map[string]filePeriodic `json:"periodic"`
	// Webhooks configures handlers whose command is a URL (webhook.go).
	Webhooks *fileWebhooks `json:"webhooks"`
}

// filePeriodic is one periodic job of the config file.
type filePeriodic struct {
	Schedule    string            `json:"schedule"`
	Kind        string            `json:"kind"`
	Args        json.RawMessage   `json:"args"`
	Queue       string            `json:"queue"`
	Priority    int               `json:"priority"`
	MaxAttempts int               `json:"max_attempts"`
	Tags        []string          `json:"tags"`
	Metadata    map[string]string `json:"metadata"`
	Missed      string            `json:"missed"`
}

// periodicJobs converts the file's periodic jobs, in name order.
func (fc *fileConfig) periodicJobs() []core.PeriodicJob {
	names := slices.Sorted(maps.Keys(fc.Periodic))
	out := make([]core.PeriodicJob, 0, len(names))
	for _, name := range names {
		p := fc.Periodic[name]
		if len(p.Args) > 0 {
			var b bytes.Buffer
			if json.Compact(&b, p.Args) == nil {
				p.Args = b.Bytes()
			}
		}
		out = append(out, core.PeriodicJob{
			Name: name, Schedule: p.Schedule, Kind: p.Kind, Args: p.Args, Missed: core.MissedPolicy(p.Missed),
			Options: core.Options{Queue: p.Queue, Priority: p.Priority, MaxAttempts: p.MaxAttempts, Tags: p.Tags, Metadata: p.Metadata},
		})
	}
	return out
}

type fileQueue struct {
	MaxWorkers int `json:"max_workers"`
	ClaimAhead int `json:"claim_ahead"`
	// Limits seed the queue's cluster-wide concurrency limits when the
	// store has none yet (core.QueueConfig.Limits).
	MaxRunning             int            `json:"max_running"`
	MaxRunningPerKind      map[string]int `json:"max_running_per_kind"`
	MaxRunningPerPartition int            `json:"max_running_per_partition"`
	// Rate limits ("N/PERIOD", core.ParseRateLimit), fair claims and
	// priority aging seed the rest of the queue's policy the same way.
	Rate             string            `json:"rate"`
	RatePerKind      map[string]string `json:"rate_per_kind"`
	RatePerPartition string            `json:"rate_per_partition"`
	Fair             bool              `json:"fair"`
	Aging            *duration         `json:"aging"`
	AgingMaxSteps    int               `json:"aging_max_steps"`
}

// policy returns the queue's core.QueueLimits from the file.
func (q fileQueue) policy() (core.QueueLimits, error) {
	l := core.QueueLimits{MaxRunning: q.MaxRunning, MaxRunningPerKind: q.MaxRunningPerKind, MaxRunningPerPartition: q.MaxRunningPerPartition,
		Fair: q.Fair, Aging: core.PriorityAging{MaxSteps: q.AgingMaxSteps}}
	var err error
	if l.Rate, err = core.ParseRateLimit(q.Rate); err != nil {
		return l, err
	}
	if l.RatePerPartition, err = core.ParseRateLimit(q.RatePerPartition); err != nil {
		return l, fmt.Errorf("rate_per_partition: %w", err)
	}
	for k, spec := range q.RatePerKind {
		r, err := core.ParseRateLimit(spec)
		if err != nil {
			return l, fmt.Errorf("rate_per_kind %q: %w", k, err)
		}
		if l.RatePerKind == nil {
			l.RatePerKind = map[string]core.RateLimit{}
		}
		l.RatePerKind[k] = r
	}
	if q.Aging != nil {
		l.Aging.Every = time.Duration(*q.Aging)
	}
	return l, l.Validate()
}

type fileHandler struct {
	Command command           `json:"command"`
	Timeout *duration         `json:"timeout"`
	Retry   *retryPolicy      `json:"retry"`
	Snooze  *duration         `json:"snooze"`
	Env     map[string]string `json:"env"`
}

// duration is a time.Duration written in JSON as a Go duration string
// ("30s", "5m", "1h30m").
type duration time.Duration

func (d *duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration must be a string like \"30s\", not %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("bad duration %q (use forms like \"500ms\", \"30s\", \"5m\", \"1h\")", s)
	}
	*d = duration(v)
	return nil
}

// command is a handler command in JSON: a string run with sh -c, or an
// argv array run directly.
type command []string

func (c *command) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		if strings.TrimSpace(s) == "" {
			return errors.New("command is empty")
		}
		*c = shellArgv(s)
		return nil
	}
	var argv []string
	if err := json.Unmarshal(b, &argv); err != nil {
		return fmt.Errorf("command must be a string (run with sh -c) or an array of strings (argv), not %s", b)
	}
	if len(argv) == 0 || argv[0] == "" {
		return errors.New("command array is empty")
	}
	*c = argv
	return nil
}

func shellArgv(s string) []string { return []string{"sh", "-c", s} }

// retryPolicy is a retry policy in JSON: an array of durations is a
// core.DelayList (["10s", "1m", "10m"]: the last repeats), an object a
// core.ExponentialBackoff ({"base": "1s", "max": "1h", "jitter": 0.1}:
// base 0 means 1 s, max 0 means 24 h, jitter a fraction 0..1, absent
// means 0.25, 0 means none). A kind's policy (handlers.KIND.retry,
// retry_by_kind) may also set the attempts its jobs get when enqueued
// without their own: "max_attempts" beside base/max/jitter
// (core.WithMaxAttempts), or
// {"retries": ["10s", "1m"]}, an exact schedule where N delays mean N
// retries, N+1 attempts (core.WithRetries).
type retryPolicy struct {
	core.RetryPolicy
	// maxAttempts is the kind's default attempts (core.WithMaxAttempts):
	// the object forms' max_attempts, or len(retries)+1; 0 for none.
	maxAttempts int
}

func (p *retryPolicy) UnmarshalJSON(b []byte) error {
	var list []duration
	if err := json.Unmarshal(b, &list); err == nil {
		dl, err := delayList(list)
		if err != nil {
			return err
		}
		p.RetryPolicy = dl
		return nil
	}
	var obj struct {
		Base        *duration  `json:"base"`
		Max         *duration  `json:"max"`
		Jitter      *float64   `json:"jitter"`
		Retries     []duration `json:"retries"`
		MaxAttempts *int       `json:"max_attempts"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&obj); err != nil {
		return fmt.Errorf("a retry policy is a list of delays ([\"10s\", \"1m\"]), an exact schedule ({\"retries\": [\"10s\", \"1m\"]}: 2 retries, 3 attempts), or an exponential backoff ({\"base\": \"1s\", \"max\": \"1h\", \"jitter\": 0.1, \"max_attempts\": 5}), not %s (%v)", b, err)
	}
	exp := obj.Base != nil || obj.Max != nil || obj.Jitter != nil
	switch {
	case obj.Retries != nil && (exp || obj.MaxAttempts != nil):
		return errors.New("retries is a kind's whole schedule (N delays, N retries): it goes without base, max, jitter and max_attempts")
	case obj.MaxAttempts != nil && *obj.MaxAttempts < 1:
		return fmt.Errorf("max_attempts %d is below 1", *obj.MaxAttempts)
	}
	if obj.MaxAttempts != nil {
		p.maxAttempts = *obj.MaxAttempts
	}
	switch {
	case obj.Retries != nil:
		dl, err := delayList(obj.Retries)
		if err != nil {
			return err
		}
		p.RetryPolicy, p.maxAttempts = dl, len(dl)+1
		return nil
	}
	var e core.ExponentialBackoff
	if obj.Base != nil {
		e.Base = time.Duration(*obj.Base)
	}
	if obj.Max != nil {
		e.Max = time.Duration(*obj.Max)
	}
	switch {
	case e.Base < 0 || e.Max < 0:
		return errors.New("retry base and max must not be negative")
	case obj.Jitter == nil:
	case *obj.Jitter < 0 || *obj.Jitter > 1:
		return fmt.Errorf("retry jitter %g is outside 0..1", *obj.Jitter)
	case *obj.Jitter == 0:
		e.Jitter = -1 // none
	default:
		e.Jitter = *obj.Jitter
	}
	p.RetryPolicy = e
	return nil
}

// delayList converts a JSON list of delays, none negative.
func delayList(list []duration) (core.DelayList, error) {
	dl := make(core.DelayList, len(list))
	for i, d := range list {
		if d < 0 {
			return nil, fmt.Errorf("retry delay %s is negative", time.Duration(d))
		}
		dl[i] = time.Duration(d)
	}
	return dl, nil
}

// attempts returns p's max attempts, 0 for none (or a nil p).
func (p *retryPolicy) attempts() int {
	if p == nil {
		return 0
	}
	return p.maxAttempts
}

// policy returns p's policy, nil for none.
func (p *retryPolicy) policy() core.RetryPolicy {
	if p == nil {
		return nil
	}
	return p.RetryPolicy
}

// loadConfigFile reads and strictly decodes a config file: unknown fields
// are errors, so typos don't pass silently.
func loadConfigFile(path string) (*fileConfig, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	var fc fileConfig
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fc); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line, col := position(b, se.Offset)
			return nil, fmt.Errorf("config %s:%d:%d: %v", path, line, col, err)
		}
		return nil, fmt.Errorf("config %s: %v", path, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("config %s: extra data after the JSON object", path)
	}
	return &fc, nil
}

// position turns a byte offset into a 1-based line and column.
func position(b []byte, off int64) (int, int) {
	off = min(max(off, 0), int64(len(b)))
	before := b[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	col := int(off) - bytes.LastIndexByte(before, '\n')
	return line, col
}

// workConfig is the effective configuration of a work/serve run, after the
// config file and the flags are merged.
type workConfig struct {
	db       string
	workerID string
	queues   map[string]int // name → max workers
	// claimAhead is the file's queues.*.claim_ahead (core.QueueConfig.ClaimAhead).
	claimAhead map[string]int
	// limits are the file's queues.*.max_running* (core.QueueConfig.Limits).
	limits map[string]*core.QueueLimits
	// periodic is the file's periodic jobs (core.Config.Periodic).
	periodic []core.PeriodicJob
	handlers map[string]*handlerConfig
	timeout  time.Duration
	retry    core.RetryPolicy // nil = exponential backoff
	// retryByKind is the file's retry_by_kind: the policy of kinds whose
	// handler has none here, wherever they run (see kindRetry).
	retryByKind map[string]core.RetryPolicy
	// attemptsByKind is the max_attempts of retry_by_kind entries (or
	// len(retries)+1): the attempts of the kind's jobs enqueued without
	// their own (core.WithMaxAttempts).
	attemptsByKind  map[string]int
	completedTTL    time.Duration
	cancelledTTL    time.Duration
	discardedTTL    time.Duration
	archive         bool          // move jobs past their retention to the archive (core.Retention.Archive)
	archiveTTL      time.Duration // core.Retention.ArchiveTTL
	lease           time.Duration
	pollInterval    time.Duration
	shutdownTimeout time.Duration
	migrate         bool
	waitForDB       dbWait        // how long start-up waits for an unreachable database
	killGrace       time.Duration // tests shorten it; not a flag
	tags            []string      // worker capabilities (capability routing)
	// handlerEnv are the variables handlers get besides the default ones
	// (shell.go, passedEnv): "NAME" passes the worker's NAME, "NAME=value"
	// sets it. The file's entries, then the flags'.
	handlerEnv []string
	// encryption is encryption at rest (keys.go); nil without keys.
	encryption *core.Encryption
	// webhookFile is the config file's webhooks section (webhook.go).
	webhookFile *fileWebhooks
}

type handlerConfig struct {
	argv    []string
	timeout time.Duration
	retry   core.RetryPolicy // nil = the run's default
	// maxAttempts is the kind's default attempts (core.WithMaxAttempts);
	// 0 for DefaultMaxAttempts.
	maxAttempts int
	snooze      time.Duration
	env         map[string]string
	// webhook runs the kind when its command is a URL (webhook.go).
	webhook core.HandlerFunc
}

// workFlags are the command-line flags of work/serve.
type workFlags struct {
	config          string
	handlers        []string
	handlerEnv      []string
	queues          []string
	workerID        string
	timeout         time.Duration
	completedTTL    time.Duration
	cancelledTTL    time.Duration
	discardedTTL    time.Duration
	archive         bool
	archiveTTL      time.Duration
	lease           time.Duration
	pollInterval    time.Duration
	shutdownTimeout time.Duration
	migrate         bool
	waitForDB       dbWait
	tags            []string
	keys            keyFlags
	webhook         webhookFlags
	// handlersOptional lets serve run without local handlers: remote
	// workers of its HTTP API run the jobs.
	handlersOptional bool
}

// Defaults of work/serve.
const (
	defaultQueue        = core.DefaultQueue
	defaultMaxWorkers   = 10
	defaultCompletedTTL = 24 * time.Hour
	defaultArchiveTTL   = 30 * 24 * time.Hour
	defaultLease        = 30 * time.Second
	defaultPoll         = time.Second
	defaultShutdown     = 30 * time.Second
)

func (f *workFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.config, "config", "", "JSON config file (queues, handlers, timeouts); flags override it")
	fl.StringArrayVar(&f.handlers, "handler", nil, "KIND=COMMAND: run jobs of KIND with sh -c COMMAND (repeatable)")
	f.keys.register(fl, true)
	f.webhook.register(fl)
	fl.StringArrayVar(&f.handlerEnv, "handler-env", nil, "NAME or NAME=value: pass the worker's NAME (or set NAME) to handlers, whose environment is otherwise only PATH, HOME, LANG, LC_*, TZ, TMPDIR, TRACEPARENT, TRACESTATE (repeatable)")
	fl.StringArrayVar(&f.queues, "queue", nil, "NAME[=MAXWORKERS]: work this queue with up to MAXWORKERS jobs at once (repeatable; default default=10)")
	fl.StringVar(&f.workerID, "worker-id", "", "worker id (default host-pid-random)")
	fl.DurationVar(&f.timeout, "timeout", 0, "time limit of one attempt of every kind without its own (0 = none)")
	fl.DurationVar(&f.completedTTL, "completed-ttl", defaultCompletedTTL, "keep completed jobs this long (0 = delete at once, negative = forever)")
	fl.DurationVar(&f.cancelledTTL, "cancelled-ttl", core.DefaultRetention.Cancelled, "keep cancelled jobs this long (0 = delete at once, negative = forever)")
	fl.DurationVar(&f.discardedTTL, "discarded-ttl", core.DefaultRetention.Discarded, "keep discarded (dead-lettered) jobs this long (0 = delete at once, negative = forever)")
	fl.BoolVar(&f.archive, "archive", false, "move finished jobs past their retention into the archive table instead of deleting them (read with jobs list --archived)")
	fl.DurationVar(&f.archiveTTL, "archive-ttl", defaultArchiveTTL, "keep archived jobs this long after they finished (0 or negative = forever)")
	fl.DurationVar(&f.lease, "lease", defaultLease, "lease of a claimed job, renewed by heartbeats every third of it")
	fl.DurationVar(&f.pollInterval, "poll-interval", defaultPoll, "how often an idle queue checks for due jobs")
	fl.DurationVar(&f.shutdownTimeout, "shutdown-timeout", defaultShutdown, "after the first SIGINT/SIGTERM, wait this long for running jobs before a hard stop")
	fl.BoolVar(&f.migrate, "migrate", true, "migrate the store's schema on start")
	f.waitForDB = dbWait{forever: true}
	fl.Var(&f.waitForDB, "wait-for-db", "at start, keep retrying a database that is unreachable (down, starting, restarting) this long: a duration, 0 to fail at once, or forever")
	fl.StringSliceVar(&f.tags, "tag", nil, "capability of this worker (repeatable or comma-separated): jobs with tags run only on workers that have them all")
}

// resolve merges built-in defaults, the config file (if any) and the flags
// that were set, and validates the result. Errors are usage errors.
func (f *workFlags) resolve(fl *pflag.FlagSet, dbURL string, dbFromUser bool) (*workConfig, error) {
	wc := &workConfig{
		db:              dbURL,
		queues:          map[string]int{},
		handlers:        map[string]*handlerConfig{},
		completedTTL:    defaultCompletedTTL,
		cancelledTTL:    core.DefaultRetention.Cancelled,
		discardedTTL:    core.DefaultRetention.Discarded,
		archiveTTL:      defaultArchiveTTL,
		lease:           defaultLease,
		pollInterval:    defaultPoll,
		shutdownTimeout: defaultShutdown,
		migrate:         f.migrate,
		waitForDB:       f.waitForDB,
	}
	if f.config != "" {
		fc, err := loadConfigFile(f.config)
		if err != nil {
			return nil, usageError{err}
		}
		if fc.DB != "" && !dbFromUser {
			wc.db = fc.DB
		}
		wc.workerID = fc.WorkerID
		wc.periodic = fc.periodicJobs()
		wc.webhookFile = fc.Webhooks
		for name, q := range fc.Queues {
			if q.MaxWorkers < 0 {
				return nil, usagef("config: queue %q: max_workers %d is negative", name, q.MaxWorkers)
			}
			n := q.MaxWorkers
			if n == 0 {
				n = defaultMaxWorkers
			}
			wc.queues[name] = n
			if q.ClaimAhead != 0 {
				if wc.claimAhead == nil {
					wc.claimAhead = map[string]int{}
				}
				wc.claimAhead[name] = q.ClaimAhead
			}
			l, err := q.policy()
			if err != nil {
				return nil, usagef("config: queue %q: %v", name, err)
			}
			if !l.IsZero() {
				if wc.limits == nil {
					wc.limits = map[string]*core.QueueLimits{}
				}
				wc.limits[name] = &l
			}
		}
		for kind, h := range fc.Handlers {
			if len(h.Command) == 0 {
				return nil, usagef("config: handler %q has no command", kind)
			}
			hc := &handlerConfig{argv: h.Command, retry: h.Retry.policy(), maxAttempts: h.Retry.attempts(), env: h.Env}
			if h.Timeout != nil {
				hc.timeout = time.Duration(*h.Timeout)
			}
			if h.Snooze != nil {
				hc.snooze = time.Duration(*h.Snooze)
			}
			wc.handlers[kind] = hc
		}
		set := func(dst *time.Duration, v *duration) {
			if v != nil {
				*dst = time.Duration(*v)
			}
		}
		set(&wc.timeout, fc.Timeout)
		set(&wc.completedTTL, fc.CompletedTTL)
		set(&wc.cancelledTTL, fc.CancelledTTL)
		set(&wc.discardedTTL, fc.DiscardedTTL)
		set(&wc.archiveTTL, fc.ArchiveTTL)
		if fc.Archive != nil {
			wc.archive = *fc.Archive
		}
		set(&wc.lease, fc.Lease)
		set(&wc.pollInterval, fc.PollInterval)
		set(&wc.shutdownTimeout, fc.ShutdownTimeout)
		if fc.Retry.attempts() > 0 {
			return nil, usagef("config: retry: max_attempts and retries belong to a kind's policy (handlers.KIND.retry or retry_by_kind), not to the default one")
		}
		wc.retry = fc.Retry.policy()
		for kind, p := range fc.RetryByKind {
			if p.policy() == nil {
				return nil, usagef("config: retry_by_kind %q has no policy", kind)
			}
			if wc.retryByKind == nil {
				wc.retryByKind, wc.attemptsByKind = map[string]core.RetryPolicy{}, map[string]int{}
			}
			wc.retryByKind[kind] = p.policy()
			if n := p.attempts(); n > 0 {
				wc.attemptsByKind[kind] = n
			}
		}
		for _, e := range fc.HandlerEnv {
			if err := checkHandlerEnv(e); err != nil {
				return nil, usagef("config: handler_env %v", err)
			}
		}
		wc.handlerEnv = append(wc.handlerEnv, fc.HandlerEnv...)
	}

	// Flags override the file.
	if fl.Changed("worker-id") {
		wc.workerID = f.workerID
	}
	if len(f.queues) > 0 {
		wc.queues = map[string]int{}
		wc.claimAhead, wc.limits = nil, nil // the file's queues are replaced
		for _, q := range f.queues {
			name, n, err := parseQueueFlag(q)
			if err != nil {
				return nil, err
			}
			wc.queues[name] = n
		}
	}
	if len(wc.queues) == 0 {
		wc.queues[defaultQueue] = defaultMaxWorkers
	}
	for _, h := range f.handlers {
		kind, cmdline, ok := strings.Cut(h, "=")
		kind = strings.TrimSpace(kind)
		if !ok || kind == "" || strings.TrimSpace(cmdline) == "" {
			return nil, usagef("--handler %q must be KIND=COMMAND", h)
		}
		hc := wc.handlers[kind]
		if hc == nil {
			hc = &handlerConfig{}
			wc.handlers[kind] = hc
		}
		hc.argv = shellArgv(cmdline)
	}
	for _, e := range f.handlerEnv {
		if err := checkHandlerEnv(e); err != nil {
			return nil, usagef("--handler-env %v", err)
		}
	}
	wc.handlerEnv = append(wc.handlerEnv, f.handlerEnv...) // adds to the file's
	if fl.Changed("timeout") {
		wc.timeout = f.timeout
	}
	wc.tags = f.tags
	if len(wc.tags) > contract.MaxTags {
		return nil, usagef("%d --tag values, over the limit of %d", len(wc.tags), contract.MaxTags)
	}
	for _, t := range wc.tags {
		if t == "" || len(t) > contract.MaxTagLen {
			return nil, usagef("--tag %q must be 1..%d bytes", t, contract.MaxTagLen)
		}
	}
	if fl.Changed("completed-ttl") {
		wc.completedTTL = f.completedTTL
	}
	if fl.Changed("cancelled-ttl") {
		wc.cancelledTTL = f.cancelledTTL
	}
	if fl.Changed("discarded-ttl") {
		wc.discardedTTL = f.discardedTTL
	}
	if fl.Changed("archive") {
		wc.archive = f.archive
	}
	if fl.Changed("archive-ttl") {
		wc.archiveTTL = f.archiveTTL
	}
	if fl.Changed("lease") {
		wc.lease = f.lease
	}
	if fl.Changed("poll-interval") {
		wc.pollInterval = f.pollInterval
	}
	if fl.Changed("shutdown-timeout") {
		wc.shutdownTimeout = f.shutdownTimeout
	}

	// Validate.
	if len(wc.handlers) == 0 && !f.handlersOptional {
		return nil, usagef("no handlers: give --handler KIND=COMMAND (repeatable) or a --config file with handlers")
	}
	for name, n := range wc.queues {
		if err := contract.ValidateQueueName(name); err != nil {
			return nil, usageError{err}
		}
		if n < 1 {
			return nil, usagef("queue %q: max workers must be at least 1", name)
		}
	}
	for kind, hc := range wc.handlers {
		if len(kind) > contract.MaxKindLen {
			return nil, usagef("handler kind %q is over %d bytes", kind, contract.MaxKindLen)
		}
		if hc.timeout < 0 || hc.snooze < 0 {
			return nil, usagef("handler %q: timeout and snooze must not be negative", kind)
		}
		if _, both := wc.retryByKind[kind]; both && hc.retry != nil {
			return nil, usagef("config: kind %q has a retry in its handler and one in retry_by_kind; a kind has one retry policy, wherever it runs: keep one", kind)
		}
	}
	switch {
	case wc.timeout < 0:
		return nil, usagef("--timeout must not be negative")
	case wc.lease < time.Second:
		return nil, usagef("--lease must be at least 1s (heartbeats renew it every third)")
	case wc.pollInterval <= 0:
		return nil, usagef("--poll-interval must be positive")
	case wc.shutdownTimeout < 0:
		return nil, usagef("--shutdown-timeout must not be negative")
	}
	return wc, nil
}

// kindOptions are the options of kind wherever it runs, its handler's
// retry (and max attempts) else its retry_by_kind entry: core.WithRetry
// and core.WithMaxAttempts, given to its handler or to
// core.Handlers.Declare. None when it has neither.
func (wc *workConfig) kindOptions(kind string) []core.KindOption {
	var opts []core.KindOption
	if p := wc.kindRetry(kind); p != nil {
		opts = append(opts, core.WithRetry(p))
	}
	n := wc.attemptsByKind[kind]
	if hc := wc.handlers[kind]; hc != nil && hc.retry != nil {
		n = hc.maxAttempts
	}
	if n > 0 {
		opts = append(opts, core.WithMaxAttempts(n))
	}
	return opts
}

// kindRetry is the retry policy of kind: its handler's retry, else its
// retry_by_kind entry (nil: the run's default, retry). The engine applies
// it to every failure of the kind, whether this node's handler, a remote
// worker of serve's HTTP API or a rescue reports it (core.Handlers.Declare
// for kinds with no handler here).
func (wc *workConfig) kindRetry(kind string) core.RetryPolicy {
	if hc := wc.handlers[kind]; hc != nil && hc.retry != nil {
		return hc.retry
	}
	return wc.retryByKind[kind]
}

// parseQueueFlag reads NAME or NAME=MAXWORKERS.
func parseQueueFlag(s string) (string, int, error) {
	name, n, hasN := strings.Cut(s, "=")
	name = strings.TrimSpace(name)
	if err := contract.ValidateQueueName(name); err != nil {
		return "", 0, usagef("--queue %q: %v", s, err)
	}
	if !hasN {
		return name, defaultMaxWorkers, nil
	}
	v, err := strconv.Atoi(strings.TrimSpace(n))
	if err != nil || v < 1 {
		return "", 0, usagef("--queue %q: MAXWORKERS must be a positive integer", s)
	}
	return name, v, nil
}

// queueNames returns the configured queues sorted by name.
func (wc *workConfig) queueNames() []string {
	out := make([]string, 0, len(wc.queues))
	for q := range wc.queues {
		out = append(out, q)
	}
	slices.Sort(out)
	return out
}
