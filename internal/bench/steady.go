package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
)

// SteadyConfig describes a steady-state run: producers and workers run
// together for Duration.
type SteadyConfig struct {
	Duration  time.Duration // measured time; 0 = 10 s
	Producers int           // goroutines enqueueing; 0 = 2
	Batch     int           // jobs per EnqueueMany; 0 = 100
	Workers   int           // MaxWorkers; 0 = 100
	Queue     string        // "" = "steady"
	// MaxBacklog is the backlog cap: producers pause while more than this
	// many jobs are enqueued but not completed, so when they can insert
	// faster than the workers complete, the run measures the workers'
	// throughput with a bounded backlog rather than insert speed; 0 =
	// 20,000.
	MaxBacklog int
	// Rate paces the producers at this many inserted jobs per second in
	// all (batches of Batch, spread evenly; a producer that falls behind
	// catches up at once), so the run measures latency at a chosen load
	// below the workers' capacity; 0 = as fast as they can.
	Rate int
	Tune func(*core.Config)
	// Server says where the database server runs (ServerOf the store
	// URL), for the result's split of CPU between this process and the
	// server; with the zero Server the server's CPU is omitted.
	Server Server
}

// Bottleneck values of SteadyResult.
const (
	// The producers paused at the backlog cap: the run measured the
	// workers.
	BottleneckWorkers = "workers"
	// The workers kept up with the inserts (completions ≈ inserts, pending
	// near zero): the run measured the producers, and the workers could
	// do more.
	BottleneckProducers = "producers"
	// Neither: the backlog grew but never reached the cap (run longer or
	// lower the cap).
	BottleneckUnclear = "unclear"
)

// SteadyResult is one steady-state run's measurements.
type SteadyResult struct {
	Duration     time.Duration `json:"duration_ns"`
	Producers    int           `json:"producers"`
	Batch        int           `json:"batch"`
	Workers      int           `json:"workers"`
	BacklogCap   int           `json:"backlog_cap"`
	Rate         int           `json:"rate"` // target inserts/s; 0 = unpaced
	Inserted     int64         `json:"inserted"`
	Completed    int64         `json:"completed"`
	InsertPerS   float64       `json:"insert_per_sec"`
	CompletePerS float64       `json:"jobs_per_sec"`
	// Pending is inserted − completed: its mean over the run (sampled
	// every 10 ms) and its value at the end.
	PendingMean float64 `json:"pending_mean"`
	PendingEnd  int64   `json:"pending_end"`
	// CapWaitPct is the share of the producers' time spent paused at the
	// backlog cap.
	CapWaitPct float64 `json:"cap_wait_pct"`
	Bottleneck string  `json:"bottleneck"` // BottleneckWorkers, …Producers or …Unclear
	// Latency is insert commit (the producer's EnqueueMany returning) →
	// handler start, for every job that started during the run; Early of
	// them started before their producer saw the commit and count as 0.
	Latency LatencyResult `json:"latency"`
	Early   int           `json:"latency_early"`
	// Leftover jobs were in the queue, not finished, when the run began
	// (an earlier run's): they are worked and counted as completed too,
	// so the figures are off unless it is 0.
	Leftover int `json:"leftover"`
	// CPU is the machine's CPU use during the run (nil off Linux): with
	// CPU near 100 % busy, inserting and working share the cores, and the
	// cost per job (inserted and completed) says where they went.
	CPU *CPU `json:"machine_cpu,omitempty"`
	// ProcCPU splits the run's CPU between this process and the database
	// server, per 1,000 jobs completed (nil off Linux).
	*ProcCPU
}

