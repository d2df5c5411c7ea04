package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
)

// stampArgs carry the wall time a job was enqueued, so its handler can
// measure the wake-up latency.
type stampArgs struct {
	Sent int64 `json:"sent"` // unix nanoseconds just after the insert committed
	Seq  int   `json:"seq"`
}

// LatencyConfig describes a wake-up latency run: jobs are enqueued one at a
// time by an insert-only client while a separate worker client idles, so
// each job reaches the workers only through the store (notification or
// poll), as it would from another process.
type LatencyConfig struct {
	Jobs     int           // jobs enqueued one by one; 0 = 200
	Interval time.Duration // pause between enqueues; 0 = 10 ms
	Queue    string        // "" = "latency"
	// Tune optionally adjusts the worker client's configuration.
	Tune func(*core.Config)
}

// LatencyResult holds wake-up latencies: enqueue call → handler start.
type LatencyResult struct {
	Jobs int           `json:"jobs"`
	P50  time.Duration `json:"p50_ns"`
	P90  time.Duration `json:"p90_ns"`
	P99  time.Duration `json:"p99_ns"`
	Max  time.Duration `json:"max_ns"`
}

func (r LatencyResult) String() string {
	return fmt.Sprintf("%d jobs: enqueue→start p50 %s, p90 %s, p99 %s, max %s", r.Jobs,
		r.P50.Round(10*time.Microsecond), r.P90.Round(10*time.Microsecond), r.P99.Round(10*time.Microsecond), r.Max.Round(10*time.Microsecond))
}

// Latency measures how long an enqueued job waits before its handler
// starts, with idle workers. producer and worker may be the same store or
// two handles on one database (two handles make the notification path
// cross connection pools, as between processes).
func Latency(ctx context.Context, producer, worker contract.Store, cfg LatencyConfig) (LatencyResult, error) {
	if cfg.Jobs <= 0 {
		cfg.Jobs = 200
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 10 * time.Millisecond
	}
	if cfg.Queue == "" {
		cfg.Queue = "latency"
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var mu sync.Mutex
	lat := make([]time.Duration, 0, cfg.Jobs)
	var seen atomic.Int64
	all := make(chan struct{})
	h := core.NewHandlers()
	h.HandleRaw(Kind, func(_ context.Context, j *core.Job) error {
		now := time.Now()
		var a stampArgs
		if err := json.Unmarshal(j.Args, &a); err != nil {
			return core.Permanent(err)
		}
		mu.Lock()
		lat = append(lat, now.Sub(time.Unix(0, a.Sent)))
		mu.Unlock()
		if seen.Add(1) == int64(cfg.Jobs) {
			close(all)
		}
		return nil
	})
	wcfg := core.Config{
		Queues:              map[string]core.QueueConfig{cfg.Queue: {MaxWorkers: 10}},
		Handlers:            h,
		Logger:              quiet,
		Retention:           &core.Retention{Completed: 0, Cancelled: -1, Discarded: -1},
		MaintenanceInterval: -1,
	}
	if cfg.Tune != nil {
		cfg.Tune(&wcfg)
	}
	wc, err := core.NewClient(worker, wcfg)
	if err != nil {
		return LatencyResult{}, err
	}
	if err := wc.Start(ctx); err != nil {
		return LatencyResult{}, err
	}
	defer wc.Stop(context.WithoutCancel(ctx))
	pc, err := core.NewClient(producer, core.Config{Logger: quiet, MaintenanceInterval: -1})
	if err != nil {
		return LatencyResult{}, err
	}
	// Let the worker's listener connect before the first job.
	time.Sleep(200 * time.Millisecond)
	for i := range cfg.Jobs {
		// The stamp is taken just before the insert, so each latency
		// includes the insert's own round trip: a slight overestimate.
		b, _ := json.Marshal(stampArgs{Sent: time.Now().UnixNano(), Seq: i})
		if _, err := pc.EnqueueRaw(ctx, Kind, b, &core.Options{Queue: cfg.Queue}); err != nil {
			return LatencyResult{}, err
		}
		if !sleep(ctx, cfg.Interval) {
			return LatencyResult{}, ctx.Err()
		}
	}
	select {
	case <-all:
	case <-ctx.Done():
		return LatencyResult{}, fmt.Errorf("latency: %d of %d jobs started: %w", seen.Load(), cfg.Jobs, ctx.Err())
	}
	mu.Lock()
	defer mu.Unlock()
	return percentiles(lat), nil
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
