package prometheus_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	bprom "github.com/backlogq/backlog/adapters/prometheus"
	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/internal/syncbuf"
	"github.com/backlogq/backlog/internal/teststores"
	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestObserverCountsEveryEvent(t *testing.T) {
	m := bprom.New(nil, bprom.Options{})
	reg := prom.NewRegistry()
	reg.MustRegister(m)
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, e := range oneOfEach(now) {
		m.Observe(e)
	}
	// Input the engine never produces but an Emit might: an unknown discard
	// reason, a rescue whose job has no error entry, a job-less event with
	// a queue, an unknown event kind.
	m.Observe(core.Event{Kind: core.EventJobDiscarded, Job: &core.Job{Queue: "q", Kind: "k"}, Reason: "meteor"})
	m.Observe(core.Event{Kind: core.EventJobsRescued, Job: &core.Job{Queue: "q", Kind: "k"}, Count: 2})
	m.Observe(core.Event{Kind: core.EventJobSnoozed, Queue: "bare"})
	m.Observe(core.Event{Kind: "job.teleported", Job: &core.Job{Queue: "q", Kind: "k"}})

	want := `
# HELP backlog_jobs_submitted_total Jobs inserted by this node (duplicates of unique keys excluded).
# TYPE backlog_jobs_submitted_total counter
backlog_jobs_submitted_total{kind="k",queue="q"} 1
# HELP backlog_jobs_claimed_total Jobs claimed by this node and its remote workers.
# TYPE backlog_jobs_claimed_total counter
backlog_jobs_claimed_total{kind="k",queue="q"} 1
# HELP backlog_jobs_completed_total Jobs completed.
# TYPE backlog_jobs_completed_total counter
backlog_jobs_completed_total{kind="k",queue="q"} 1
# HELP backlog_jobs_failed_total Attempts that failed (retried, or discarded as exhausted, deadline or permanent), by cause (handler_error, panic, timeout, deadline, unknown_kind, decrypt_failed, invalid_continue, shutdown, unknown).
# TYPE backlog_jobs_failed_total counter
backlog_jobs_failed_total{cause="deadline",kind="k",queue="q"} 1
backlog_jobs_failed_total{cause="panic",kind="k",queue="q"} 1
backlog_jobs_failed_total{cause="unknown",kind="k",queue="q"} 3
# HELP backlog_jobs_retried_total Failed attempts scheduled for a retry.
# TYPE backlog_jobs_retried_total counter
backlog_jobs_retried_total{kind="k",queue="q"} 1
# HELP backlog_jobs_snoozed_total Jobs snoozed or handed back at a hard stop.
# TYPE backlog_jobs_snoozed_total counter
backlog_jobs_snoozed_total{kind="",queue="bare"} 1
backlog_jobs_snoozed_total{kind="k",queue="q"} 1
# HELP backlog_jobs_continued_total Jobs that moved on to a next step.
# TYPE backlog_jobs_continued_total counter
backlog_jobs_continued_total{kind="k",queue="q"} 1
# HELP backlog_jobs_cancelled_total Jobs cancelled by their handler (or a remote worker's cancel outcome).
# TYPE backlog_jobs_cancelled_total counter
backlog_jobs_cancelled_total{kind="k",queue="q"} 1
# HELP backlog_jobs_discarded_total Jobs dead-lettered, by reason (exhausted, deadline, permanent, worker_lost, other).
# TYPE backlog_jobs_discarded_total counter
backlog_jobs_discarded_total{kind="k",queue="q",reason="deadline"} 1
backlog_jobs_discarded_total{kind="k",queue="q",reason="exhausted"} 1
backlog_jobs_discarded_total{kind="k",queue="q",reason="other"} 1
backlog_jobs_discarded_total{kind="k",queue="q",reason="permanent"} 1
backlog_jobs_discarded_total{kind="k",queue="q",reason="worker_lost"} 1
# HELP backlog_jobs_rescued_total Running jobs handed back by maintenance, by cause (lease_expired, worker_dead, unknown).
# TYPE backlog_jobs_rescued_total counter
backlog_jobs_rescued_total{cause="lease_expired",kind="k",queue="q"} 1
backlog_jobs_rescued_total{cause="unknown",kind="k",queue="q"} 2
backlog_jobs_rescued_total{cause="worker_dead",kind="k",queue="q"} 1
# HELP backlog_jobs_lease_lost_total Outcomes not applied because the job was no longer held (fenced).
# TYPE backlog_jobs_lease_lost_total counter
backlog_jobs_lease_lost_total{kind="k",queue="q"} 1
# HELP backlog_jobs_pruned_total Finished jobs deleted by retention, by state.
# TYPE backlog_jobs_pruned_total counter
backlog_jobs_pruned_total{state="completed"} 3
# HELP backlog_jobs_deadline_discarded_total Pending jobs discarded by maintenance because their deadline passed.
# TYPE backlog_jobs_deadline_discarded_total counter
backlog_jobs_deadline_discarded_total 2
# HELP backlog_workers_registered_total Workers that registered for the first time (engine nodes and remote workers).
# TYPE backlog_workers_registered_total counter
backlog_workers_registered_total 1
# HELP backlog_workers_died_total Workers declared dead by maintenance: jobs handed back and record removed.
# TYPE backlog_workers_died_total counter
backlog_workers_died_total 1
# HELP backlog_store_errors_total Store calls that failed (and were retried).
# TYPE backlog_store_errors_total counter
backlog_store_errors_total 1
# HELP backlog_store_vacuums_total Vacuums of the jobs table run by this node's maintenance (stores that are a contract.Vacuumer: PostgreSQL).
# TYPE backlog_store_vacuums_total counter
backlog_store_vacuums_total 1
# HELP backlog_store_vacuumed_dead_rows_total Dead rows the jobs table held when this node's maintenance vacuumed it.
# TYPE backlog_store_vacuumed_dead_rows_total counter
backlog_store_vacuumed_dead_rows_total 60000
`
	names := []string{}
	for name, typ := range families {
		if typ == "counter" {
			names = append(names, name)
		}
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}

	// Histograms: the claim's queue wait; every attempt that ran (completed,
	// retried, snoozed, continued, cancelled and the three handler
	// discards, but not the worker_lost one) in execution time; the
	// completion's end-to-end time from CreatedAt (one minute). The
	// "meteor" discard ran too, for no measured time.
	if got := sample(t, reg, "backlog_job_queue_wait_seconds", "queue", "q"); got != 1 {
		t.Errorf("queue wait observations: %v, want 1", got)
	}
	if got := histSum(t, reg, "backlog_job_queue_wait_seconds", "queue", "q"); got != 2 {
		t.Errorf("queue wait sum: %v, want 2", got)
	}
	if got := sample(t, reg, "backlog_job_execution_seconds", "queue", "q", "kind", "k"); got != 9 {
		t.Errorf("execution observations: %v, want 9", got)
	}
	if got := histSum(t, reg, "backlog_job_execution_seconds", "queue", "q", "kind", "k"); got != 10 {
		t.Errorf("execution sum: %v, want 10", got)
	}
	if got := sample(t, reg, "backlog_job_end_to_end_seconds", "queue", "q"); got != 1 {
		t.Errorf("end-to-end observations: %v, want 1", got)
	}
	if got := histSum(t, reg, "backlog_job_end_to_end_seconds", "queue", "q"); got != 60 {
		t.Errorf("end-to-end sum: %v, want 60", got)
	}
	// Without a store and a Running function there are no gauges at all.
	for _, name := range []string{"backlog_jobs", "backlog_running_jobs", "backlog_node_running_jobs", "backlog_workers", "backlog_scrape_error"} {
		if n, err := testutil.GatherAndCount(reg, name); err != nil || n != 0 {
			t.Errorf("%s: %d series (%v), want none without a store", name, n, err)
		}
	}
}

