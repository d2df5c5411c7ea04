// Package prometheus exports backlog's engine events and store state as
// Prometheus metrics (github.com/prometheus/client_golang).
//
// A Metrics value is two things: a core.Observer that counts what this
// node's client does (add it to core.Config.Observers), and a
// prometheus.Collector that reports cluster-wide state from the store
// (jobs per queue and state, running jobs, workers by liveness, and on a
// store with job dependencies the open workflows and batches), read
// through a core.StatsCache and at most Options.MaxAge (5 s) old, so that
// any number of scrapers costs at most one store read per MaxAge. Register it with a registry and serve that registry, for
// example with promhttp:
//
//	var client *core.Client
//	m := prometheus.New(store, prometheus.Options{
//		Running: func() int { return len(client.Running()) }, // optional
//	})
//	client, _ = core.NewClient(store, core.Config{Observers: []core.Observer{m}, …})
//	reg := promclient.NewRegistry()
//	reg.MustRegister(m)
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// (The observer must exist before the client and the Running function
// needs the client, hence the variable: serve the registry only once it is
// set.)
//
// Counters and histograms are per node (sum them across nodes in queries),
// except the cluster counters (backlog_cluster_jobs_completed_total and
// backlog_cluster_jobs_failed_total), which are read from the store's
// queue history (contract.QueueHistory) like the gauges;
// they also count what remote workers of the HTTP API report, since those
// reports reach observers through core.Client.Emit. Gauges read from the
// store describe the whole cluster, so every node reports the same values
// (use max or avg across nodes, not sum).
//
// Every metric, its labels and example queries are described in
// docs/metrics.md. The label values this package produces itself:
//
//   - reason on backlog_jobs_discarded_total: exhausted, deadline,
//     permanent, worker_lost, or other for a reason this package does not
//     know (an Emit from a newer component).
//   - cause on backlog_jobs_rescued_total: lease_expired, worker_dead, or
//     unknown (see Metrics.Observe).
//   - liveness on backlog_workers: active, stale, dead.
//   - kind is the job's kind, or other once Options.MaxKinds distinct kinds
//     have been seen.
//   - queue is the job's queue, or other once Options.MaxQueues distinct
//     queues (beyond Options.Queues) have been seen; the store gauges of
//     the queues folded into other are summed (see Metrics.Collect).
package prometheus

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	prom "github.com/prometheus/client_golang/prometheus"
)

// Options configure New. Zero values mean the defaults.
type Options struct {
	// Namespace prefixes every metric name; "" means "backlog".
	Namespace string
	// MaxKinds bounds the distinct kind label values; kinds seen after
	// that are counted under kind="other". 0 means 200.
	MaxKinds int
	// MaxQueues bounds the distinct queue label values, so that creating
	// queues cannot grow a scrape and this process's memory without end:
	// queues seen after that (by events or by a scrape of the store, in
	// the order seen) are reported under queue="other". 0 means
	// DefaultMaxQueues (200).
	MaxQueues int
	// Queues always get a queue label of their own, and do not count
	// towards MaxQueues (for example the queues of the server's
	// configuration).
	Queues []string
	// StaleAfter and DeadAfter classify workers by the age of their last
	// heartbeat (core.WorkerInfo.Liveness): active below StaleAfter
	// (default 30 s), stale below DeadAfter (default 2 min), dead after.
	// Set them to the client's WorkerStaleAfter and WorkerDeadAfter.
	StaleAfter, DeadAfter time.Duration
	// ScrapeTimeout bounds how long one scrape waits for the store
	// reads; 0 means 5 s. (A read that takes longer goes on in the
	// background, bounded by core.StatsReadTimeout, and serves the scrapes
	// after it.)
	ScrapeTimeout time.Duration
	// StatsCache is where the store gauges are read (Store.Stats counts
	// every job: a full scan on the SQL stores). Share one cache between
	// everything in the process that reads Store.Stats or Store.Workers
	// (the HTTP API's queue list, dashboards). nil means a cache of this
	// Metrics' own over the store given to New.
	StatsCache *core.StatsCache
	// MaxAge is how old an answer of the StatsCache a scrape accepts:
	// however many scrapers there are, the store is read at most once per
	// MaxAge (and scrapes that arrive during a read share it), so the
	// gauges lag the store by up to MaxAge plus one read. 0 means
	// DefaultMaxAge (5 s); negative means every scrape reads anew (still
	// joining a read in flight).
	MaxAge time.Duration
	// Now is the clock used for worker liveness; nil means time.Now.
	Now func() time.Time
	// Running, when set, reports how many jobs this node executes now
	// (exported as the node_running_jobs gauge), for example
	// func() int { return len(client.Running()) }. It is called at every
	// scrape and must be safe for concurrent use.
	Running func() int
	// Buckets are the upper bounds, in seconds, of the queue wait,
	// execution and end-to-end histograms; nil means DefaultBuckets().
	Buckets []float64
	// Logger receives a warning when a scrape cannot read the store; nil
	// means slog.Default().
	Logger *slog.Logger
	// History is where the cluster counters and the due-jobs gauges are
	// read (contract.QueueHistory: the counts every node adds to the store,
	// and the gauges any node samples); nil means the store given to New
	// when it is a contract.QueueHistory, and otherwise those metrics are
	// left out. Reads are shared like the StatsCache's: at most one per
	// MaxAge.
	History contract.QueueHistory
}

