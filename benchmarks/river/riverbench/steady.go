package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
)

// latencyResult has the JSON shape of backlog's bench.LatencyResult.
type latencyResult struct {
	Jobs int           `json:"jobs"`
	P50  time.Duration `json:"p50_ns"`
	P90  time.Duration `json:"p90_ns"`
	P99  time.Duration `json:"p99_ns"`
	Max  time.Duration `json:"max_ns"`
}

// percentiles summarises latencies as backlog's bench does (sorting lat
// in place); the zero result when lat is empty.
func percentiles(lat []time.Duration) latencyResult {
	if len(lat) == 0 {
		return latencyResult{}
	}
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	return latencyResult{Jobs: len(lat), P50: pct(0.50), P90: pct(0.90), P99: pct(0.99), Max: lat[len(lat)-1]}
}

// steadyResult has the JSON shape of backlog's bench.SteadyResult.
type steadyResult struct {
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
	PendingMean  float64       `json:"pending_mean"`
	PendingEnd   int64         `json:"pending_end"`
	CapWaitPct   float64       `json:"cap_wait_pct"`
	Bottleneck   string        `json:"bottleneck"`
	Latency      latencyResult `json:"latency"`
	Early        int           `json:"latency_early"`
	Leftover     int           `json:"leftover"` // always 0: the table is emptied first
}

// bottleneck judges which side limited a steady run, with backlog's
// thresholds: producers paused at the cap ≥ 5 % of the time → the workers;
// completions ≥ 90 % of inserts with pending ≤ cap/10 → the producers.
func bottleneck(capWaitPct, pendingMean float64, inserted, completed int64, cap int) string {
	switch {
	case capWaitPct >= 5:
		return "workers"
	case float64(completed) >= 0.9*float64(inserted) && pendingMean <= float64(cap)/10:
		return "producers"
	default:
		return "unclear"
	}
}

// batchStamps pairs the time each insert call returned with the start of
// each of its jobs, as backlog's bench does: latency = worker start −
// InsertManyFast returning; a start before its producer saw the commit
// counts as 0 (Early).
type batchStamps struct {
	mu      sync.Mutex
	next    int64
	commits []time.Time
	starts  []batchStart
}

type batchStart struct {
	batch int64
	at    time.Time
}

func (s *batchStamps) batch() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.next
	s.next++
	return n
}

func (s *batchStamps) committed(n int64, t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for int64(len(s.commits)) <= n {
		s.commits = append(s.commits, time.Time{})
	}
	s.commits[n] = t
}

func (s *batchStamps) started(n int64, t time.Time) {
	s.mu.Lock()
	s.starts = append(s.starts, batchStart{n, t})
	s.mu.Unlock()
}

func (s *batchStamps) result() (latencyResult, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	lat := make([]time.Duration, 0, len(s.starts))
	early := 0
	for _, st := range s.starts {
		if st.batch >= int64(len(s.commits)) || s.commits[st.batch].IsZero() {
			continue
		}
		d := st.at.Sub(s.commits[st.batch])
		if d < 0 {
			d, early = 0, early+1
		}
		lat = append(lat, d)
	}
	return percentiles(lat), early
}

