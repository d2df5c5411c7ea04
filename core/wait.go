package core

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/core/storekit"
)

// Timing of Client.Wait's shared waiter loop.
const (
	// WaitPollInterval is how often a Client's waiter loop reads the jobs
	// its waiters wait for when nothing wakes it sooner: a job finished
	// by another process (or by a remote worker through another server)
	// is seen within about this long. Jobs finished by this Client's own
	// engine or reported final through its RemoteWorkers, and jobs
	// cancelled anywhere on a store that notifies cancels, are seen at
	// once.
	WaitPollInterval = 500 * time.Millisecond
	// WaitNotifiedPollInterval replaces WaitPollInterval while the loop
	// listens to a store that notifies finishes
	// (contract.FinishNotifier): the notified jobs are read at once, and
	// the full rounds at this interval only catch what the notifications
	// do not cover (jobs discarded by rescue or by their deadline, a lost
	// notification).
	WaitNotifiedPollInterval = 5 * time.Second
	// WaitReadSpan is how close waited ids must be to be read together:
	// ids within WaitReadSpan of the first of a run cost one List of at
	// most WaitReadSpan jobs (one read, however many waiters wait on
	// them), and a lone id costs one Get.
	WaitReadSpan = 256
	// WaitReadGap spaces the loop's rounds: a round that needed n store
	// reads is followed by the next after max(WaitPollInterval, n ×
	// WaitReadGap), so the loop makes at most about one read per
	// WaitReadGap (20 per second) however many jobs are waited for.
	WaitReadGap = 50 * time.Millisecond
	// waitPageBytes bounds the args and results one read of a run holds
	// (see PageLister); a run of large jobs is read in several pages.
	waitPageBytes = 4 << 20
	// waitReadTimeout bounds one store read of the loop.
	waitReadTimeout = 30 * time.Second
)

// Wait blocks until job id is final (completed, cancelled or discarded)
// and returns it as the store holds it then: state, Result, Errors (the
// last is the final error of a discarded job) and FinishedAt; values
// sealed by Config.Encryption stay sealed, as GetJob returns them. A job
// completed with a completed-retention of zero (its row deleted at once)
// by this Client's engine is returned as it was when its completion was
// written.
//
// It returns ErrNotFound (wrapped) for an id the store does not hold, or
// a job deleted while it is waited for (a job in the store's archive,
// contract.Archiver, is found there: it is final); ctx's error (ctx.Err()) when ctx
// ends first, so a timeout is context.DeadlineExceeded; ErrClosed once
// the Client has stopped (Stop wakes every waiter with it); and the
// store's error when the first read of the job fails. Store errors
// after that are retried at the next round of the waiter loop.
//
// Waiting works on a client that was never started. All waiters of one
// Client share one waiter loop, started by the first and ended when none
// remain or the Client stops: this Client's completions (its engine's,
// and remote workers' reports through RemoteWorkers.Report) wake their
// waiters at once, cancels notified by the store (Notifier) too, and
// and so are jobs the store notifies as finished (a
// contract.FinishNotifier such as PostgreSQL's: finished by any process);
// everything else is read every WaitPollInterval (every
// WaitNotifiedPollInterval while finish notifications are heard) in
// batches (see WaitReadSpan and WaitReadGap), so many waiters do not cost
// one query each. A waiter whose ctx ends leaves at once.
func (c *Client) Wait(ctx context.Context, id int64) (*Job, error) {
	if id < 1 {
		return nil, fmt.Errorf("backlog: wait for job %d: %w", id, ErrNotFound)
	}
	w, err := c.waits.join(c, id)
	if err != nil {
		return nil, fmt.Errorf("backlog: wait for job %d: %w", id, err)
	}
	defer c.waits.leave(w)
	j, _, err := c.FindJob(ctx, id) // an archived job is final
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil:
		return nil, fmt.Errorf("backlog: wait for job %d: %w", id, err)
	case j.State.Final():
		return j, nil
	}
	select {
	case <-w.done:
		if w.err != nil {
			return nil, fmt.Errorf("backlog: wait for job %d: %w", id, w.err)
		}
		return cloneJob(w.job), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// WaitTimeout is Wait bounded by timeout: it returns the final job and
// final=true as Wait does, or, when timeout passes first, the job as it
// is then (one more read) and final=false (true if it became final just
// then). A timeout of zero or less reads the job without waiting. Errors
// are Wait's: ErrNotFound, ErrClosed, the store's, and ctx's error when
// ctx (not the timeout) ends first.
func (c *Client) WaitTimeout(ctx context.Context, id int64, timeout time.Duration) (j *Job, final bool, err error) {
	if timeout > 0 {
		wctx, cancel := context.WithTimeout(ctx, timeout)
		j, err = c.Wait(wctx, id)
		cancel()
		if err == nil {
			return j, true, nil
		}
		if !errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			if ctx.Err() != nil {
				return nil, false, ctx.Err()
			}
			return nil, false, err
		}
	}
	if id < 1 {
		return nil, false, fmt.Errorf("backlog: wait for job %d: %w", id, ErrNotFound)
	}
	j, _, err = c.FindJob(ctx, id)
	if err != nil {
		if ctx.Err() != nil {
			return nil, false, ctx.Err()
		}
		return nil, false, fmt.Errorf("backlog: wait for job %d: %w", id, err)
	}
	return j, j.State.Final(), nil
}