// DefaultMaxQueues is the default of Options.MaxQueues: how many distinct
// queues get a label of their own.
const DefaultMaxQueues = 200

// otherLabel is the label value of the kinds and queues beyond the caps.
const otherLabel = "other"

// DefaultMaxAge is the default of Options.MaxAge: the age of the store
// gauges a scrape accepts.
const DefaultMaxAge = 5 * time.Second

// DefaultBuckets returns the default histogram upper bounds in seconds: 1 ms
// to 10 s in 1-2.5-5 steps (handlers and queue waits on a healthy system),
// then 30 s up to 1 day (batch jobs, backlogs, retries and scheduled delays
// in end-to-end times). It returns a new slice on each call.
func DefaultBuckets() []float64 {
	return []float64{
		0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
		1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400,
	}
}

// Rescue causes, the values of the cause label of jobs_rescued_total.
const (
	causeLeaseExpired = "lease_expired" // Store.Rescue: the lease ran out
	causeWorkerDead   = "worker_dead"   // Store.RescueWorkers: the holder was declared dead
	causeUnknown      = "unknown"       // the event did not say
)

// Metrics is a core.Observer and a prometheus.Collector. Create it with New;
// it is safe for concurrent use.
type Metrics struct {
	stats *core.StatsCache // nil when New was given no store
	hist  *historyCache    // nil when there is no contract.QueueHistory
	rates *rateCache       // nil when the store is no contract.QueueLimiter
	flows *flowCache       // nil when the store is no contract.Dependencies
	opts  Options
	log   *slog.Logger

	mu     sync.Mutex
	kinds  map[string]bool
	queues map[string]bool // labelled queues: Options.Queues and up to MaxQueues more
	pinned int             // how many of queues are Options.Queues

	submitted, claimed, completed, failed, retried, snoozed, continued, cancelled *prom.CounterVec
	discarded, rescued, leaseLost, pruned                                         *prom.CounterVec
	expired, workersRegistered, workersDied, storeErrors                          prom.Counter
	vacuums, vacuumedRows                                                         prom.Counter
	queueWait, execution, endToEnd                                                *prom.HistogramVec

	jobsDesc, runningDesc, nodeRunningDesc, workersDesc, pausedDesc, scrapeErrDesc *prom.Desc
	clusterCompletedDesc, clusterFailedDesc, dueDesc, oldestDesc                   *prom.Desc
	rateWaitDesc, rateGroupsDesc                                                   *prom.Desc
	flowsOpenDesc, flowsOldestDesc, flowsCappedDesc                                *prom.Desc
}

