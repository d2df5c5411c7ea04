package prometheus_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/backlogq/backlog/core/contract"

	prom "github.com/prometheus/client_golang/prometheus"

	bprom "github.com/backlogq/backlog/adapters/prometheus"
	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/internal/teststores"
)

// A queue whose rate is used up shows how long its next start waits.
func TestRateWaitGauges(t *testing.T) {
	for _, b := range []teststores.Backend{{Name: "memory", Open: teststores.Memory}, {Name: "sqlite", Open: teststores.SQLite}} {
		t.Run(b.Name, func(t *testing.T) {
			st := b.Open(t)
			ctx := t.Context()
			t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
			clk := &manualClock{now: t0}
			if err := st.(contract.QueueLimiter).SetQueueLimits(ctx, "q", core.QueueLimits{Rate: core.RateLimit{Starts: 2, Per: time.Hour}}, t0); err != nil {
				t.Fatal(err)
			}
			var ps []core.InsertParams
			for range 3 {
				ps = append(ps, core.InsertParams{Queue: "q", Kind: "k", Args: json.RawMessage(`{}`), Priority: 5, MaxAttempts: 3, RunAt: t0})
			}
			if _, err := st.Insert(ctx, t0, ps); err != nil {
				t.Fatal(err)
			}
			got, err := st.Claim(ctx, contract.ClaimParams{Queue: "q", WorkerID: "w", Limit: 10, Now: t0, LeaseUntil: t0.Add(time.Minute)})
			if err != nil || len(got) != 2 {
				t.Fatalf("claimed %d, %v; want the burst of 2", len(got), err)
			}
			m := bprom.New(st, bprom.Options{Now: clk.Now, MaxAge: -1})
			reg := prom.NewRegistry()
			reg.MustRegister(m)
			if w := sample(t, reg, "backlog_queue_rate_wait_seconds", "scope", "queue"); w != 1800 {
				t.Fatalf("rate wait = %v s; want 1800 (one start per 30 min)", w)
			}
			if n := sample(t, reg, "backlog_queue_rate_limited_groups", "scope", "queue"); n != 1 {
				t.Fatalf("rate-limited groups = %v; want 1", n)
			}
			clk.Set(t0.Add(time.Hour))
			if w := sample(t, reg, "backlog_queue_rate_wait_seconds", "scope", "queue"); w != 0 {
				t.Fatalf("rate wait an hour later = %v s; want 0", w)
			}
		})
	}
}