// jobFinished tells the waiters of o's job that an outcome of this
// Client was written (applied): when it is final (complete, cancel,
// discard) they read the job at once instead of at the next poll. job is
// the job as claimed: a completion that deleted the row (o.Delete) passes
// it on, completed, to its waiters, since there is nothing left to read.
// The completer and RemoteWorkers.Report call it for every applied
// outcome; any other place that applies outcomes for this Client should
// too.
func (c *Client) jobFinished(o *contract.Outcome, job *Job) {
	var gone *Job
	switch o.Kind {
	case contract.OutcomeComplete:
		if o.Delete && job != nil {
			gone = cloneJob(job)
			gone.State, gone.FinishedAt, gone.Result = StateCompleted, o.At, o.Result
			gone.LeaseUntil = time.Time{}
		}
	case contract.OutcomeCancel, contract.OutcomeDiscard:
	default:
		return
	}
	c.waits.wake(o.JobID, gone)
}

// waiter is one call of Wait: done is closed once job or err is set.
type waiter struct {
	id   int64
	done chan struct{}
	job  *Job
	err  error
}

// waitHub is a Client's waiter registry and its one waiter loop. The
// zero value is ready; the loop runs while there are waiters.
type waitHub struct {
	mu      sync.Mutex
	waiters map[int64][]*waiter // by job id
	urgent  map[int64]*Job      // ids to read at once; a non-nil job is a deleted completion's
	full    bool                // a round over every waited id is due at once (a notification gap)
	// notified is set while the loop hears the store's finish
	// notifications (see WaitNotifiedPollInterval).
	notified bool
	kick     chan struct{}      // wakes the loop; capacity 1
	running  bool               // a loop goroutine runs
	closed   bool               // the Client stopped
	stop     context.CancelFunc // ends the running loop's reads
	loops    sync.WaitGroup
	// interval replaces WaitPollInterval when set (tests of the wake-ups).
	interval time.Duration
}

// pollInterval is the loop's interval between full rounds; h.mu is held.
func (h *waitHub) pollInterval() time.Duration {
	switch {
	case h.interval > 0:
		return h.interval
	case h.notified:
		return WaitNotifiedPollInterval
	}
	return WaitPollInterval
}

// join registers a waiter for id, starting the loop when none runs. It
// returns ErrClosed once the hub is closed.
func (h *waitHub) join(c *Client, id int64) (*waiter, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrClosed
	}
	if h.waiters == nil {
		h.waiters = map[int64][]*waiter{}
		h.urgent = map[int64]*Job{}
		h.kick = make(chan struct{}, 1)
	}
	w := &waiter{id: id, done: make(chan struct{})}
	h.waiters[id] = append(h.waiters[id], w)
	if !h.running {
		h.running = true
		ctx, stop := context.WithCancel(context.Background())
		h.stop = stop
		h.loops.Add(1)
		go func() { defer h.loops.Done(); defer stop(); h.loop(ctx, c) }()
	}
	return w, nil
}

