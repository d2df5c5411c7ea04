package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
)

// FairConfig describes a fairness run: tenant A enqueues Backlog jobs
// into one queue, the workers start on them, then tenant B enqueues Late
// jobs; the run measures how long B's jobs wait to start.
type FairConfig struct {
	Backlog int           // tenant A's jobs; 0 = 100,000
	Late    int           // tenant B's jobs, enqueued once A's are running; 0 = 100
	Workers int           // 0 = 20
	JobTime time.Duration // each job's handler sleeps this long; 0 = 10 ms
	Fair    bool          // set core.QueueLimits.Fair on the queue
	Queue   string        // "" = "fair"
	// Tune optionally adjusts the worker client's configuration.
	Tune func(*core.Config)
}

// FairResult is what a fairness run measured: B's enqueue → start
// waits, and how many of A's jobs started before B's last one did.
type FairResult struct {
	Fair        bool          `json:"fair"`
	Backlog     int           `json:"backlog"`
	Late        int           `json:"late"`
	LateP50     time.Duration `json:"late_p50_ns"`
	LateAll     time.Duration `json:"late_all_started_ns"` // B's enqueue → B's last start
	AStartedBy  int64         `json:"a_started_before_b_done"`
	InsertTime  time.Duration `json:"insert_ns"`
	FinishedAll bool          `json:"finished_all"` // every B job started before the run's deadline
}

func (r FairResult) String() string {
	mode := "strict claim order"
	if r.Fair {
		mode = "fair claims"
	}
	if !r.FinishedAll {
		return fmt.Sprintf("%s: %d of tenant A ahead, %d of tenant B: B's jobs did not all start within %s", mode, r.Backlog, r.Late, r.LateAll.Round(time.Millisecond))
	}
	return fmt.Sprintf("%s: %d of tenant A ahead, %d of tenant B: B's jobs started within %s (p50 %s); %d of A's started meanwhile",
		mode, r.Backlog, r.Late, r.LateAll.Round(time.Millisecond), r.LateP50.Round(time.Millisecond), r.AStartedBy)
}

// Fair runs a fairness scenario on st (a fresh database is best: the
// queue's jobs are left behind). It waits at most maxWait for B's jobs
// to start, and reports FinishedAll false when they did not.
func Fair(ctx context.Context, st contract.Store, cfg FairConfig, maxWait time.Duration) (FairResult, error) {
	if cfg.Backlog <= 0 {
		cfg.Backlog = 100000
	}
	if cfg.Late <= 0 {
		cfg.Late = 100
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 20
	}
	if cfg.JobTime <= 0 {
		cfg.JobTime = 10 * time.Millisecond
	}
	if cfg.Queue == "" {
		cfg.Queue = "fair"
	}
	res := FairResult{Fair: cfg.Fair, Backlog: cfg.Backlog, Late: cfg.Late}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	inserter, err := core.NewClient(st, core.Config{Logger: quiet, MaintenanceInterval: -1})
	if err != nil {
		return res, err
	}
	if err := inserter.SetQueueLimits(ctx, cfg.Queue, core.QueueLimits{Fair: cfg.Fair}); err != nil {
		return res, err
	}
	enqueue := func(tenant string, n int) error {
		args := json.RawMessage(`{}`)
		for left := n; left > 0; {
			batch := make([]core.InsertParams, min(left, 1000))
			for i := range batch {
				batch[i] = core.InsertParams{Kind: Kind, Queue: cfg.Queue, Args: args, PartitionKey: tenant}
			}
			if _, err := inserter.EnqueueMany(ctx, batch); err != nil {
				return err
			}
			left -= len(batch)
		}
		return nil
	}
	t0 := time.Now()
	if err := enqueue("tenant-a", cfg.Backlog); err != nil {
		return res, err
	}
	res.InsertTime = time.Since(t0)

	var (
		mu       sync.Mutex
		lateAt   time.Time
		waits    []time.Duration
		aStarted atomic.Int64
		aWhile   int64
		allLate  = make(chan struct{})
		warm     = make(chan struct{})
	)
	h := core.NewHandlers()
	h.HandleRaw(Kind, func(ctx context.Context, j *core.Job) error {
		now := time.Now()
		if j.PartitionKey == "tenant-b" {
			mu.Lock()
			waits = append(waits, now.Sub(lateAt))
			if len(waits) == cfg.Late {
				aWhile = aStarted.Load()
				close(allLate)
			}
			mu.Unlock()
		} else if aStarted.Add(1) == int64(2*cfg.Workers) {
			close(warm)
		}
		select {
		case <-time.After(cfg.JobTime):
		case <-ctx.Done():
		}
		return nil
	})
	ccfg := core.Config{
		Queues:              map[string]core.QueueConfig{cfg.Queue: {MaxWorkers: cfg.Workers}},
		Handlers:            h,
		Logger:              quiet,
		MaintenanceInterval: -1,
	}
	if cfg.Tune != nil {
		cfg.Tune(&ccfg)
	}
	client, err := core.NewClient(st, ccfg)
	if err != nil {
		return res, err
	}
	if err := client.Start(ctx); err != nil {
		return res, err
	}
	defer func() { _ = client.StopAndCancel(context.Background()) }()
	select {
	case <-warm:
	case <-ctx.Done():
		return res, ctx.Err()
	}
	aStarted.Store(0)
	mu.Lock()
	lateAt = time.Now()
	mu.Unlock()
	if err := enqueue("tenant-b", cfg.Late); err != nil {
		return res, err
	}
	timer := time.NewTimer(maxWait)
	defer timer.Stop()
	select {
	case <-allLate:
		res.FinishedAll = true
	case <-timer.C:
	case <-ctx.Done():
		return res, ctx.Err()
	}
	mu.Lock()
	defer mu.Unlock()
	if res.FinishedAll {
		slices.Sort(waits)
		res.LateAll, res.LateP50, res.AStartedBy = waits[len(waits)-1], waits[len(waits)/2], aWhile
	} else {
		res.LateAll = maxWait
	}
	return res, nil
}
