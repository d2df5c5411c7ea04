package prometheus_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	bprom "github.com/backlogq/backlog/adapters/prometheus"
	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/store/memory"
	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestMetricsFromARealRun(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	defer st.Close()
	m := bprom.New(st, bprom.Options{})
	reg := prom.NewRegistry()
	reg.MustRegister(m)

	h := core.NewHandlers()
	h.HandleRaw("ok", func(context.Context, *core.Job) error { return nil })
	h.HandleRaw("bad", func(context.Context, *core.Job) error { return errors.New("nope") })
	done := make(chan struct{}, 10)
	c, err := core.NewClient(st, core.Config{
		Queues:              map[string]core.QueueConfig{"q": {MaxWorkers: 4}},
		Handlers:            h,
		Logger:              slog.New(slog.NewTextHandler(io.Discard, nil)),
		MaintenanceInterval: -1,
		Retention:           &core.Retention{Completed: time.Hour},
		Observers: []core.Observer{m, core.ObserverFunc(func(e core.Event) {
			if e.Kind == core.EventJobCompleted || e.Kind == core.EventJobDiscarded {
				done <- struct{}{}
			}
		})},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Stop(ctx)
	for _, k := range []string{"ok", "ok", "bad"} {
		if _, err := c.EnqueueRaw(ctx, k, nil, &core.Options{Queue: "q", MaxAttempts: 1}); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("jobs did not finish")
		}
	}
	if err := c.PauseQueue(ctx, "q"); err != nil {
		t.Fatal(err)
	}

	want := `
# HELP backlog_jobs_completed_total Jobs completed on this node.
# TYPE backlog_jobs_completed_total counter
backlog_jobs_completed_total{kind="ok",queue="q"} 2
# HELP backlog_jobs_discarded_total Jobs dead-lettered, by reason (exhausted, deadline, permanent, worker_lost).
# TYPE backlog_jobs_discarded_total counter
backlog_jobs_discarded_total{kind="bad",queue="q",reason="exhausted"} 1
# HELP backlog_jobs_submitted_total Jobs inserted by this node (duplicates of unique keys excluded).
# TYPE backlog_jobs_submitted_total counter
backlog_jobs_submitted_total{kind="bad",queue="q"} 1
backlog_jobs_submitted_total{kind="ok",queue="q"} 2
# HELP backlog_queue_paused 1 when the queue is paused.
# TYPE backlog_queue_paused gauge
backlog_queue_paused{queue="q"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"backlog_jobs_completed_total", "backlog_jobs_discarded_total", "backlog_jobs_submitted_total", "backlog_queue_paused"); err != nil {
		t.Fatal(err)
	}
	// The gauges read the store: 2 completed and 1 discarded in queue q, and
	// one active worker (this client).
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, line := range []string{
		`backlog_jobs{queue="q",state="completed"} 2`,
		`backlog_jobs{queue="q",state="discarded"} 1`,
		`backlog_workers{liveness="active"} 1`,
		`backlog_job_execution_seconds_count{kind="ok",queue="q"} 2`,
		`backlog_job_queue_wait_seconds_count{queue="q"} 3`,
		`backlog_scrape_error 0`,
	} {
		if !strings.Contains(string(body), line) {
			t.Errorf("/metrics lacks %q", line)
		}
	}
}

func TestKindCardinalityIsBounded(t *testing.T) {
	m := bprom.New(nil, bprom.Options{MaxKinds: 2})
	reg := prom.NewRegistry()
	reg.MustRegister(m)
	for _, k := range []string{"a", "b", "c", "d"} {
		m.Observe(core.Event{Kind: core.EventJobInserted, Job: &core.Job{Queue: "q", Kind: k}})
	}
	want := `
# HELP backlog_jobs_submitted_total Jobs inserted by this node (duplicates of unique keys excluded).
# TYPE backlog_jobs_submitted_total counter
backlog_jobs_submitted_total{kind="a",queue="q"} 1
backlog_jobs_submitted_total{kind="b",queue="q"} 1
backlog_jobs_submitted_total{kind="other",queue="q"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "backlog_jobs_submitted_total"); err != nil {
		t.Fatal(err)
	}
}