func TestLabelFreeCountersStartAtZero(t *testing.T) {
	reg := prom.NewRegistry()
	reg.MustRegister(bprom.New(nil, bprom.Options{}))
	text := scrape(t, reg)
	wantLines(t, text,
		"backlog_jobs_deadline_discarded_total 0",
		"backlog_workers_registered_total 0",
		"backlog_workers_died_total 0",
		"backlog_store_errors_total 0",
		"backlog_store_vacuums_total 0",
	)
}

func TestHistogramBuckets(t *testing.T) {
	def := bprom.DefaultBuckets()
	for i := 1; i < len(def); i++ {
		if def[i] <= def[i-1] {
			t.Fatalf("default buckets not increasing at %d: %v", i, def)
		}
	}
	if def[0] != 0.001 || def[len(def)-1] != 86400 {
		t.Fatalf("default buckets span %v..%v, want 1 ms..1 day", def[0], def[len(def)-1])
	}
	def[0] = 42 // callers get a copy
	if bprom.DefaultBuckets()[0] != 0.001 {
		t.Fatal("DefaultBuckets shares its slice")
	}

	m := bprom.New(nil, bprom.Options{Buckets: []float64{1, 10}})
	reg := prom.NewRegistry()
	reg.MustRegister(m)
	m.Observe(core.Event{Kind: core.EventJobClaimed, Job: &core.Job{Queue: "q", Kind: "k"}, QueueWait: 5 * time.Second})
	m.Observe(core.Event{Kind: core.EventJobClaimed, Job: &core.Job{Queue: "q", Kind: "k"}, QueueWait: -time.Second})
	wantLines(t, scrape(t, reg),
		`backlog_job_queue_wait_seconds_bucket{queue="q",le="1"} 1`,
		`backlog_job_queue_wait_seconds_bucket{queue="q",le="10"} 2`,
		`backlog_job_queue_wait_seconds_bucket{queue="q",le="+Inf"} 2`,
		`backlog_job_queue_wait_seconds_sum{queue="q"} 5`,
	)
}

