package prometheus_test

import (
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
)

// families lists every metric family a Metrics exposes once it has seen
// one event of each kind and has a store and a Running function, with its
// type as the exposition's TYPE line names it.
var families = map[string]string{
	"backlog_jobs_submitted_total":          "counter",
	"backlog_jobs_claimed_total":            "counter",
	"backlog_jobs_completed_total":          "counter",
	"backlog_jobs_failed_total":             "counter",
	"backlog_jobs_retried_total":            "counter",
	"backlog_jobs_snoozed_total":            "counter",
	"backlog_jobs_continued_total":          "counter",
	"backlog_jobs_cancelled_total":          "counter",
	"backlog_jobs_discarded_total":          "counter",
	"backlog_jobs_rescued_total":            "counter",
	"backlog_jobs_lease_lost_total":         "counter",
	"backlog_jobs_pruned_total":             "counter",
	"backlog_jobs_deadline_discarded_total": "counter",
	"backlog_workers_registered_total":      "counter",
	"backlog_workers_died_total":            "counter",
	"backlog_store_errors_total":            "counter",
	"backlog_job_queue_wait_seconds":        "histogram",
	"backlog_job_execution_seconds":         "histogram",
	"backlog_job_end_to_end_seconds":        "histogram",
	"backlog_jobs":                          "gauge",
	"backlog_running_jobs":                  "gauge",
	"backlog_node_running_jobs":             "gauge",
	"backlog_queue_paused":                  "gauge",
	"backlog_workers":                       "gauge",
	"backlog_scrape_error":                  "gauge",
	"backlog_cluster_jobs_completed_total":  "counter",
	"backlog_cluster_jobs_failed_total":     "counter",
	"backlog_queue_due_jobs":                "gauge",
	"backlog_queue_oldest_job_age_seconds":  "gauge",
}

// oneOfEach returns one event of every kind the engine emits, all in queue
// "q" with kind "k", finished at now.
func oneOfEach(now time.Time) []core.Event {
	job := func(errs ...string) *core.Job {
		j := &core.Job{ID: 1, Queue: "q", Kind: "k", CreatedAt: now.Add(-time.Minute)}
		for i, e := range errs {
			j.Errors = append(j.Errors, core.AttemptError{Attempt: i + 1, At: now, Error: e})
		}
		return j
	}
	ts := now.Format(time.RFC3339Nano)
	// rescued is a job whose last error entry says why it was rescued.
	rescued := func(cause string, errs ...string) *core.Job {
		j := job(errs...)
		j.Errors[len(j.Errors)-1].Cause = cause
		return j
	}
	return []core.Event{
		{Kind: core.EventJobInserted, At: now, Queue: "q", Job: job()},
		{Kind: core.EventJobClaimed, At: now, Queue: "q", Job: job(), QueueWait: 2 * time.Second},
		{Kind: core.EventJobCompleted, At: now, Queue: "q", Job: job(), Duration: 3 * time.Second},
		{Kind: core.EventJobRetried, At: now, Queue: "q", Job: job(), Duration: time.Second, Err: errors.New("again"), Cause: core.CausePanic},
		{Kind: core.EventJobSnoozed, At: now, Queue: "q", Job: job(), Duration: time.Second},
		{Kind: core.EventJobContinued, At: now, Queue: "q", Job: job(), Duration: time.Second},
		{Kind: core.EventJobCancelled, At: now, Queue: "q", Job: job(), Duration: time.Second},
		{Kind: core.EventJobDiscarded, At: now, Queue: "q", Job: job(), Duration: time.Second, Reason: core.ReasonExhausted},
		{Kind: core.EventJobDiscarded, At: now, Queue: "q", Job: job(), Duration: time.Second, Reason: core.ReasonDeadline, Cause: core.CauseDeadline},
		{Kind: core.EventJobDiscarded, At: now, Queue: "q", Job: job(), Duration: time.Second, Reason: core.ReasonPermanent},
		{Kind: core.EventLeaseLost, At: now, Queue: "q", Job: job()},
		{Kind: core.EventJobsRescued, At: now, Queue: "q", Job: rescued(core.CauseLeaseExpired, "worker w1 lost: lease expired at "+ts), Count: 1, State: core.StateRetryable},
		{Kind: core.EventJobsRescued, At: now, Queue: "q", Job: rescued(core.CauseWorkerDead, "boom", "worker w2 lost: no heartbeat since "+ts), Count: 1, State: core.StateDiscarded, Reason: core.ReasonWorkerLost},
		{Kind: core.EventJobsPruned, At: now, Count: 3, State: core.StateCompleted},
		{Kind: core.EventJobsExpired, At: now, Count: 2, State: core.StateDiscarded, Reason: core.ReasonDeadline},
		{Kind: core.EventWorkersPruned, At: now, Count: 1},
		{Kind: core.EventWorkerRegistered, At: now, Reason: "w1"},
		{Kind: core.EventStoreError, At: now, Err: errors.New("database down")},
		{Kind: core.EventStoreVacuumed, At: now, Count: 60000},
	}
}

// scrape fetches reg's exposition text through promhttp on a test server.
func scrape(t *testing.T, reg *prom.Registry) string {
	t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("scrape: %s\n%s", resp.Status, body)
	}
	return string(body)
}

// wantLines fails t for every line missing from the exposition text.
func wantLines(t *testing.T, text string, lines ...string) {
	t.Helper()
	have := map[string]bool{}
	for _, l := range strings.Split(text, "\n") {
		have[l] = true
	}
	for _, l := range lines {
		if !have[l] {
			t.Errorf("exposition lacks %q", l)
		}
	}
}

// series returns the series of family name whose labels include every
// pair of kv (name, value, name, value, …), failing t when there is none.
func series(t *testing.T, reg prom.Gatherer, name string, kv ...string) *dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, s := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range s.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(kv); i += 2 {
				if labels[kv[i]] != kv[i+1] {
					continue next
				}
			}
			return s
		}
	}
	t.Fatalf("no series %s%v", name, kv)
	return nil
}

// sample returns the value of one series (see series): a counter's or
// gauge's value, or a histogram's sample count.
func sample(t *testing.T, reg prom.Gatherer, name string, kv ...string) float64 {
	t.Helper()
	s := series(t, reg, name, kv...)
	switch {
	case s.Counter != nil:
		return s.GetCounter().GetValue()
	case s.Gauge != nil:
		return s.GetGauge().GetValue()
	case s.Histogram != nil:
		return float64(s.GetHistogram().GetSampleCount())
	}
	t.Fatalf("series %s%v is neither counter, gauge nor histogram", name, kv)
	return 0
}

// histSum returns the sum of the observations of one histogram series.
func histSum(t *testing.T, reg prom.Gatherer, name string, kv ...string) float64 {
	t.Helper()
	return series(t, reg, name, kv...).GetHistogram().GetSampleSum()
}

// manualClock is a clock tests move by hand.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// waitFor polls cond every few milliseconds for up to 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
