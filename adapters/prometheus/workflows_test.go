package prometheus_test

import (
	"context"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	bprom "github.com/backlogq/backlog/adapters/prometheus"
	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/internal/teststores"
	prom "github.com/prometheus/client_golang/prometheus"
)

// workflowFamilies are exported only over a store with job dependencies.
var workflowFamilies = []string{
	"backlog_workflows_open",
	"backlog_workflow_oldest_waiting_seconds",
	"backlog_workflow_waiting_read_capped",
}

// insertFlow inserts one workflow (steps named, each after the one before)
// or one batch (jobs without a step, then an on_finish callback that waits
// for them all) at t, and returns its jobs' ids.
func insertFlow(t *testing.T, st contract.Store, at time.Time, batch bool, n int) []int64 {
	t.Helper()
	var ps []contract.InsertParams
	for i := range n {
		p := contract.InsertParams{Queue: "q", Kind: "k", Args: []byte(`{}`), Priority: 5, MaxAttempts: 1, RunAt: at}
		if batch {
			p.InWorkflow = true
		} else {
			p.Step = "s" + string(rune('a'+i))
			if i > 0 {
				p.DependsOnIndex = []int{i - 1}
			}
		}
		ps = append(ps, p)
	}
	if batch {
		cb := contract.InsertParams{Queue: "q", Kind: "done", Args: []byte(`{}`), Priority: 5, MaxAttempts: 1, RunAt: at,
			Step: core.BatchOnFinishStep, OnDependencyFailure: contract.DependencyRun}
		for i := range n {
			cb.DependsOnIndex = append(cb.DependsOnIndex, i)
		}
		ps = append(ps, cb)
	}
	res, err := st.Insert(context.Background(), at, ps)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, len(res))
	for i, r := range res {
		ids[i] = r.Job.ID
	}
	return ids
}

// TestWorkflowGauges: the open workflows and batches are those with a
// waiting job, by type, and the oldest waiting job's age is read from the
// store's waiting jobs; a workflow step named like a batch callback counts
// as a workflow's.
func TestWorkflowGauges(t *testing.T) {
	st := teststores.Memory(t)
	t0 := time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC)
	clk := &manualClock{now: t0.Add(time.Hour)}
	m := bprom.New(st, bprom.Options{Now: clk.Now, MaxAge: -1})
	reg := prom.NewRegistry()
	reg.MustRegister(m)

	wf := insertFlow(t, st, t0, false, 3)               // sa available, sb and sc waiting
	insertFlow(t, st, t0.Add(10*time.Minute), true, 2)  // its on_finish waits
	insertFlow(t, st, t0.Add(20*time.Minute), false, 1) // one step, nothing waits
	odd := []contract.InsertParams{                     // a workflow with a step named on_finish
		{Queue: "q", Kind: "k", Args: []byte(`{}`), Priority: 5, MaxAttempts: 1, RunAt: t0, Step: "first"},
		{Queue: "q", Kind: "k", Args: []byte(`{}`), Priority: 5, MaxAttempts: 1, RunAt: t0, Step: core.BatchOnFinishStep, DependsOnIndex: []int{0}},
	}
	if _, err := st.Insert(t.Context(), t0.Add(30*time.Minute), odd); err != nil {
		t.Fatal(err)
	}

	check := func(what string, wfOpen, batchOpen, wfAge, batchAge float64) {
		t.Helper()
		got := []float64{
			sample(t, reg, "backlog_workflows_open", "type", "workflow"),
			sample(t, reg, "backlog_workflows_open", "type", "batch"),
			sample(t, reg, "backlog_workflow_oldest_waiting_seconds", "type", "workflow"),
			sample(t, reg, "backlog_workflow_oldest_waiting_seconds", "type", "batch"),
		}
		want := []float64{wfOpen, batchOpen, wfAge, batchAge}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s: open workflows, open batches, oldest workflow wait, oldest batch wait = %v, want %v", what, got, want)
				break
			}
		}
		if c := sample(t, reg, "backlog_workflow_waiting_read_capped"); c != 0 {
			t.Errorf("%s: read capped = %v, want 0", what, c)
		}
	}
	check("at first", 2, 1, 3600, 3000)

	// Cancelling the first workflow's first step cancels the steps after
	// it: nothing of it waits any more.
	if _, err := st.Cancel(t.Context(), wf[0], t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	check("after the cancel", 1, 1, 1800, 3000)
}

// TestWorkflowGaugesOnlyWithDependencies: a store without job
// dependencies exports none of the workflow gauges.
func TestWorkflowGaugesOnlyWithDependencies(t *testing.T) {
	st := teststores.SQLite(t)
	if _, ok := st.(contract.Dependencies); ok {
		t.Skip("the SQLite store has job dependencies")
	}
	reg := prom.NewRegistry()
	reg.MustRegister(bprom.New(st, bprom.Options{}))
	text := scrape(t, reg)
	for _, name := range workflowFamilies {
		if strings.Contains(text, name) {
			t.Errorf("a store without dependencies exports %s", name)
		}
	}
}