func (r SteadyResult) String() string {
	verdict := map[string]string{
		BottleneckWorkers:   "the producers waited at the cap: the workers were the bottleneck",
		BottleneckProducers: "the workers kept up: the producers were the bottleneck (raise --producers or --batch)",
		BottleneckUnclear:   "the backlog grew without reaching the cap (run longer or lower --backlog-cap)",
	}[r.Bottleneck]
	if r.Rate > 0 && r.Bottleneck == BottleneckProducers {
		verdict = "the workers kept up with the paced rate"
	}
	warn := ""
	if r.Leftover > 0 {
		warn = fmt.Sprintf(" (WARNING: the queue held %d unfinished jobs of an earlier run, worked and counted during this one: use a fresh database)", r.Leftover)
	}
	l := r.Latency
	rd := func(d time.Duration) time.Duration { return d.Round(10 * time.Microsecond) }
	paced := ""
	if r.Rate > 0 {
		paced = fmt.Sprintf(" paced at %d/s", r.Rate)
	}
	return fmt.Sprintf("steady %s, %d producers × %d%s, %d workers, backlog cap %d: inserted %d (%.0f/s), completed %d (%.0f jobs/s); "+
		"pending mean %.0f, end %d; producers paused at the cap %.0f%% of the time; %s; "+
		"commit→start p50 %s, p90 %s, p99 %s, max %s (%d jobs)%s%s%s",
		r.Duration.Round(time.Millisecond), r.Producers, r.Batch, paced, r.Workers, r.BacklogCap,
		r.Inserted, r.InsertPerS, r.Completed, r.CompletePerS,
		r.PendingMean, r.PendingEnd, r.CapWaitPct, verdict,
		rd(l.P50), rd(l.P90), rd(l.P99), rd(l.Max), l.Jobs, cpuText(r.CPU, r.Completed, "completed"), procText(r.ProcCPU), warn)
}

// bottleneck judges which side limited a steady run.
func bottleneck(capWaitPct, pendingMean float64, inserted, completed int64, cap int) string {
	switch {
	case capWaitPct >= 5:
		return BottleneckWorkers
	case float64(completed) >= 0.9*float64(inserted) && pendingMean <= float64(cap)/10:
		return BottleneckProducers
	default:
		return BottleneckUnclear
	}
}