// steady runs a worker client and o.producers goroutines inserting
// batches of o.batch jobs together for o.duration, with producers pausing
// while more than o.maxBacklog jobs are inserted but not completed.
func steady(ctx context.Context, pool *pgxpool.Pool, o opts) (steadyResult, error) {
	var stamps batchStamps
	run := time.Now().UnixNano()
	w := &noopWorker{onStart: func(a noopArgs, at time.Time) {
		if a.R == run {
			stamps.started(a.B, at)
		}
	}}
	client, err := newClient(pool, o, w)
	if err != nil {
		return steadyResult{}, err
	}
	inserter, err := newClient(pool, o, nil)
	if err != nil {
		return steadyResult{}, err
	}
	var inserted, completed, waited atomic.Int64
	_, unsubscribe := countCompleted(client, &completed, 0)
	defer unsubscribe()
	if err := client.Start(ctx); err != nil {
		return steadyResult{}, err
	}
	runCtx, cancel := context.WithTimeout(ctx, o.duration)
	defer cancel()
	errs := make(chan error, o.producers)
	start := time.Now()
	pace := newPacer(start, o.rate, o.batch)
	for range o.producers {
		go func() {
			batch := make([]river.InsertManyParams, o.batch)
			for runCtx.Err() == nil {
				if !pace.wait(runCtx) {
					break
				}
				if inserted.Load()-completed.Load() > int64(o.maxBacklog) {
					t := time.Now()
					time.Sleep(time.Millisecond)
					waited.Add(int64(time.Since(t)))
					continue
				}
				n := stamps.batch()
				for i := range batch {
					batch[i] = river.InsertManyParams{Args: noopArgs{R: run, B: n}, InsertOpts: &river.InsertOpts{Queue: queue}}
				}
				if _, err := inserter.InsertManyFast(runCtx, batch); err != nil {
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
	var pendingSum, samples int64
	tick := time.NewTicker(10 * time.Millisecond)
	var firstErr error
	for left := o.producers; left > 0; {
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
	res := steadyResult{Duration: elapsed, Producers: o.producers, Batch: o.batch, Workers: o.workers, BacklogCap: o.maxBacklog, Rate: o.rate,
		Inserted: inserted.Load(), Completed: completed.Load()}
	res.InsertPerS = float64(res.Inserted) / elapsed.Seconds()
	res.CompletePerS = float64(res.Completed) / elapsed.Seconds()
	res.PendingEnd = res.Inserted - res.Completed
	if samples > 0 {
		res.PendingMean = float64(pendingSum) / float64(samples)
	}
	res.CapWaitPct = 100 * float64(waited.Load()) / (float64(o.producers) * float64(elapsed))
	res.Bottleneck = bottleneck(res.CapWaitPct, res.PendingMean, res.Inserted, res.Completed, o.maxBacklog)
	_ = client.StopAndCancel(context.WithoutCancel(ctx))
	res.Latency, res.Early = stamps.result()
	return res, firstErr
}

// latency measures, as `backlog bench latency` does, how long a job waits
// before its worker starts with idle workers: o.jobs jobs inserted one by
// one every o.interval by a client on a second pool (so the wake-up
// crosses connection pools, as between processes); each job carries the
// time taken just before its insert, so the figure includes the insert's
// own round trip.
func latency(ctx context.Context, pool *pgxpool.Pool, o opts) (latencyResult, error) {
	var mu sync.Mutex
	lat := make([]time.Duration, 0, o.jobs)
	var seen atomic.Int64
	all := make(chan struct{})
	w := &noopWorker{onStart: func(a noopArgs, at time.Time) {
		if a.Sent == 0 {
			return
		}
		mu.Lock()
		lat = append(lat, at.Sub(time.Unix(0, a.Sent)))
		mu.Unlock()
		if seen.Add(1) == int64(o.jobs) {
			close(all)
		}
	}}
	lo := o
	lo.workers = 10 // as backlog's bench latency
	client, err := newClient(pool, lo, w)
	if err != nil {
		return latencyResult{}, err
	}
	if err := client.Start(ctx); err != nil {
		return latencyResult{}, err
	}
	defer client.Stop(context.WithoutCancel(ctx))
	other, err := pgxpool.New(ctx, o.url)
	if err != nil {
		return latencyResult{}, err
	}
	defer other.Close()
	inserter, err := newClient(other, o, nil)
	if err != nil {
		return latencyResult{}, err
	}
	// Let the client's listener connect before the first job.
	time.Sleep(200 * time.Millisecond)
	for range o.jobs {
		if _, err := inserter.Insert(ctx, noopArgs{Sent: time.Now().UnixNano()}, &river.InsertOpts{Queue: queue}); err != nil {
			return latencyResult{}, err
		}
		select {
		case <-time.After(o.interval):
		case <-ctx.Done():
			return latencyResult{}, ctx.Err()
		}
	}
	select {
	case <-all:
	case <-ctx.Done():
		return latencyResult{}, fmt.Errorf("latency: %d of %d jobs started: %w", seen.Load(), o.jobs, ctx.Err())
	}
	mu.Lock()
	defer mu.Unlock()
	return percentiles(lat), nil
}

// pacer hands out batch slots at a fixed rate to any number of producers,
// as backlog's bench does.
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
