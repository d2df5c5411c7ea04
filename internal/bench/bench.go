// Package bench measures the whole engine (client, producers, executions,
// completer) on a real store: how fast a backlog of no-op jobs burns down.
// The Go benchmarks in this package and `backlog bench` both use it; results
// are recorded in docs/benchmarks.md with the machine and the command.
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

// Kind is the kind of the benchmark's no-op jobs.
const Kind = "bench.noop"

// Config describes one burn-down run.
type Config struct {
	Jobs       int    // jobs inserted before the clock starts
	Workers    int    // MaxWorkers of the queue; 0 = 100
	Queue      string // "" = "bench"
	InsertSize int    // jobs per EnqueueMany call; 0 = 1000
	// Tune optionally adjusts the client configuration (claim size,
	// completer interval, …) before the client is built.
	Tune func(*core.Config)
	// Server says where the database server runs (ServerOf the store
	// URL), for the result's split of CPU between this process and the
	// server; with the zero Server the server's CPU is omitted.
	Server Server
}

// Result is one run's measurements.
type Result struct {
	Jobs       int           `json:"jobs"`
	Insert     time.Duration `json:"insert_ns"`    // time to insert every job
	Work       time.Duration `json:"burndown_ns"`  // from client start to the last completion
	JobsPerSec float64       `json:"jobs_per_sec"` // Jobs / Work
	// InsertCPU and WorkCPU are the machine's CPU use while inserting and
	// while burning down (nil off Linux).
	InsertCPU *CPU `json:"insert_machine_cpu,omitempty"`
	WorkCPU   *CPU `json:"burndown_machine_cpu,omitempty"`
	// ProcCPU splits the burn-down's CPU between this process and the
	// database server (nil off Linux).
	*ProcCPU
}

func (r Result) String() string {
	return fmt.Sprintf("%d jobs: insert %s (%.0f/s%s), burn-down %s (%.0f jobs/s%s%s)",
		r.Jobs, r.Insert.Round(time.Millisecond), float64(r.Jobs)/r.Insert.Seconds(), cpuText(r.InsertCPU, int64(r.Jobs), "inserted"),
		r.Work.Round(time.Millisecond), r.JobsPerSec, cpuText(r.WorkCPU, int64(r.Jobs), "worked"), procText(r.ProcCPU))
}

// BurnDown inserts cfg.Jobs no-op jobs into st, then starts a client with
// one queue and measures until every job has completed (completed jobs are
// deleted at once: retention 0, as a queue under load would be tuned).
func BurnDown(ctx context.Context, st contract.Store, cfg Config) (Result, error) {
	if cfg.Workers <= 0 {
		cfg.Workers = 100
	}
	if cfg.Queue == "" {
		cfg.Queue = "bench"
	}
	if cfg.InsertSize <= 0 {
		cfg.InsertSize = 1000
	}
	var done atomic.Int64
	finished := make(chan struct{})
	total := int64(cfg.Jobs)
	h := core.NewHandlers()
	h.HandleRaw(Kind, func(context.Context, *core.Job) error { return nil })
	ccfg := core.Config{
		Queues:              map[string]core.QueueConfig{cfg.Queue: {MaxWorkers: cfg.Workers}},
		Handlers:            h,
		Logger:              slog.New(slog.NewTextHandler(io.Discard, nil)),
		Retention:           &core.Retention{Completed: 0, Cancelled: -1, Discarded: -1},
		MaintenanceInterval: -1,
		Observers: []core.Observer{core.ObserverFunc(func(e core.Event) {
			if e.Kind == core.EventJobCompleted && done.Add(1) == total {
				close(finished)
			}
		})},
	}
	if cfg.Tune != nil {
		cfg.Tune(&ccfg)
	}
	inserter, err := core.NewClient(st, core.Config{Logger: ccfg.Logger, MaintenanceInterval: -1})
	if err != nil {
		return Result{}, err
	}
	args := json.RawMessage(`{}`)
	cpu0 := markCPU()
	t0 := time.Now()
	for left := cfg.Jobs; left > 0; {
		n := min(left, cfg.InsertSize)
		batch := make([]core.InsertParams, n)
		for i := range batch {
			batch[i] = core.InsertParams{Kind: Kind, Queue: cfg.Queue, Args: args}
		}
		if _, err := inserter.EnqueueMany(ctx, batch); err != nil {
			return Result{}, err
		}
		left -= n
	}
	res := Result{Jobs: cfg.Jobs, Insert: time.Since(t0), InsertCPU: cpu0.since()}
	if cfg.Jobs == 0 {
		return res, nil
	}

	client, err := core.NewClient(st, ccfg)
	if err != nil {
		return Result{}, err
	}
	cpu1 := markCPU()
	proc1 := markProcs(cfg.Server.Procs)
	t1 := time.Now()
	if err := client.Start(ctx); err != nil {
		return Result{}, err
	}
	select {
	case <-finished:
	case <-ctx.Done():
		_ = client.StopAndCancel(context.Background())
		return Result{}, fmt.Errorf("burn-down: %d of %d jobs done: %w", done.Load(), total, ctx.Err())
	}
	res.Work = time.Since(t1)
	res.WorkCPU = cpu1.since()
	res.ProcCPU = proc1.since(cfg.Server, int64(cfg.Jobs))
	res.JobsPerSec = float64(cfg.Jobs) / res.Work.Seconds()
	if err := client.Stop(ctx); err != nil {
		return res, err
	}
	return res, nil
}
