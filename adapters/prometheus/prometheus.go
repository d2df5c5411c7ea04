// Package prometheus exports backlog's engine events and store state as
// Prometheus metrics (github.com/prometheus/client_golang).
//
// A Metrics value is two things: a core.Observer that counts what this
// node's client does (add it to core.Config.Observers), and a
// prometheus.Collector that reads cluster-wide state from the store at
// scrape time (jobs per queue and state, workers by liveness). Register it
// with a registry and serve that registry, for example with promhttp:
//
//	m := prometheus.New(store, prometheus.Options{})
//	reg := promclient.NewRegistry()
//	reg.MustRegister(m)
//	client, _ := core.NewClient(store, core.Config{Observers: []core.Observer{m}, …})
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// Counters and histograms are per node (sum them across nodes in queries);
// gauges describe the whole store, so every node reports the same values
// (use max or avg across nodes, not sum).
package prometheus

import (
	"context"
	"sync"
	"time"

	"github.com/backlogq/backlog/core"
	prom "github.com/prometheus/client_golang/prometheus"
)

// Options configure New. Zero values mean the defaults.
type Options struct {
	// Namespace prefixes every metric name; "" means "backlog".
	Namespace string
	// MaxKinds bounds the distinct kind label values; kinds seen after
	// that are counted under kind="other". 0 means 200.
	MaxKinds int
	// StaleAfter and DeadAfter classify workers by the age of their last
	// heartbeat: active below StaleAfter (default 30 s), stale below
	// DeadAfter (default 2 min), dead after.
	StaleAfter, DeadAfter time.Duration
	// ScrapeTimeout bounds the store reads of one scrape; 0 means 5 s.
	ScrapeTimeout time.Duration
	// Now is the clock used for worker liveness; nil means time.Now.
	Now func() time.Time
}

// Metrics is a core.Observer and a prometheus.Collector. Create it with New.
type Metrics struct {
	store core.Store
	opts  Options

	mu    sync.Mutex
	kinds map[string]bool

	submitted, claimed, completed, failed, retried, snoozed, continued, cancelled *prom.CounterVec
	discarded, rescued, leaseLost, pruned, expired, workersDied, storeErrors      *prom.CounterVec
	queueWait, execution, endToEnd                                                *prom.HistogramVec

	jobsDesc, workersDesc, pausedDesc, scrapeErrDesc *prom.Desc
}