func TestKindCardinalityIsBounded(t *testing.T) {
	m := bprom.New(nil, bprom.Options{MaxKinds: 2})
	reg := prom.NewRegistry()
	reg.MustRegister(m)
	for _, k := range []string{"a", "b", "c", "d", "a"} {
		m.Observe(core.Event{Kind: core.EventJobInserted, Job: &core.Job{Queue: "q", Kind: k}})
	}
	want := `
# HELP backlog_jobs_submitted_total Jobs inserted by this node (duplicates of unique keys excluded).
# TYPE backlog_jobs_submitted_total counter
backlog_jobs_submitted_total{kind="a",queue="q"} 2
backlog_jobs_submitted_total{kind="b",queue="q"} 1
backlog_jobs_submitted_total{kind="other",queue="q"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "backlog_jobs_submitted_total"); err != nil {
		t.Fatal(err)
	}
}

func TestWorkerLivenessGaugesFollowTheClock(t *testing.T) {
	for _, b := range []teststores.Backend{{Name: "memory", Open: teststores.Memory}, {Name: "sqlite", Open: teststores.SQLite}} {
		t.Run(b.Name, func(t *testing.T) {
			st := b.Open(t)
			ctx := t.Context()
			t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
			clk := &manualClock{now: t0}
			m := bprom.New(st, bprom.Options{StaleAfter: 10 * time.Second, DeadAfter: time.Minute, Now: clk.Now})
			reg := prom.NewRegistry()
			reg.MustRegister(m)
			for i, id := range []string{"w1", "w2", "w3"} {
				// Heartbeats at t0, t0−20 s, t0−40 s.
				hb := t0.Add(-time.Duration(i) * 20 * time.Second)
				if err := st.RegisterWorker(ctx, core.WorkerInfo{ID: id, Host: "h", Queues: []string{"q"}, StartedAt: hb, HeartbeatAt: hb}); err != nil {
					t.Fatal(err)
				}
			}
			for _, step := range []struct {
				at                  time.Duration
				active, stale, dead float64
			}{
				{0, 1, 2, 0},
				{9 * time.Second, 1, 2, 0},
				{10 * time.Second, 0, 3, 0}, // w1 exactly StaleAfter old
				{20 * time.Second, 0, 2, 1}, // w3 exactly DeadAfter old
				{40 * time.Second, 0, 1, 2},
				{time.Hour, 0, 0, 3},
			} {
				clk.Set(t0.Add(step.at))
				got := [3]float64{
					sample(t, reg, "backlog_workers", "liveness", "active"),
					sample(t, reg, "backlog_workers", "liveness", "stale"),
					sample(t, reg, "backlog_workers", "liveness", "dead"),
				}
				if want := [3]float64{step.active, step.stale, step.dead}; got != want {
					t.Errorf("at t0+%s: active, stale, dead = %v, want %v", step.at, got, want)
				}
			}
		})
	}
}

func TestScrapeErrorWhenTheStoreFails(t *testing.T) {
	st := teststores.SQLite(t)
	ctx := t.Context()
	now := contract.UTC(time.Now())
	if _, err := st.Insert(ctx, now, []core.InsertParams{{Queue: "q", Kind: "k", Args: []byte(`{}`), Priority: 5, MaxAttempts: 1, RunAt: now}}); err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	// MaxAge -1: every scrape reads the store (by default a scrape would
	// reuse the first one's answer for 5 s).
	m := bprom.New(st, bprom.Options{MaxAge: -1, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	reg := prom.NewRegistry()
	reg.MustRegister(m)
	wantLines(t, scrape(t, reg), `backlog_jobs{queue="q",state="available"} 1`, "backlog_scrape_error 0")

	// A closed store fails every read: the scrape still succeeds, reports
	// the failure and leaves the store gauges out rather than zero them.
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	text := scrape(t, reg)
	wantLines(t, text, "backlog_scrape_error 1", "backlog_store_errors_total 0")
	for _, family := range []string{"backlog_jobs{", "backlog_running_jobs{", "backlog_workers{"} {
		if strings.Contains(text, family) {
			t.Errorf("scrape of a failed store reports %s…", family)
		}
	}
	if !strings.Contains(logs.String(), "metrics scrape could not read") {
		t.Errorf("no warning logged for the failed scrape; logs:\n%s", logs.String())
	}
}

// TestMetricsFromARealRun drives a real client (and a second node's
// maintenance) over each store and checks what the metrics saw.
func TestMetricsFromARealRun(t *testing.T) {
	teststores.Run(t, func(t *testing.T, st contract.Store) {
		ctx := context.Background()
		var client *core.Client
		m := bprom.New(st, bprom.Options{MaxAge: -1, Running: func() int { return len(client.Running()) }})
		reg := prom.NewRegistry()
		reg.MustRegister(m)

		h := core.NewHandlers()
		h.HandleRaw("ok", func(context.Context, *core.Job) error { return nil })
		h.HandleRaw("bad", func(context.Context, *core.Job) error { return errors.New("nope") })
		h.HandleRaw("flaky", func(context.Context, *core.Job) error { return errors.New("again") },
			core.WithRetry(core.RetryFunc(func(*core.Job, error) time.Duration { return time.Hour })))
		h.HandleRaw("perm", func(context.Context, *core.Job) error { return core.Permanent(errors.New("never")) })
		h.HandleRaw("stop", func(context.Context, *core.Job) error { return core.Cancel(nil) })
		h.HandleRaw("later", func(context.Context, *core.Job) error { return core.Snooze(time.Hour) })
		h.HandleRaw("step", func(context.Context, *core.Job) error { return core.Continue("ok", []byte(`{}`), time.Time{}) })
		var mu sync.Mutex
		outcomes := 0
		var err error
		client, err = core.NewClient(st, core.Config{
			Queues:              map[string]core.QueueConfig{"q": {MaxWorkers: 4}},
			Handlers:            h,
			Logger:              quietLogger(),
			MaintenanceInterval: -1,
			Observers: []core.Observer{m, core.ObserverFunc(func(e core.Event) {
				switch e.Kind {
				case core.EventJobCompleted, core.EventJobDiscarded, core.EventJobRetried,
					core.EventJobCancelled, core.EventJobSnoozed, core.EventJobContinued:
					mu.Lock()
					outcomes++
					mu.Unlock()
				}
			})},
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := client.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer client.Stop(ctx)
		for _, k := range []string{"ok", "ok", "bad", "flaky", "perm", "stop", "later", "step"} {
			opts := &core.Options{Queue: "q", MaxAttempts: 1}
			if k == "flaky" {
				opts.MaxAttempts = 3
			}
			if _, err := client.EnqueueRaw(ctx, k, nil, opts); err != nil {
				t.Fatal(err)
			}
		}
		// Nine outcomes: three completions (two ok, and step's next step),
		// two discards, a retry, a cancel, a snooze and a continue.
		waitFor(t, "nine outcomes", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return outcomes == 9
		})
		if err := client.PauseQueue(ctx, "q"); err != nil {
			t.Fatal(err)
		}

		for _, c := range []struct {
			name string
			kv   []string
			want float64
		}{
			{"backlog_jobs_submitted_total", []string{"queue", "q", "kind", "ok"}, 2},
			{"backlog_jobs_claimed_total", []string{"queue", "q", "kind", "ok"}, 3},
			{"backlog_jobs_completed_total", []string{"queue", "q", "kind", "ok"}, 3},
			{"backlog_jobs_failed_total", []string{"queue", "q", "kind", "bad", "cause", "handler_error"}, 1},
			{"backlog_jobs_failed_total", []string{"queue", "q", "kind", "flaky", "cause", "handler_error"}, 1},
			{"backlog_jobs_retried_total", []string{"queue", "q", "kind", "flaky"}, 1},
			{"backlog_jobs_discarded_total", []string{"queue", "q", "kind", "bad", "reason", "exhausted"}, 1},
			{"backlog_jobs_discarded_total", []string{"queue", "q", "kind", "perm", "reason", "permanent"}, 1},
			{"backlog_jobs_cancelled_total", []string{"queue", "q", "kind", "stop"}, 1},
			{"backlog_jobs_snoozed_total", []string{"queue", "q", "kind", "later"}, 1},
			{"backlog_jobs_continued_total", []string{"queue", "q", "kind", "step"}, 1},
			{"backlog_workers_registered_total", nil, 1},
			{"backlog_job_queue_wait_seconds", []string{"queue", "q"}, 9},
			{"backlog_job_execution_seconds", []string{"queue", "q", "kind", "ok"}, 3},
			{"backlog_job_end_to_end_seconds", []string{"queue", "q"}, 3},
			// Gauges from the store.
			{"backlog_jobs", []string{"queue", "q", "state", "completed"}, 3},
			{"backlog_jobs", []string{"queue", "q", "state", "discarded"}, 2},
			{"backlog_jobs", []string{"queue", "q", "state", "retryable"}, 1},
			{"backlog_jobs", []string{"queue", "q", "state", "cancelled"}, 1},
			{"backlog_jobs", []string{"queue", "q", "state", "scheduled"}, 1},
			{"backlog_jobs", []string{"queue", "q", "state", "running"}, 0},
			{"backlog_running_jobs", []string{"queue", "q"}, 0},
			{"backlog_node_running_jobs", nil, 0},
			{"backlog_queue_paused", []string{"queue", "q"}, 1},
			{"backlog_workers", []string{"liveness", "active"}, 1},
			{"backlog_scrape_error", nil, 0},
		} {
			if got := sample(t, reg, c.name, c.kv...); got != c.want {
				t.Errorf("%s%v = %v, want %v", c.name, c.kv, got, c.want)
			}
		}
		if err := client.Stop(ctx); err != nil {
			t.Fatal(err)
		}

		// Another node's maintenance, two hours later, finds: a job whose
		// holder vanished without a registry record (its lease expired; no
		// attempts left, so it is discarded), a job held by a registered
		// worker that stopped beating (handed back at once), a pending job
		// past its deadline, and completed jobs past an hour's retention.
		now := contract.UTC(time.Now())
		insert := func(queue string, maxAttempts int, deadline time.Time) {
			t.Helper()
			if _, err := st.Insert(ctx, now, []core.InsertParams{{Queue: queue, Kind: "m", Args: []byte(`{}`), Priority: 5, MaxAttempts: maxAttempts, RunAt: now, Deadline: deadline}}); err != nil {
				t.Fatal(err)
			}
		}
		insert("m", 1, time.Time{})
		if got, err := st.Claim(ctx, contract.ClaimParams{Queue: "m", WorkerID: "gone", Limit: 1, Now: now, LeaseUntil: now.Add(30 * time.Second)}); err != nil || len(got) != 1 {
			t.Fatalf("claim for gone: %v %v", got, err)
		}
		if err := st.RegisterWorker(ctx, core.WorkerInfo{ID: "ghost", Host: "h", Queues: []string{"m"}, StartedAt: now, HeartbeatAt: now}); err != nil {
			t.Fatal(err)
		}
		insert("m", 3, time.Time{})
		if got, err := st.Claim(ctx, contract.ClaimParams{Queue: "m", WorkerID: "ghost", Limit: 1, Now: now, LeaseUntil: now.Add(24 * time.Hour)}); err != nil || len(got) != 1 {
			t.Fatalf("claim for ghost: %v %v", got, err)
		}
		insert("idle", 1, now.Add(time.Hour))
		later := &manualClock{now: now.Add(2 * time.Hour)}
		other, err := core.NewClient(st, core.Config{
			Clock: later, Logger: quietLogger(), MaintenanceInterval: -1, Observers: []core.Observer{m},
			Retention: &core.Retention{Completed: time.Hour, Cancelled: -1, Discarded: -1},
		})
		if err != nil {
			t.Fatal(err)
		}
		other.Maintain(ctx)
		for _, c := range []struct {
			name string
			kv   []string
			want float64
		}{
			{"backlog_jobs_rescued_total", []string{"queue", "m", "kind", "m", "cause", "lease_expired"}, 1},
			{"backlog_jobs_rescued_total", []string{"queue", "m", "kind", "m", "cause", "worker_dead"}, 1},
			{"backlog_jobs_discarded_total", []string{"queue", "m", "kind", "m", "reason", "worker_lost"}, 1},
			{"backlog_jobs_deadline_discarded_total", nil, 1},
			{"backlog_jobs_pruned_total", []string{"state", "completed"}, 3},
			{"backlog_workers_died_total", nil, 1},
			{"backlog_jobs", []string{"queue", "m", "state", "retryable"}, 1},
			{"backlog_jobs", []string{"queue", "m", "state", "discarded"}, 1},
			{"backlog_jobs", []string{"queue", "idle", "state", "discarded"}, 1},
			{"backlog_jobs", []string{"queue", "q", "state", "completed"}, 0},
			{"backlog_workers", []string{"liveness", "active"}, 0},
			{"backlog_workers", []string{"liveness", "dead"}, 0},
		} {
			if got := sample(t, reg, c.name, c.kv...); got != c.want {
				t.Errorf("after maintenance: %s%v = %v, want %v", c.name, c.kv, got, c.want)
			}
		}
	})
}
