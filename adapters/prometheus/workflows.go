package prometheus

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	prom "github.com/prometheus/client_golang/prometheus"
)

// Bounds of the read behind the workflow gauges.
const (
	// WaitingPage is how many waiting jobs one store read of the workflow
	// gauges returns.
	WaitingPage = 1000
	// MaxWaitingRead is the most waiting jobs one collection of the
	// workflow gauges reads, oldest first (by id). Beyond it the open
	// counts are lower bounds (workflows whose waiting jobs are all newer
	// are not counted) and backlog_workflow_waiting_read_capped is 1; the
	// oldest waiting age stays exact, since the oldest jobs are read
	// first.
	MaxWaitingRead = 10_000
	// MaxFirstJobReads is the most first jobs of workflows one collection
	// reads (Store.Get) to tell a batch's callback from a workflow's step
	// of the same name; the ones beyond it count as batches until a later
	// collection reads them. Each workflow's first job is read once.
	MaxFirstJobReads = 100
)

// Workflow types, the values of the type label of the workflow gauges.
const (
	flowWorkflow = "workflow"
	flowBatch    = "batch"
)

var flowTypes = []string{flowWorkflow, flowBatch}

// flowStats is what one read of the waiting jobs says.
type flowStats struct {
	open   map[string]int           // distinct workflows with a waiting job, by type
	oldest map[string]time.Duration // age of the oldest waiting job, by type
	capped bool                     // MaxWaitingRead was reached
}

// flowCache reads the waiting jobs of the store (contract.Dependencies)
// at most once per MaxAge, MaxWaitingRead at most, and remembers the type
// of the workflows it saw (a workflow's type never changes).
type flowCache struct {
	st contract.Store

	mu    sync.Mutex
	at    time.Time
	have  bool
	stats flowStats
	types map[int64]string // workflow id → type, of the workflows of the latest read
}

// flowType tells a workflow from a batch by a waiting job of it: a job
// without a step is one of a batch's jobs, a step other than a batch
// callback's names a workflow's step. A job named as a callback
// (on_finish, on_success) may also be a workflow's step of that name: the
// workflow's first job says (a batch's has no step), read once and
// remembered (at most *reads more in this collection; beyond that, or when
// it is gone, the job counts as a batch's callback).
func (c *flowCache) flowType(ctx context.Context, j *core.Job, prev, next map[int64]string, reads *int) (string, error) {
	id := j.WorkflowID
	if t, ok := next[id]; ok {
		return t, nil
	}
	t, ok := prev[id]
	if !ok {
		switch j.Step {
		case "":
			t = flowBatch
		case core.BatchOnFinishStep, core.BatchOnSuccessStep:
			if j.ID == id {
				t = flowWorkflow // the first job of a batch has no step
				break
			}
			if *reads <= 0 {
				return flowBatch, nil // not remembered: a later collection reads it
			}
			*reads--
			t = flowBatch
			first, err := c.st.Get(ctx, id)
			switch {
			case errors.Is(err, core.ErrNotFound):
			case err != nil:
				return "", err
			case first.Step != "":
				t = flowWorkflow
			}
		default:
			t = flowWorkflow
		}
	}
	next[id] = t
	return t, nil
}

// read returns the workflow gauges from a read at most maxAge old.
func (c *flowCache) read(ctx context.Context, now time.Time, maxAge time.Duration) (flowStats, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.have && maxAge > 0 && now.Sub(c.at) < maxAge && !now.Before(c.at) {
		return c.stats, nil
	}
	out := flowStats{open: map[string]int{}, oldest: map[string]time.Duration{}}
	next := map[int64]string{}
	p := contract.ListParams{States: []core.State{core.StateWaiting}, Limit: WaitingPage}
	read, reads := 0, MaxFirstJobReads
	counted := map[int64]bool{}
	for read < MaxWaitingRead {
		p.Limit = min(WaitingPage, MaxWaitingRead-read)
		jobs, err := c.st.List(ctx, p)
		if err != nil {
			return flowStats{}, err
		}
		for _, j := range jobs {
			if j.WorkflowID == 0 {
				continue // waits for jobs of other calls, in no workflow
			}
			t, err := c.flowType(ctx, j, c.types, next, &reads)
			if err != nil {
				return flowStats{}, err
			}
			if !counted[j.WorkflowID] {
				counted[j.WorkflowID] = true
				out.open[t]++
			}
			if age := now.Sub(j.CreatedAt); age > out.oldest[t] {
				out.oldest[t] = age
			}
		}
		read += len(jobs)
		if len(jobs) < p.Limit {
			break
		}
		p.AfterID = jobs[len(jobs)-1].ID
		if read >= MaxWaitingRead {
			out.capped = true
		}
	}
	c.have, c.at, c.stats, c.types = true, now, out, next
	return out, nil
}

// collectWorkflows reports the open workflows and batches (those with a
// waiting job) and the age of their oldest waiting job; it reports false
// when the store could not be read (the gauges are then left out).
func (m *Metrics) collectWorkflows(ctx context.Context, ch chan<- prom.Metric) bool {
	s, err := m.flows.read(ctx, m.opts.Now(), m.opts.MaxAge)
	if err != nil {
		m.log.Warn("backlog: metrics scrape could not read the waiting jobs", "err", err)
		return false
	}
	for _, t := range flowTypes {
		ch <- prom.MustNewConstMetric(m.flowsOpenDesc, prom.GaugeValue, float64(s.open[t]), t)
		ch <- prom.MustNewConstMetric(m.flowsOldestDesc, prom.GaugeValue, max(s.oldest[t], 0).Seconds(), t)
	}
	capped := 0.0
	if s.capped {
		capped = 1
	}
	ch <- prom.MustNewConstMetric(m.flowsCappedDesc, prom.GaugeValue, capped)
	return true
}