// listCountingStore counts the List calls of a store with dependencies.
type listCountingStore struct {
	contract.Store
	contract.Dependencies
	lists, gets atomic.Int64
}

func (s *listCountingStore) List(ctx context.Context, p contract.ListParams) ([]*contract.Job, error) {
	s.lists.Add(1)
	return s.Store.List(ctx, p)
}

func (s *listCountingStore) Get(ctx context.Context, id int64) (*contract.Job, error) {
	s.gets.Add(1)
	return s.Store.Get(ctx, id)
}

// TestWorkflowGaugesFirstJobReadsAreBounded: telling a workflow's step
// named on_finish from a batch's callback reads the workflow's first job,
// at most MaxFirstJobReads per collection and once per workflow; the
// others count as batches until a later collection reads them.
func TestWorkflowGaugesFirstJobReadsAreBounded(t *testing.T) {
	mem := teststores.Memory(t)
	st := &listCountingStore{Store: mem, Dependencies: mem.(contract.Dependencies)}
	t0 := time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC)
	clk := &manualClock{now: t0.Add(time.Hour)}
	m := bprom.New(st, bprom.Options{Now: clk.Now, MaxAge: time.Minute})
	reg := prom.NewRegistry()
	reg.MustRegister(m)
	n := bprom.MaxFirstJobReads + 20
	for range n {
		if _, err := st.Insert(t.Context(), t0, []contract.InsertParams{
			{Queue: "q", Kind: "k", Args: []byte(`{}`), Priority: 5, MaxAttempts: 1, RunAt: t0, Step: "first"},
			{Queue: "q", Kind: "k", Args: []byte(`{}`), Priority: 5, MaxAttempts: 1, RunAt: t0, Step: core.BatchOnSuccessStep, DependsOnIndex: []int{0}},
		}); err != nil {
			t.Fatal(err)
		}
	}
	open := func() [2]float64 {
		return [2]float64{sample(t, reg, "backlog_workflows_open", "type", "workflow"), sample(t, reg, "backlog_workflows_open", "type", "batch")}
	}
	if got, want := open(), [2]float64{float64(bprom.MaxFirstJobReads), 20}; got != want {
		t.Errorf("first collection: open workflows, batches = %v, want %v", got, want)
	}
	if g := st.gets.Load(); g != int64(bprom.MaxFirstJobReads) {
		t.Errorf("first collection read %d first jobs, want %d", g, bprom.MaxFirstJobReads)
	}
	clk.Set(t0.Add(2 * time.Hour))
	if got, want := open(), [2]float64{float64(n), 0}; got != want {
		t.Errorf("second collection: open workflows, batches = %v, want %v", got, want)
	}
	if g := st.gets.Load(); g != int64(n) {
		t.Errorf("two collections read %d first jobs, want %d (each once)", g, n)
	}
}

// TestWorkflowGaugesReadIsBounded: one collection reads the waiting jobs
// a page of WaitingPage at a time and stops at MaxWaitingRead, saying so;
// the oldest age is still exact (the oldest are read first), and scrapes
// within MaxAge share one read.
func TestWorkflowGaugesReadIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("inserts over 10,000 jobs")
	}
	mem := teststores.Memory(t)
	st := &listCountingStore{Store: mem, Dependencies: mem.(contract.Dependencies)}
	t0 := time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC)
	clk := &manualClock{now: t0.Add(time.Hour)}
	m := bprom.New(st, bprom.Options{Now: clk.Now, MaxAge: time.Minute})
	reg := prom.NewRegistry()
	reg.MustRegister(m)
	// 105 workflows of 101 steps: 100 waiting each, 10,500 in all.
	for i := range 105 {
		insertFlow(t, st, t0.Add(time.Duration(i)*time.Second), false, 101)
	}
	before := st.lists.Load()
	if got := sample(t, reg, "backlog_workflows_open", "type", "workflow"); got != 100 {
		t.Errorf("open workflows = %v, want 100 (the first 10,000 waiting jobs)", got)
	}
	if got := sample(t, reg, "backlog_workflow_waiting_read_capped"); got != 1 {
		t.Errorf("read capped = %v, want 1", got)
	}
	if got := sample(t, reg, "backlog_workflow_oldest_waiting_seconds", "type", "workflow"); got != 3600 {
		t.Errorf("oldest waiting = %v, want 3600", got)
	}
	// Three scrapes, one read; each read is at most 10 store calls for
	// the waiting jobs besides the stats' own.
	if n := st.lists.Load() - before; n != bprom.MaxWaitingRead/bprom.WaitingPage {
		t.Errorf("store List calls for three scrapes = %d, want %d", n, bprom.MaxWaitingRead/bprom.WaitingPage)
	}
}

// TestMetricsDocDescribesWorkflowGauges: docs/metrics.md names the
// workflow gauges.
func TestMetricsDocDescribesWorkflowGauges(t *testing.T) {
	b, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range workflowFamilies {
		if !strings.Contains(string(b), "`"+name+"`") {
			t.Errorf("docs/metrics.md does not describe %s", name)
		}
	}
}