// New returns metrics reading store state from st through
// opts.StatsCache, or through a cache of its own over st when that is nil.
// With neither (st nil, no cache) only the event metrics are exported.
func New(st contract.Store, opts Options) *Metrics {
	if opts.Namespace == "" {
		opts.Namespace = "backlog"
	}
	if opts.MaxKinds <= 0 {
		opts.MaxKinds = 200
	}
	if opts.MaxQueues <= 0 {
		opts.MaxQueues = DefaultMaxQueues
	}
	queues := make(map[string]bool, len(opts.Queues))
	for _, q := range opts.Queues {
		queues[q] = true
	}
	if opts.StaleAfter <= 0 {
		opts.StaleAfter = 30 * time.Second
	}
	if opts.DeadAfter <= 0 {
		opts.DeadAfter = 2 * time.Minute
	}
	if opts.ScrapeTimeout <= 0 {
		opts.ScrapeTimeout = 5 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxAge == 0 {
		opts.MaxAge = DefaultMaxAge
	}
	stats := opts.StatsCache
	if stats == nil && st != nil {
		stats = core.NewStatsCache(st)
	}
	if len(opts.Buckets) == 0 {
		opts.Buckets = DefaultBuckets()
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	var histCache *historyCache
	if opts.History == nil {
		opts.History, _ = st.(contract.QueueHistory)
	}
	if opts.History != nil {
		histCache = &historyCache{h: opts.History}
	}
	var rates *rateCache
	if ql, ok := st.(contract.QueueLimiter); ok {
		rates = &rateCache{ql: ql}
	}
	var flows *flowCache
	if _, ok := st.(contract.Dependencies); ok {
		flows = &flowCache{st: st}
	}
	ns := opts.Namespace
	counterVec := func(name, help string, labels ...string) *prom.CounterVec {
		return prom.NewCounterVec(prom.CounterOpts{Namespace: ns, Name: name, Help: help}, labels)
	}
	counter := func(name, help string) prom.Counter {
		return prom.NewCounter(prom.CounterOpts{Namespace: ns, Name: name, Help: help})
	}
	hist := func(name, help string, labels ...string) *prom.HistogramVec {
		return prom.NewHistogramVec(prom.HistogramOpts{Namespace: ns, Name: name, Help: help, Buckets: opts.Buckets}, labels)
	}
	return &Metrics{
		stats:  stats,
		hist:   histCache,
		rates:  rates,
		flows:  flows,
		opts:   opts,
		log:    log,
		kinds:  map[string]bool{},
		queues: queues,
		pinned: len(queues),

		submitted: counterVec("jobs_submitted_total", "Jobs inserted by this node (duplicates of unique keys excluded).", "queue", "kind"),
		claimed:   counterVec("jobs_claimed_total", "Jobs claimed by this node and its remote workers.", "queue", "kind"),
		completed: counterVec("jobs_completed_total", "Jobs completed.", "queue", "kind"),
		failed:    counterVec("jobs_failed_total", "Attempts that failed (retried, or discarded as exhausted, deadline or permanent), by cause (handler_error, panic, timeout, deadline, unknown_kind, decrypt_failed, invalid_continue, shutdown, unknown).", "queue", "kind", "cause"),
		retried:   counterVec("jobs_retried_total", "Failed attempts scheduled for a retry.", "queue", "kind"),
		snoozed:   counterVec("jobs_snoozed_total", "Jobs snoozed or handed back at a hard stop.", "queue", "kind"),
		continued: counterVec("jobs_continued_total", "Jobs that moved on to a next step.", "queue", "kind"),
		cancelled: counterVec("jobs_cancelled_total", "Jobs cancelled by their handler (or a remote worker's cancel outcome).", "queue", "kind"),
		discarded: counterVec("jobs_discarded_total", "Jobs dead-lettered, by reason (exhausted, deadline, permanent, worker_lost, other).", "queue", "kind", "reason"),
		rescued:   counterVec("jobs_rescued_total", "Running jobs handed back by maintenance, by cause (lease_expired, worker_dead, unknown).", "queue", "kind", "cause"),
		leaseLost: counterVec("jobs_lease_lost_total", "Outcomes not applied because the job was no longer held (fenced).", "queue", "kind"),
		pruned:    counterVec("jobs_pruned_total", "Finished jobs deleted by retention, by state.", "state"),

		expired:           counter("jobs_deadline_discarded_total", "Pending jobs discarded by maintenance because their deadline passed."),
		vacuums:           counter("store_vacuums_total", "Vacuums of the jobs table run by this node's maintenance (stores that are a contract.Vacuumer: PostgreSQL)."),
		vacuumedRows:      counter("store_vacuumed_dead_rows_total", "Dead rows the jobs table held when this node's maintenance vacuumed it."),
		workersRegistered: counter("workers_registered_total", "Workers that registered for the first time (engine nodes and remote workers)."),
		workersDied:       counter("workers_died_total", "Workers declared dead by maintenance: jobs handed back and record removed."),
		storeErrors:       counter("store_errors_total", "Store calls that failed (and were retried)."),

		queueWait: hist("job_queue_wait_seconds", "Time from a job becoming due to its claim.", "queue"),
		execution: hist("job_execution_seconds", "Handler execution time of one attempt whose outcome applied.", "queue", "kind"),
		endToEnd:  hist("job_end_to_end_seconds", "Time from insert to completion, retries and steps included.", "queue"),

		jobsDesc:        prom.NewDesc(ns+"_jobs", "Jobs in the store per queue and state.", []string{"queue", "state"}, nil),
		runningDesc:     prom.NewDesc(ns+"_running_jobs", "Jobs running in the whole cluster per queue (from the store).", []string{"queue"}, nil),
		nodeRunningDesc: prom.NewDesc(ns+"_node_running_jobs", "Jobs executing on this node now.", nil, nil),
		pausedDesc:      prom.NewDesc(ns+"_queue_paused", "1 when the queue is paused.", []string{"queue"}, nil),
		workersDesc:     prom.NewDesc(ns+"_workers", "Registered workers by liveness (active, stale, dead).", []string{"liveness"}, nil),
		scrapeErrDesc:   prom.NewDesc(ns+"_scrape_error", "1 when the last scrape could not read the store.", nil, nil),

		clusterCompletedDesc: prom.NewDesc(ns+"_cluster_jobs_completed_total", "Jobs completed by every node of the cluster, per queue (the store's queue history totals).", []string{"queue"}, nil),
		clusterFailedDesc:    prom.NewDesc(ns+"_cluster_jobs_failed_total", "Failed attempts on every node of the cluster, per queue (the store's queue history totals).", []string{"queue"}, nil),
		dueDesc:              prom.NewDesc(ns+"_queue_due_jobs", "Due jobs waiting per queue at the latest sample of the store's queue history.", []string{"queue"}, nil),
		rateWaitDesc:         prom.NewDesc(ns+"_queue_rate_wait_seconds", "Per queue with a rate limit and scope (queue, kind, partition): how long until the rate-limited group that waits longest may start a job again; 0 when none waits.", []string{"queue", "scope"}, nil),
		rateGroupsDesc:       prom.NewDesc(ns+"_queue_rate_limited_groups", "Per queue with a rate limit and scope (queue, kind, partition): how many groups have used up their rate and wait.", []string{"queue", "scope"}, nil),
		oldestDesc:           prom.NewDesc(ns+"_queue_oldest_job_age_seconds", "How long the oldest due job of the queue had been due at the latest sample of the store's queue history.", []string{"queue"}, nil),

		flowsOpenDesc:   prom.NewDesc(ns+"_workflows_open", "Workflows or batches (type) with at least one job waiting for its dependencies (read from at most the oldest 10,000 waiting jobs).", []string{"type"}, nil),
		flowsOldestDesc: prom.NewDesc(ns+"_workflow_oldest_waiting_seconds", "Age (since insert) of the oldest job of a workflow or batch (type) still waiting for its dependencies; 0 when none waits.", []string{"type"}, nil),
		flowsCappedDesc: prom.NewDesc(ns+"_workflow_waiting_read_capped", "1 when the last read of the waiting jobs stopped at its cap (10,000 jobs): backlog_workflows_open is then a lower bound.", nil, nil),
	}
}

func (m *Metrics) collectors() []prom.Collector {
	return []prom.Collector{m.submitted, m.claimed, m.completed, m.failed, m.retried, m.snoozed, m.continued,
		m.cancelled, m.discarded, m.rescued, m.leaseLost, m.pruned,
		m.expired, m.workersRegistered, m.workersDied, m.storeErrors, m.vacuums, m.vacuumedRows,
		m.queueWait, m.execution, m.endToEnd}
}

// kind returns k, or "other" once MaxKinds distinct kinds have been seen.
func (m *Metrics) kind(k string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.kinds[k] {
		return k
	}
	if len(m.kinds) >= m.opts.MaxKinds {
		return otherLabel
	}
	m.kinds[k] = true
	return k
}

// queue returns the label of queue q: q when it is one of Options.Queues
// or among the first MaxQueues other queues seen, otherwise "other" (also
// for a queue named other, which takes no place).
func (m *Metrics) queue(q string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.queues[q] {
		return q
	}
	if q == otherLabel || len(m.queues)-m.pinned >= m.opts.MaxQueues {
		return otherLabel
	}
	m.queues[q] = true
	return q
}

// discardReason maps an event's reason to a bounded label value.
func discardReason(r string) string {
	switch r {
	case core.ReasonExhausted, core.ReasonDeadline, core.ReasonPermanent, core.ReasonWorkerLost:
		return r
	}
	return "other"
}

// rescueCause tells why a rescued job was handed back: Event.Cause when
// the event has one, otherwise the Cause of the job's last error entry
// (core.AttemptError.Cause, written by core.DecideRescue). Error text is
// never parsed.
func rescueCause(e core.Event) string {
	cause := e.Cause
	if cause == "" && e.Job != nil && len(e.Job.Errors) > 0 {
		cause = e.Job.Errors[len(e.Job.Errors)-1].Cause
	}
	switch cause {
	case core.CauseLeaseExpired:
		return causeLeaseExpired
	case core.CauseWorkerDead:
		return causeWorkerDead
	}
	return causeUnknown
}

// failCause is the cause label of a failed attempt: Event.Cause, or the
// Cause of the job's last error entry, among core's attempt causes;
// anything else (entries written before causes were recorded) is
// "unknown". Error text is never parsed.
func failCause(e core.Event) string {
	cause := e.Cause
	if cause == "" && e.Job != nil && len(e.Job.Errors) > 0 {
		cause = e.Job.Errors[len(e.Job.Errors)-1].Cause
	}
	switch cause {
	case core.CauseHandlerError, core.CausePanic, core.CauseTimeout, core.CauseDeadline, core.CauseUnknownKind,
		core.CauseDecrypt, core.CauseInvalidContinue, core.CauseShutdown:
		return cause
	}
	return causeUnknown
}

// Observe implements core.Observer. Job events are labelled with the
// job's queue (Event.Queue when Job is nil) and kind:
//
//   - job.inserted, job.claimed (also queue wait, Event.QueueWait),
//     job.completed (also end-to-end, Event.At − Job.CreatedAt),
//     job.retried (also failed, under the attempt's cause), job.snoozed, job.continued,
//     job.cancelled, job.lease_lost count one each;
//   - job.discarded counts under its Reason, and as failed unless the
//     reason is worker_lost;
//   - every outcome of an attempt that ran (completed, retried, snoozed,
//     continued, cancelled, discarded but not worker_lost) observes
//     Event.Duration in the execution histogram;
//   - jobs.rescued counts Count jobs (at least 1) under Event.Cause, or
//     when that is empty the Cause of the job's last error entry
//     (anything else is unknown), and a discard with reason worker_lost
//     when State is discarded;
//   - jobs.pruned, jobs.expired and workers.pruned add Count; store.vacuumed
//     counts one vacuum and adds Count to the dead rows;
//     worker.registered and store.error count one each.
//
// Unknown event kinds are ignored.
func (m *Metrics) Observe(e core.Event) {
	queue, kind := e.Queue, ""
	if e.Job != nil {
		queue, kind = e.Job.Queue, m.kind(e.Job.Kind)
	}
	if queue != "" {
		queue = m.queue(queue)
	}
	ran := func() { m.execution.WithLabelValues(queue, kind).Observe(e.Duration.Seconds()) }
	switch e.Kind {
	case core.EventJobInserted:
		m.submitted.WithLabelValues(queue, kind).Inc()
	case core.EventJobClaimed:
		m.claimed.WithLabelValues(queue, kind).Inc()
		m.queueWait.WithLabelValues(queue).Observe(max(e.QueueWait, 0).Seconds())
	case core.EventJobCompleted:
		m.completed.WithLabelValues(queue, kind).Inc()
		ran()
		if e.Job != nil && !e.Job.CreatedAt.IsZero() && !e.At.IsZero() {
			m.endToEnd.WithLabelValues(queue).Observe(max(e.At.Sub(e.Job.CreatedAt), 0).Seconds())
		}
	case core.EventJobRetried:
		m.failed.WithLabelValues(queue, kind, failCause(e)).Inc()
		m.retried.WithLabelValues(queue, kind).Inc()
		ran()
	case core.EventJobDiscarded:
		reason := discardReason(e.Reason)
		if core.FailedAttempt(e) {
			m.failed.WithLabelValues(queue, kind, failCause(e)).Inc()
			ran()
		}
		m.discarded.WithLabelValues(queue, kind, reason).Inc()
	case core.EventJobSnoozed:
		m.snoozed.WithLabelValues(queue, kind).Inc()
		ran()
	case core.EventJobContinued:
		m.continued.WithLabelValues(queue, kind).Inc()
		ran()
	case core.EventJobCancelled:
		m.cancelled.WithLabelValues(queue, kind).Inc()
		ran()
	case core.EventLeaseLost:
		m.leaseLost.WithLabelValues(queue, kind).Inc()
	case core.EventJobsRescued:
		n := float64(max(e.Count, 1))
		m.rescued.WithLabelValues(queue, kind, rescueCause(e)).Add(n)
		if e.State == core.StateDiscarded {
			m.discarded.WithLabelValues(queue, kind, core.ReasonWorkerLost).Add(n)
		}
	case core.EventJobsPruned:
		m.pruned.WithLabelValues(string(e.State)).Add(float64(max(e.Count, 0)))
	case core.EventJobsExpired:
		m.expired.Add(float64(max(e.Count, 0)))
	case core.EventWorkersPruned:
		m.workersDied.Add(float64(max(e.Count, 0)))
	case core.EventWorkerRegistered:
		m.workersRegistered.Inc()
	case core.EventStoreError:
		m.storeErrors.Inc()
	case core.EventStoreVacuumed:
		m.vacuums.Inc()
		m.vacuumedRows.Add(float64(max(e.Count, 0)))
	}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prom.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
	ch <- m.jobsDesc
	ch <- m.runningDesc
	ch <- m.nodeRunningDesc
	ch <- m.pausedDesc
	ch <- m.workersDesc
	ch <- m.scrapeErrDesc
	if m.rates != nil {
		ch <- m.rateWaitDesc
		ch <- m.rateGroupsDesc
	}
	if m.flows != nil {
		ch <- m.flowsOpenDesc
		ch <- m.flowsOldestDesc
		ch <- m.flowsCappedDesc
	}
	if m.hist != nil {
		ch <- m.clusterCompletedDesc
		ch <- m.clusterFailedDesc
		ch <- m.dueDesc
		ch <- m.oldestDesc
	}
}

// Collect implements prometheus.Collector: the event metrics, this node's
// running count (when Options.Running is set), then the store's state
// (Stats and Workers) from the StatsCache, at most Options.MaxAge old, the
// wait bounded by ScrapeTimeout. A failed store read is logged and sets
// scrape_error to 1; the gauges it would have produced are left out of
// that scrape rather than reported as zero.
//
// The store gauges of queues without a label of their own (beyond
// Options.MaxQueues) are reported once, under queue="other": job counts,
// running jobs, due jobs and cluster counters summed, queue_paused 1 when
// any of them is paused, the oldest job age the largest. Rate-limit
// gauges are read and reported only for queues with a label of their own.
func (m *Metrics) Collect(ch chan<- prom.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
	if m.opts.Running != nil {
		ch <- prom.MustNewConstMetric(m.nodeRunningDesc, prom.GaugeValue, float64(m.opts.Running()))
	}
	if m.stats == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.opts.ScrapeTimeout)
	defer cancel()
	failed := 0.0
	stats, err := m.stats.Stats(ctx, m.opts.MaxAge)
	if err != nil {
		failed = 1
		m.log.Warn("backlog: metrics scrape could not read queue stats", "err", err)
	}
	folded := m.foldStats(stats)
	for _, q := range folded {
		for _, st := range core.AllStates {
			ch <- prom.MustNewConstMetric(m.jobsDesc, prom.GaugeValue, float64(q.Counts[st]), q.Queue, string(st))
		}
		ch <- prom.MustNewConstMetric(m.runningDesc, prom.GaugeValue, float64(q.Counts[core.StateRunning]), q.Queue)
		paused := 0.0
		if q.Paused {
			paused = 1
		}
		ch <- prom.MustNewConstMetric(m.pausedDesc, prom.GaugeValue, paused, q.Queue)
	}
	workers, err := m.stats.Workers(ctx, m.opts.MaxAge)
	if err != nil {
		failed = 1
		m.log.Warn("backlog: metrics scrape could not read workers", "err", err)
	} else {
		now := m.opts.Now()
		count := map[core.Liveness]float64{}
		for _, w := range workers {
			count[w.Liveness(now, m.opts.StaleAfter, m.opts.DeadAfter)]++
		}
		for _, l := range []core.Liveness{core.LivenessActive, core.LivenessStale, core.LivenessDead} {
			ch <- prom.MustNewConstMetric(m.workersDesc, prom.GaugeValue, count[l], string(l))
		}
	}
	if m.hist != nil && !m.collectHistory(ctx, ch) {
		failed = 1
	}
	if m.rates != nil && len(folded) > 0 && !m.collectRates(ctx, ch, folded) {
		failed = 1
	}
	if m.flows != nil && !m.collectWorkflows(ctx, ch) {
		failed = 1
	}
	ch <- prom.MustNewConstMetric(m.scrapeErrDesc, prom.GaugeValue, failed)
}

// foldStats returns stats with the queues labelled "other" (m.queue) summed
// into one entry named other, last; the others keep their order. Paused is
// true for other when any folded queue is paused. (A queue named other is
// folded too: its series and the folded ones are one.)
func (m *Metrics) foldStats(stats []core.QueueStats) []core.QueueStats {
	out := make([]core.QueueStats, 0, min(len(stats), m.opts.MaxQueues+m.pinned+1))
	var other *core.QueueStats
	for _, q := range stats {
		if m.queue(q.Queue) != otherLabel {
			out = append(out, q)
			continue
		}
		if other == nil {
			other = &core.QueueStats{Queue: otherLabel, Counts: map[core.State]int{}}
		}
		for st, n := range q.Counts {
			other.Counts[st] += n
		}
		other.Paused = other.Paused || q.Paused
	}
	if other != nil {
		out = append(out, *other)
	}
	return out
}

var (
	_ core.Observer  = (*Metrics)(nil)
	_ prom.Collector = (*Metrics)(nil)
)
