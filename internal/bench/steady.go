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
)

// SteadyConfig describes a steady-state run: producers and workers run
// together for Duration.
type SteadyConfig struct {
	Duration  time.Duration // measured time; 0 = 10 s
	Producers int           // goroutines enqueueing; 0 = 2
	Batch     int           // jobs per EnqueueMany; 0 = 100
	Workers   int           // MaxWorkers; 0 = 100
	Queue     string        // "" = "steady"
	// MaxBacklog pauses producers while more than this many jobs are
	// enqueued but not completed, so the run measures throughput with a
	// bounded backlog rather than insert speed alone; 0 = 20,000.
	MaxBacklog int
	Tune       func(*core.Config)
}

// SteadyResult is one steady-state run's measurements.
type SteadyResult struct {
	Duration     time.Duration
	Inserted     int64
	Completed    int64
	InsertPerS   float64
	CompletePerS float64
}

func (r SteadyResult) String() string {
	return fmt.Sprintf("steady %s: inserted %d (%.0f/s), completed %d (%.0f jobs/s)",
		r.Duration.Round(time.Millisecond), r.Inserted, r.InsertPerS, r.Completed, r.CompletePerS)
}

// Steady runs producers and workers on st at the same time and reports how
// many jobs were inserted and completed per second.
func Steady(ctx context.Context, st core.Store, cfg SteadyConfig) (SteadyResult, error) {
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
	var inserted, completed atomic.Int64
	h := core.NewHandlers()
	h.HandleRaw(Kind, func(context.Context, *core.Job) error { return nil })
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
	if err := wc.Start(ctx); err != nil {
		return SteadyResult{}, err
	}
	runCtx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	errs := make(chan error, cfg.Producers)
	args := json.RawMessage(`{}`)
	start := time.Now()
	for range cfg.Producers {
		go func() {
			batch := make([]core.InsertParams, cfg.Batch)
			for i := range batch {
				batch[i] = core.InsertParams{Kind: Kind, Queue: cfg.Queue, Args: args}
			}
			for runCtx.Err() == nil {
				if inserted.Load()-completed.Load() > int64(cfg.MaxBacklog) {
					time.Sleep(time.Millisecond)
					continue
				}
				if _, err := pc.EnqueueMany(runCtx, batch); err != nil {
					if runCtx.Err() != nil {
						break
					}
					errs <- err
					return
				}
				inserted.Add(int64(len(batch)))
			}
			errs <- nil
		}()
	}
	var firstErr error
	for range cfg.Producers {
		if err := <-errs; err != nil && firstErr == nil {
			firstErr = err
		}
	}
	elapsed := time.Since(start)
	res := SteadyResult{Duration: elapsed, Inserted: inserted.Load(), Completed: completed.Load()}
	res.InsertPerS = float64(res.Inserted) / elapsed.Seconds()
	res.CompletePerS = float64(res.Completed) / elapsed.Seconds()
	_ = wc.StopAndCancel(context.WithoutCancel(ctx))
	return res, firstErr
}