// Steady runs producers and workers on st at the same time and reports how
// many jobs were inserted and completed per second, how long jobs waited
// from insert commit to handler start, and whether the producers or the
// workers limited the run.
func Steady(ctx context.Context, st contract.Store, cfg SteadyConfig) (SteadyResult, error) {
	if cfg.Duration <= 0 {
		cfg.Duration = 10 * time.Second
	}
	if cfg.Producers <= 0 {
		cfg.Producers = 2
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 100
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 100
	}
	if cfg.Queue == "" {
		cfg.Queue = "steady"
	}
	if cfg.MaxBacklog <= 0 {
		cfg.MaxBacklog = 20000
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var inserted, completed, waited atomic.Int64
	var stamps batchStamps
	run := time.Now().UnixNano()
	h := core.NewHandlers()
	h.HandleRaw(Kind, func(_ context.Context, j *core.Job) error {
		now := time.Now()
		var a batchArgs
		if err := json.Unmarshal(j.Args, &a); err != nil {
			return core.Permanent(err)
		}
		if a.R == run {
			stamps.started(a.B, now)
		}
		return nil
	})
	wcfg := core.Config{
		Queues:              map[string]core.QueueConfig{cfg.Queue: {MaxWorkers: cfg.Workers}},
		Handlers:            h,
		Logger:              quiet,
		Retention:           &core.Retention{Completed: 0, Cancelled: -1, Discarded: -1},
		MaintenanceInterval: -1,
		Observers: []core.Observer{core.ObserverFunc(func(e core.Event) {
			if e.Kind == core.EventJobCompleted {
				completed.Add(1)
			}
		})},
	}
	if cfg.Tune != nil {
		cfg.Tune(&wcfg)
	}
	wc, err := core.NewClient(st, wcfg)
	if err != nil {
		return SteadyResult{}, err
	}
	pc, err := core.NewClient(st, core.Config{Logger: quiet, MaintenanceInterval: -1})
	if err != nil {
		return SteadyResult{}, err
	}
	leftover, err := unfinished(ctx, st, cfg.Queue)
	if err != nil {
		return SteadyResult{}, err
	}
	if err := wc.Start(ctx); err != nil {
		return SteadyResult{}, err
	}
	runCtx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	errs := make(chan error, cfg.Producers)
	cpu0 := markCPU()
	proc0 := markProcs(cfg.Server.Procs)
	start := time.Now()
	pace := newPacer(start, cfg.Rate, cfg.Batch)
	for range cfg.Producers {
		go func() {
			batch := make([]core.InsertParams, cfg.Batch)
			for runCtx.Err() == nil {
				if !pace.wait(runCtx) {
					break
				}
				if inserted.Load()-completed.Load() > int64(cfg.MaxBacklog) {
					t := time.Now()
					time.Sleep(time.Millisecond)
					waited.Add(int64(time.Since(t)))
					continue
				}
				n := stamps.batch()
				args, _ := json.Marshal(batchArgs{R: run, B: n})
				for i := range batch {
					batch[i] = core.InsertParams{Kind: Kind, Queue: cfg.Queue, Args: args}
				}
				if _, err := pc.EnqueueMany(runCtx, batch); err != nil {
					if runCtx.Err() != nil {
						break
					}
					errs <- err
					return
				}
				stamps.committed(n, time.Now())
				inserted.Add(int64(len(batch)))
			}
			errs <- nil
		}()
	}
	// Sample the pending count until the producers are done.
	var pendingSum, samples int64
	tick := time.NewTicker(10 * time.Millisecond)
	var firstErr error
	for left := cfg.Producers; left > 0; {
		select {
		case err := <-errs:
			if err != nil && firstErr == nil {
				firstErr = err
			}
			left--
		case <-tick.C:
			pendingSum += inserted.Load() - completed.Load()
			samples++
		}
	}
	tick.Stop()
	elapsed := time.Since(start)
	res := SteadyResult{Duration: elapsed, Producers: cfg.Producers, Batch: cfg.Batch, Workers: cfg.Workers, BacklogCap: cfg.MaxBacklog, Rate: cfg.Rate,
		Inserted: inserted.Load(), Completed: completed.Load(), Leftover: leftover, CPU: cpu0.since()}
	res.ProcCPU = proc0.since(cfg.Server, res.Completed)
	res.InsertPerS = float64(res.Inserted) / elapsed.Seconds()
	res.CompletePerS = float64(res.Completed) / elapsed.Seconds()
	res.PendingEnd = res.Inserted - res.Completed
	if samples > 0 {
		res.PendingMean = float64(pendingSum) / float64(samples)
	}
	res.CapWaitPct = 100 * float64(waited.Load()) / (float64(cfg.Producers) * float64(elapsed))
	res.Bottleneck = bottleneck(res.CapWaitPct, res.PendingMean, res.Inserted, res.Completed, cfg.MaxBacklog)
	_ = wc.StopAndCancel(context.WithoutCancel(ctx))
	// Handlers have returned: every start is recorded.
	res.Latency, res.Early = stamps.result()
	return res, firstErr
}

// unfinished counts the jobs of queue that are not in a final state.
func unfinished(ctx context.Context, st contract.Store, queue string) (int, error) {
	stats, err := st.Stats(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, q := range stats {
		if q.Queue != queue {
			continue
		}
		for state, c := range q.Counts {
			if !state.Final() {
				n += c
			}
		}
	}
	return n, nil
}

// pacer hands out batch slots at a fixed rate to any number of producers.
type pacer struct {
	next  atomic.Int64 // unix nanoseconds of the next free slot
	every int64        // nanoseconds between slots; 0 = no pacing
}

func newPacer(start time.Time, rate, batch int) *pacer {
	p := &pacer{}
	if rate > 0 {
		p.every = int64(float64(time.Second) * float64(batch) / float64(rate))
		p.next.Store(start.UnixNano())
	}
	return p
}

// wait takes the next slot and sleeps until it comes; false when ctx ends
// first.
func (p *pacer) wait(ctx context.Context) bool {
	if p.every == 0 {
		return true
	}
	slot := p.next.Add(p.every) - p.every
	d := time.Until(time.Unix(0, slot))
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
