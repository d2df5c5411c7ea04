package prometheus_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	bprom "github.com/backlogq/backlog/adapters/prometheus"
	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/internal/teststores"
	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestQueueCardinalityIsBounded: like kinds, at most MaxQueues queues
// (beyond Options.Queues) get a label of their own; the events of the
// rest count under queue="other".
func TestQueueCardinalityIsBounded(t *testing.T) {
	m := bprom.New(nil, bprom.Options{MaxQueues: 2, Queues: []string{"pinned"}})
	reg := prom.NewRegistry()
	reg.MustRegister(m)
	for _, q := range []string{"a", "b", "c", "d", "a", "pinned"} {
		m.Observe(core.Event{Kind: core.EventJobInserted, Job: &core.Job{Queue: q, Kind: "k"}})
	}
	m.Observe(core.Event{Kind: core.EventJobClaimed, Job: &core.Job{Queue: "e", Kind: "k"}, QueueWait: time.Second})
	want := `
# HELP backlog_jobs_submitted_total Jobs inserted by this node (duplicates of unique keys excluded).
# TYPE backlog_jobs_submitted_total counter
backlog_jobs_submitted_total{kind="k",queue="a"} 2
backlog_jobs_submitted_total{kind="k",queue="b"} 1
backlog_jobs_submitted_total{kind="k",queue="other"} 2
backlog_jobs_submitted_total{kind="k",queue="pinned"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "backlog_jobs_submitted_total"); err != nil {
		t.Fatal(err)
	}
	if n := sample(t, reg, "backlog_job_queue_wait_seconds", "queue", "other"); n != 1 {
		t.Fatalf("queue wait under other: %v observations, want 1", n)
	}
}

// TestQueueGaugesFoldIntoOther: the store gauges of a store holding many
// queues name at most MaxQueues of them; the rest are summed under
// queue="other" (paused when any of them is), and a queue actually named
// "other" joins that series rather than breaking the scrape with a
// duplicate.
func TestQueueGaugesFoldIntoOther(t *testing.T) {
	st := teststores.Memory(t)
	ctx := t.Context()
	now := contract.UTC(time.Now())
	var ps []core.InsertParams
	for i := range 2000 {
		ps = append(ps, core.InsertParams{Queue: fmt.Sprintf("q%04d", i), Kind: "k", Args: []byte(`{}`), Priority: 5, MaxAttempts: 1, RunAt: now})
	}
	ps = append(ps, core.InsertParams{Queue: "other", Kind: "k", Args: []byte(`{}`), Priority: 5, MaxAttempts: 1, RunAt: now})
	if _, err := st.Insert(ctx, now, ps); err != nil {
		t.Fatal(err)
	}
	if err := st.PauseQueue(ctx, "q1999", now); err != nil {
		t.Fatal(err)
	}
	m := bprom.New(st, bprom.Options{MaxAge: -1, Logger: quietLogger()})
	reg := prom.NewRegistry()
	reg.MustRegister(m)
	text := scrape(t, reg) // fails on a duplicate series

	labels := map[string]bool{}
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "backlog_jobs{") {
			q := l[strings.Index(l, `queue="`)+7:]
			labels[q[:strings.IndexByte(q, '"')]] = true
		}
	}
	if len(labels) != bprom.DefaultMaxQueues+1 || !labels["other"] {
		t.Fatalf("backlog_jobs names %d queues (other: %v), want %d and other", len(labels), labels["other"], bprom.DefaultMaxQueues+1)
	}
	if len(text) > 200_000 {
		t.Fatalf("exposition is %d bytes for 2001 queues", len(text))
	}
	// 2001 jobs in all: the labelled queues hold one each, other the rest.
	if n := sample(t, reg, "backlog_jobs", "queue", "other", "state", "available"); n != 2001-bprom.DefaultMaxQueues {
		t.Fatalf("available jobs under other: %v, want %d", n, 2001-bprom.DefaultMaxQueues)
	}
	if n := sample(t, reg, "backlog_queue_paused", "queue", "other"); n != 1 {
		t.Fatalf("other paused = %v, want 1 (q1999 is paused)", n)
	}
	// The labels stay stable from scrape to scrape.
	if again := scrape(t, reg); strings.Count(again, "\nbacklog_jobs{") != strings.Count(text, "\nbacklog_jobs{") {
		t.Fatalf("second scrape has another number of series")
	}
}