// leave forgets w (whether or not it was answered); the loop ends soon
// after the last waiter left.
func (h *waitHub) leave(w *waiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ws := h.waiters[w.id]
	if i := slices.Index(ws, w); i >= 0 {
		ws = slices.Delete(ws, i, i+1)
		if len(ws) == 0 {
			delete(h.waiters, w.id)
		} else {
			h.waiters[w.id] = ws
		}
	}
	if len(h.waiters) == 0 {
		h.poke()
	}
}

// wake asks the loop to read job id at once, when it is waited for;
// gone is what its waiters get if the job is found deleted.
func (h *waitHub) wake(id int64, gone *Job) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.waiters[id]) == 0 {
		return
	}
	if gone != nil || h.urgent[id] == nil {
		h.urgent[id] = gone
	}
	h.poke()
}

// deliver answers every waiter of j.ID with j, a job known to be final
// (a cancel's answer), without a read.
func (h *waitHub) deliver(j *Job) {
	if j == nil || !j.State.Final() {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.answer(j.ID, j, nil)
}

// answer sets the outcome of every waiter of id and forgets them;
// h.mu is held.
func (h *waitHub) answer(id int64, j *Job, err error) {
	for _, w := range h.waiters[id] {
		w.job, w.err = j, err
		close(w.done)
	}
	delete(h.waiters, id)
	delete(h.urgent, id)
}

// poke wakes the loop without blocking; h.mu is held.
func (h *waitHub) poke() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// close answers every waiter with ErrClosed, refuses new ones and waits
// for the loop to end. Client.Stop calls it.
func (h *waitHub) close() {
	h.mu.Lock()
	h.closed = true
	for id := range h.waiters {
		h.answer(id, nil, ErrClosed)
	}
	if h.running {
		h.stop()
		h.poke()
	}
	h.mu.Unlock()
	h.loops.Wait()
}

// loop reads the waited jobs until no waiter remains or the hub closes:
// the ids woken (wake, a notified cancel or finish) at once, every waited
// id each round. It follows the store's notifications, when it has them,
// for cancels and finishes, which are final.
func (h *waitHub) loop(ctx context.Context, c *Client) {
	ctx, cancel := context.WithCancel(ctx)
	var listener sync.WaitGroup
	defer func() { cancel(); listener.Wait() }()
	if n, ok := c.store.(contract.Notifier); ok {
		fn, _ := c.store.(contract.FinishNotifier)
		finishes := fn != nil && fn.NotifiesFinish()
		// setNotified records whether finishes are heard, and asks for
		// a full round: a listener just started (or lost) may have
		// missed what finished before it.
		setNotified := func(on bool) {
			h.mu.Lock()
			h.notified = on
			h.full = true
			h.poke()
			h.mu.Unlock()
		}
		listener.Add(1)
		go func() {
			defer listener.Done()
			defer func() {
				h.mu.Lock()
				h.notified = false
				h.mu.Unlock()
			}()
			_ = FollowNotifications(ctx, n, c.log, "backlog: wait: ", time.Second, func() {
				if finishes {
					setNotified(true)
				}
			}, func(note contract.Notification) {
				switch note.Kind {
				case contract.NotifyCancel, contract.NotifyFinish:
					h.wake(note.JobID, nil)
				}
			}, func() { setNotified(false) })
		}()
	}
	h.mu.Lock()
	interval := h.pollInterval()
	h.mu.Unlock()
	timer := time.NewTimer(interval)
	defer timer.Stop()
	nextFull := time.Now().Add(interval)
	for {
		h.mu.Lock()
		if h.closed || len(h.waiters) == 0 {
			h.running = false
			h.mu.Unlock()
			return
		}
		now := time.Now()
		full := h.full || !now.Before(nextFull)
		h.full = false
		interval = h.pollInterval()
		var ids []int64
		if full {
			ids = slices.Collect(maps.Keys(h.waiters))
		} else {
			for id := range h.urgent {
				if len(h.waiters[id]) > 0 {
					ids = append(ids, id)
				}
			}
		}
		gone := h.urgent
		h.urgent = map[int64]*Job{}
		h.mu.Unlock()

		reads := h.check(ctx, c, ids, gone)
		if full {
			nextFull = time.Now().Add(max(interval, time.Duration(reads)*WaitReadGap))
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(max(time.Until(nextFull), 0))
		select {
		case <-h.kick:
		case <-timer.C:
		}
	}
}

// check reads the jobs ids (in runs of ids within WaitReadSpan, one read
// per run and page) and answers the waiters of those that are final or
// gone. gone holds what the waiters of a deleted completion get. It
// returns how many store reads it made.
func (h *waitHub) check(ctx context.Context, c *Client, ids []int64, gone map[int64]*Job) int {
	if len(ids) == 0 {
		return 0
	}
	slices.Sort(ids)
	reads := 0
	found := func(j *Job) {
		if j.State.Final() {
			h.mu.Lock()
			h.answer(j.ID, j, nil)
			h.mu.Unlock()
		}
	}
	archive, _ := c.store.(contract.Archiver)
	missing := func(id int64) {
		// A job gone from the jobs table may have been archived (past
		// its retention) between two rounds: it is final there.
		var archived *Job
		if g := gone[id]; g == nil && archive != nil {
			rctx, cancel := context.WithTimeout(ctx, waitReadTimeout)
			archived, _ = archive.GetArchived(rctx, id)
			cancel()
		}
		h.mu.Lock()
		switch g := gone[id]; {
		case g != nil:
			h.answer(id, g, nil)
		case archived != nil:
			h.answer(id, archived, nil)
		default:
			h.answer(id, nil, ErrNotFound)
		}
		h.mu.Unlock()
	}
	for start := 0; start < len(ids); {
		if ctx.Err() != nil {
			return reads
		}
		end := start + 1
		for end < len(ids) && ids[end]-ids[start] < WaitReadSpan {
			end++
		}
		run := ids[start:end]
		start = end
		if len(run) == 1 {
			reads++
			rctx, cancel := context.WithTimeout(ctx, waitReadTimeout)
			j, err := c.store.Get(rctx, run[0])
			cancel()
			switch {
			case errors.Is(err, ErrNotFound):
				missing(run[0])
			case err != nil:
				c.log.Debug("backlog: wait: reading a waited job failed; retrying at the next round", "job_id", run[0], "err", err)
			default:
				found(j)
			}
			continue
		}
		n, err := h.readRun(ctx, c, run, found, missing)
		reads += n
		if err != nil {
			c.log.Debug("backlog: wait: reading waited jobs failed; retrying at the next round", "from_id", run[0], "to_id", run[len(run)-1], "err", err)
		}
	}
	return reads
}

// readRun reads the jobs with ids run[0]..run[len(run)-1] in id order
// (List from run[0], at most the span's count of jobs, in pages of
// waitPageBytes where the store is a PageLister), calls found for every
// waited job read and missing for every waited id the store no longer
// holds. It returns how many reads it made.
func (h *waitHub) readRun(ctx context.Context, c *Client, run []int64, found func(*Job), missing func(int64)) (int, error) {
	pl, paged := c.store.(contract.PageLister)
	first, last := run[0], run[len(run)-1]
	after := first - 1
	reads := 0
	next := 0 // run[next] is the first waited id not yet settled
	for after < last {
		p := ListParams{AfterID: after, Limit: int(last - after)}
		rctx, cancel := context.WithTimeout(ctx, waitReadTimeout)
		var jobs []*Job
		var err error
		if paged {
			jobs, err = pl.ListPage(rctx, p, waitPageBytes)
		} else {
			jobs, err = c.store.List(rctx, p)
		}
		cancel()
		reads++
		if err != nil {
			return reads, err
		}
		weight := 0
		for _, j := range jobs {
			weight += storekit.JobWeight(j)
			for next < len(run) && run[next] < j.ID {
				missing(run[next])
				next++
			}
			if next < len(run) && run[next] == j.ID {
				found(j)
				next++
			}
			after = j.ID
		}
		cutShort := paged && weight >= waitPageBytes
		if len(jobs) == 0 || (len(jobs) < p.Limit && !cutShort) {
			// The store holds nothing more after the page.
			for ; next < len(run); next++ {
				missing(run[next])
			}
			return reads, nil
		}
	}
	return reads, nil
}

// cloneJob returns a copy of j that shares nothing with it.
func cloneJob(j *Job) *Job {
	if j == nil {
		return nil
	}
	cp := *j
	cp.Args = slices.Clone(j.Args)
	cp.Result = slices.Clone(j.Result)
	cp.Tags = slices.Clone(j.Tags)
	cp.Errors = slices.Clone(j.Errors)
	cp.Metadata = maps.Clone(j.Metadata)
	return &cp
}
