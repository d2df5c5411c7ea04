package prometheus_test

import (
	"testing"
	"time"

	bprom "github.com/backlogq/backlog/adapters/prometheus"
	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/internal/teststores"
	prom "github.com/prometheus/client_golang/prometheus"
)

// TestScrapeExposesEveryFamily scrapes, through promhttp, a Metrics over a
// real store holding jobs in several states and workers of each liveness,
// after one event of each kind, and checks the exposition text names every
// metric family with its type and carries the store gauges' values.
func TestScrapeExposesEveryFamily(t *testing.T) {
	teststores.Run(t, func(t *testing.T, st contract.Store) {
		ctx := t.Context()
		now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
		var params []core.InsertParams
		for _, runAt := range []time.Time{now, now, now, now.Add(time.Hour)} {
			params = append(params, core.InsertParams{Queue: "q", Kind: "k", Args: []byte(`{}`), Priority: 5, MaxAttempts: 3, RunAt: runAt})
		}
		if _, err := st.Insert(ctx, now, params); err != nil {
			t.Fatal(err)
		}
		if got, err := st.Claim(ctx, contract.ClaimParams{Queue: "q", WorkerID: "w-active", Limit: 1, Now: now, LeaseUntil: now.Add(time.Minute)}); err != nil || len(got) != 1 {
			t.Fatalf("claim: %v %v", got, err)
		}
		if err := st.PauseQueue(ctx, "p", now); err != nil {
			t.Fatal(err)
		}
		for id, age := range map[string]time.Duration{"w-active": 0, "w-stale": time.Minute, "w-dead": 5 * time.Minute} {
			hb := now.Add(-age)
			if err := st.RegisterWorker(ctx, core.WorkerInfo{ID: id, Host: "h", Queues: []string{"q"}, StartedAt: hb, HeartbeatAt: hb}); err != nil {
				t.Fatal(err)
			}
		}

		h, ok := st.(contract.QueueHistory)
		if !ok {
			t.Fatalf("%T is no contract.QueueHistory", st)
		}
		if err := h.AddQueueHistory(ctx, []contract.QueueSample{
			{Queue: "q", At: now.Add(-time.Hour), Completed: 40, Failed: 2},
			{Queue: "q", At: now.Add(-5 * time.Second), Completed: 2, Gauge: true, Depth: 2, OldestAge: 1500 * time.Millisecond},
		}); err != nil {
			t.Fatal(err)
		}
		m := bprom.New(st, bprom.Options{Now: func() time.Time { return now }, Running: func() int { return 7 }})
		reg := prom.NewRegistry()
		reg.MustRegister(m)
		for _, e := range oneOfEach(now) {
			m.Observe(e)
		}
		text := scrape(t, reg)
		for name, typ := range families {
			wantLines(t, text, "# TYPE "+name+" "+typ)
		}
		wantLines(t, text,
			`backlog_jobs{queue="q",state="available"} 2`,
			`backlog_jobs{queue="q",state="scheduled"} 1`,
			`backlog_jobs{queue="q",state="running"} 1`,
			`backlog_jobs{queue="q",state="completed"} 0`,
			`backlog_running_jobs{queue="q"} 1`,
			`backlog_running_jobs{queue="p"} 0`,
			`backlog_queue_paused{queue="p"} 1`,
			`backlog_queue_paused{queue="q"} 0`,
			`backlog_workers{liveness="active"} 1`,
			`backlog_workers{liveness="stale"} 1`,
			`backlog_workers{liveness="dead"} 1`,
			`backlog_node_running_jobs 7`,
			`backlog_scrape_error 0`,
			`backlog_jobs_rescued_total{cause="worker_dead",kind="k",queue="q"} 1`,
			`backlog_workers_registered_total 1`,
			`backlog_workers_died_total 1`,
			`backlog_cluster_jobs_completed_total{queue="q"} 42`,
			`backlog_cluster_jobs_failed_total{queue="q"} 2`,
			`backlog_queue_due_jobs{queue="q"} 2`,
			`backlog_queue_oldest_job_age_seconds{queue="q"} 1.5`,
		)
	})
}