// New returns metrics reading store state from st (which may be nil to
// export only the event counters).
func New(st core.Store, opts Options) *Metrics {
	if opts.Namespace == "" {
		opts.Namespace = "backlog"
	}
	if opts.MaxKinds <= 0 {
		opts.MaxKinds = 200
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
	ns := opts.Namespace
	counter := func(name, help string, labels ...string) *prom.CounterVec {
		return prom.NewCounterVec(prom.CounterOpts{Namespace: ns, Name: name, Help: help}, labels)
	}
	// Buckets from 1 ms to about 1.5 h: jobs range from no-ops to batch work.
	buckets := prom.ExponentialBuckets(0.001, 3, 16)
	hist := func(name, help string, labels ...string) *prom.HistogramVec {
		return prom.NewHistogramVec(prom.HistogramOpts{Namespace: ns, Name: name, Help: help, Buckets: buckets}, labels)
	}
	return &Metrics{
		store: st,
		opts:  opts,
		kinds: map[string]bool{},

		submitted:   counter("jobs_submitted_total", "Jobs inserted by this node (duplicates of unique keys excluded).", "queue", "kind"),
		claimed:     counter("jobs_claimed_total", "Jobs claimed by this node.", "queue", "kind"),
		completed:   counter("jobs_completed_total", "Jobs completed on this node.", "queue", "kind"),
		failed:      counter("jobs_failed_total", "Attempts that failed on this node (retried or discarded).", "queue", "kind"),
		retried:     counter("jobs_retried_total", "Failed attempts scheduled for a retry.", "queue", "kind"),
		snoozed:     counter("jobs_snoozed_total", "Jobs snoozed or handed back at a hard stop.", "queue", "kind"),
		continued:   counter("jobs_continued_total", "Jobs that moved on to a next step.", "queue", "kind"),
		cancelled:   counter("jobs_cancelled_total", "Jobs cancelled by their handler.", "queue", "kind"),
		discarded:   counter("jobs_discarded_total", "Jobs dead-lettered, by reason (exhausted, deadline, permanent, worker_lost).", "queue", "kind", "reason"),
		rescued:     counter("jobs_rescued_total", "Jobs rescued from workers whose lease expired.", "queue"),
		leaseLost:   counter("jobs_lease_lost_total", "Outcomes not applied because the job was no longer held (fenced).", "queue", "kind"),
		pruned:      counter("jobs_pruned_total", "Finished jobs deleted by retention, by state.", "state"),
		expired:     counter("jobs_deadline_discarded_total", "Pending jobs discarded by maintenance because their deadline passed."),
		workersDied: counter("workers_removed_total", "Dead worker records removed by maintenance."),
		storeErrors: counter("store_errors_total", "Store calls that failed (and were retried)."),

		queueWait: hist("job_queue_wait_seconds", "Time from a job becoming due to its claim.", "queue"),
		execution: hist("job_execution_seconds", "Handler execution time of one attempt.", "queue", "kind"),
		endToEnd:  hist("job_end_to_end_seconds", "Time from insert to completion.", "queue"),

		jobsDesc:      prom.NewDesc(ns+"_jobs", "Jobs in the store per queue and state.", []string{"queue", "state"}, nil),
		pausedDesc:    prom.NewDesc(ns+"_queue_paused", "1 when the queue is paused.", []string{"queue"}, nil),
		workersDesc:   prom.NewDesc(ns+"_workers", "Registered workers by liveness (active, stale, dead).", []string{"liveness"}, nil),
		scrapeErrDesc: prom.NewDesc(ns+"_scrape_error", "1 when the last scrape could not read the store.", nil, nil),
	}
}

func (m *Metrics) vecs() []prom.Collector {
	return []prom.Collector{m.submitted, m.claimed, m.completed, m.failed, m.retried, m.snoozed, m.continued,
		m.cancelled, m.discarded, m.rescued, m.leaseLost, m.pruned, m.expired, m.workersDied, m.storeErrors,
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
		return "other"
	}
	m.kinds[k] = true
	return k
}

// Observe implements core.Observer.
func (m *Metrics) Observe(e core.Event) {
	var queue, kind string
	if e.Job != nil {
		queue, kind = e.Job.Queue, m.kind(e.Job.Kind)
	}
	switch e.Kind {
	case core.EventJobInserted:
		m.submitted.WithLabelValues(queue, kind).Inc()
	case core.EventJobClaimed:
		m.claimed.WithLabelValues(queue, kind).Inc()
		m.queueWait.WithLabelValues(queue).Observe(e.QueueWait.Seconds())
	case core.EventJobCompleted:
		m.completed.WithLabelValues(queue, kind).Inc()
		m.execution.WithLabelValues(queue, kind).Observe(e.Duration.Seconds())
		if e.Job != nil && !e.Job.CreatedAt.IsZero() {
			m.endToEnd.WithLabelValues(queue).Observe(e.At.Sub(e.Job.CreatedAt).Seconds())
		}
	case core.EventJobRetried:
		m.failed.WithLabelValues(queue, kind).Inc()
		m.retried.WithLabelValues(queue, kind).Inc()
		m.execution.WithLabelValues(queue, kind).Observe(e.Duration.Seconds())
	case core.EventJobDiscarded:
		if e.Reason != core.ReasonWorkerLost {
			m.failed.WithLabelValues(queue, kind).Inc()
			m.execution.WithLabelValues(queue, kind).Observe(e.Duration.Seconds())
		}
		m.discarded.WithLabelValues(queue, kind, e.Reason).Inc()
	case core.EventJobSnoozed:
		m.snoozed.WithLabelValues(queue, kind).Inc()
	case core.EventJobContinued:
		m.continued.WithLabelValues(queue, kind).Inc()
	case core.EventJobCancelled:
		m.cancelled.WithLabelValues(queue, kind).Inc()
	case core.EventLeaseLost:
		m.leaseLost.WithLabelValues(queue, kind).Inc()
	case core.EventJobsRescued:
		m.rescued.WithLabelValues(queue).Add(float64(max(e.Count, 1)))
		if e.State == core.StateDiscarded {
			m.discarded.WithLabelValues(queue, kind, core.ReasonWorkerLost).Inc()
		}
	case core.EventJobsPruned:
		m.pruned.WithLabelValues(string(e.State)).Add(float64(e.Count))
	case core.EventJobsExpired:
		m.expired.WithLabelValues().Add(float64(e.Count))
	case core.EventWorkersPruned:
		m.workersDied.WithLabelValues().Add(float64(e.Count))
	case core.EventStoreError:
		m.storeErrors.WithLabelValues().Inc()
	}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prom.Desc) {
	for _, c := range m.vecs() {
		c.Describe(ch)
	}
	ch <- m.jobsDesc
	ch <- m.pausedDesc
	ch <- m.workersDesc
	ch <- m.scrapeErrDesc
}

// Collect implements prometheus.Collector: the event metrics, then the
// store's state read now (Stats and Workers, bounded by ScrapeTimeout).
func (m *Metrics) Collect(ch chan<- prom.Metric) {
	for _, c := range m.vecs() {
		c.Collect(ch)
	}
	if m.store == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.opts.ScrapeTimeout)
	defer cancel()
	failed := 0.0
	stats, err := m.store.Stats(ctx)
	if err != nil {
		failed = 1
	}
	for _, q := range stats {
		for _, st := range core.AllStates {
			ch <- prom.MustNewConstMetric(m.jobsDesc, prom.GaugeValue, float64(q.Counts[st]), q.Queue, string(st))
		}
		paused := 0.0
		if q.Paused {
			paused = 1
		}
		ch <- prom.MustNewConstMetric(m.pausedDesc, prom.GaugeValue, paused, q.Queue)
	}
	workers, err := m.store.Workers(ctx)
	if err != nil {
		failed = 1
	} else {
		now := m.opts.Now()
		var active, stale, dead float64
		for _, w := range workers {
			switch age := now.Sub(w.HeartbeatAt); {
			case age < m.opts.StaleAfter:
				active++
			case age < m.opts.DeadAfter:
				stale++
			default:
				dead++
			}
		}
		ch <- prom.MustNewConstMetric(m.workersDesc, prom.GaugeValue, active, "active")
		ch <- prom.MustNewConstMetric(m.workersDesc, prom.GaugeValue, stale, "stale")
		ch <- prom.MustNewConstMetric(m.workersDesc, prom.GaugeValue, dead, "dead")
	}
	ch <- prom.MustNewConstMetric(m.scrapeErrDesc, prom.GaugeValue, failed)
}

var (
	_ core.Observer  = (*Metrics)(nil)
	_ prom.Collector = (*Metrics)(nil)
)
