package core_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/internal/teststores"
	"github.com/backlogq/backlog/store/memory"
)

// readCountingStore counts the reads of jobs (Get, List, ListPage) that
// reach the store under it.
type readCountingStore struct {
	contract.Store
	pl    contract.PageLister
	reads atomic.Int64
}

func newReadCountingStore(st *memory.Store) *readCountingStore {
	return &readCountingStore{Store: st, pl: st}
}

func (s *readCountingStore) Get(ctx context.Context, id int64) (*core.Job, error) {
	s.reads.Add(1)
	return s.Store.Get(ctx, id)
}

func (s *readCountingStore) List(ctx context.Context, p core.ListParams) ([]*core.Job, error) {
	s.reads.Add(1)
	return s.Store.List(ctx, p)
}

func (s *readCountingStore) ListPage(ctx context.Context, p core.ListParams, maxBytes int) ([]*core.Job, error) {
	s.reads.Add(1)
	return s.pl.ListPage(ctx, p, maxBytes)
}

// newWaitClient returns a client that neither works queues nor runs
// maintenance, over st.
func newWaitClient(t *testing.T, st contract.Store) *core.Client {
	t.Helper()
	c, err := core.NewClient(st, core.Config{Logger: quietLogger(), MaintenanceInterval: -1, AllowUnknownKinds: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	return c
}

// waitResult is one Wait's answer.
type waitResult struct {
	job *core.Job
	err error
}

// goWait runs c.Wait(ctx, id) on a goroutine and returns its answer's channel.
func goWait(ctx context.Context, c *core.Client, id int64) <-chan waitResult {
	ch := make(chan waitResult, 1)
	go func() {
		j, err := c.Wait(ctx, id)
		ch <- waitResult{j, err}
	}()
	return ch
}

// waitUntil polls cond every millisecond for up to 10 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func recv(t *testing.T, ch <-chan waitResult) waitResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return within 10 s")
	}
	return waitResult{}
}

// The engine's own completion wakes the waiters at once: with the
// loop's poll interval an hour, only the completer's hook can answer.
func TestWaitWakesOnThisClientsCompletion(t *testing.T) {
	release := make(chan struct{})
	h := core.NewHandlers()
	core.Handle(h, func(ctx context.Context, j *core.TypedJob[greetArgs]) error {
		<-release
		return core.RecordResult(ctx, map[string]string{"hello": j.Args.Name})
	})
	c, _ := newClient(t, h, func(cfg *core.Config) { cfg.CompleterInterval = time.Millisecond })
	core.SetWaitPollInterval(c, time.Hour)
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r, err := c.Enqueue(ctx, greetArgs{Name: "ada"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ch := goWait(ctx, c, r.Job.ID)
	waitUntil(t, "the waiter waits", func() bool { return core.Waiting(c) == 1 })
	close(release)
	got := recv(t, ch)
	if got.err != nil {
		t.Fatal(got.err)
	}
	if got.job.State != core.StateCompleted || string(got.job.Result) != `{"hello":"ada"}` || got.job.FinishedAt.IsZero() {
		t.Fatalf("Wait returned %+v, result %s", got.job, got.job.Result)
	}
	waitUntil(t, "the waiter loop ends", func() bool { return !core.WaitLoopRunning(c) })
}

// A completion that deletes the row (completed retention zero) still
// answers this client's waiters with the completed job and its result.
func TestWaitOnCompletionThatDeletesTheRow(t *testing.T) {
	release := make(chan struct{})
	h := core.NewHandlers()
	core.Handle(h, func(ctx context.Context, j *core.TypedJob[greetArgs]) error {
		<-release
		return core.RecordRawResult(ctx, []byte(`"done"`))
	})
	c, st := newClient(t, h, func(cfg *core.Config) {
		cfg.CompleterInterval = time.Millisecond
		cfg.Retention = &core.Retention{Completed: 0, Cancelled: time.Hour, Discarded: time.Hour}
	})
	core.SetWaitPollInterval(c, time.Hour)
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r, err := c.Enqueue(ctx, greetArgs{Name: "bo"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ch := goWait(ctx, c, r.Job.ID)
	waitUntil(t, "the waiter waits", func() bool { return core.Waiting(c) == 1 })
	close(release)
	got := recv(t, ch)
	if got.err != nil {
		t.Fatal(got.err)
	}
	if got.job.State != core.StateCompleted || string(got.job.Result) != `"done"` || got.job.ID != r.Job.ID {
		t.Fatalf("Wait returned %+v, result %s", got.job, got.job.Result)
	}
	if _, err := st.Get(ctx, r.Job.ID); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("the completed job's row should be gone: %v", err)
	}
}

// A job finished by another client on the same store is seen by the
// waiter loop's poll, with its state, result and last error.
func TestWaitSeesAnotherClientsOutcomeByPolling(t *testing.T) {
	st := memory.New()
	t.Cleanup(func() { _ = st.Close() })
	h := core.NewHandlers()
	h.HandleRaw("ok", func(ctx context.Context, j *core.Job) error {
		return core.RecordRawResult(ctx, []byte(`42`))
	})
	h.HandleRaw("bad", func(ctx context.Context, j *core.Job) error {
		return errors.New("no luck")
	})
	worker, err := core.NewClient(st, core.Config{
		Queues:   map[string]core.QueueConfig{core.DefaultQueue: {MaxWorkers: 4}},
		Handlers: h, Logger: quietLogger(), PollInterval: 20 * time.Millisecond, MaintenanceInterval: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	waiter := newWaitClient(t, st)
	ctx := context.Background()
	ok, err := waiter.EnqueueRaw(ctx, "ok", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	bad, err := waiter.EnqueueRaw(ctx, "bad", nil, &core.Options{MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	okCh, badCh := goWait(ctx, waiter, ok.Job.ID), goWait(ctx, waiter, bad.Job.ID)
	waitUntil(t, "both wait", func() bool { return core.Waiting(waiter) == 2 })
	if err := worker.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = worker.Stop(context.Background()) })

	got := recv(t, okCh)
	if got.err != nil || got.job.State != core.StateCompleted || string(got.job.Result) != `42` {
		t.Fatalf("ok: %+v %v", got.job, got.err)
	}
	got = recv(t, badCh)
	if got.err != nil || got.job.State != core.StateDiscarded || len(got.job.Errors) != 1 || got.job.Errors[0].Error != "no luck" {
		t.Fatalf("bad: %+v %v", got.job, got.err)
	}
}

// A cancel by another client reaches the waiter through the store's
// notification (the memory store notifies cancels), not the poll.
func TestWaitWakesOnNotifiedCancel(t *testing.T) {
	st := memory.New()
	t.Cleanup(func() { _ = st.Close() })
	waiter, other := newWaitClient(t, st), newWaitClient(t, st)
	core.SetWaitPollInterval(waiter, time.Hour)
	ctx := context.Background()
	r, err := waiter.EnqueueRaw(ctx, "k", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ch := goWait(ctx, waiter, r.Job.ID)
	waitUntil(t, "the waiter waits", func() bool { return core.Waiting(waiter) == 1 })
	time.Sleep(50 * time.Millisecond) // the loop's listener is listening
	if _, err := other.CancelJob(ctx, r.Job.ID); err != nil {
		t.Fatal(err)
	}
	got := recv(t, ch)
	if got.err != nil || got.job.State != core.StateCancelled {
		t.Fatalf("Wait returned %+v, %v", got.job, got.err)
	}
}

// This client's own cancel answers its waiters without a read.
func TestWaitWakesOnOwnCancel(t *testing.T) {
	cs := newReadCountingStore(memory.New())
	t.Cleanup(func() { _ = cs.Close() })
	c := newWaitClient(t, cs)
	core.SetWaitPollInterval(c, time.Hour)
	ctx := context.Background()
	r, err := c.EnqueueRaw(ctx, "k", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ch := goWait(ctx, c, r.Job.ID)
	waitUntil(t, "the waiter waits", func() bool { return core.Waiting(c) == 1 })
	if _, err := c.CancelJob(ctx, r.Job.ID); err != nil {
		t.Fatal(err)
	}
	got := recv(t, ch)
	if got.err != nil || got.job.State != core.StateCancelled {
		t.Fatalf("Wait returned %+v, %v", got.job, got.err)
	}
	if n := cs.reads.Load(); n != 1 {
		t.Fatalf("%d reads, want 1 (the waiter's first)", n)
	}
}

// Many waiters cost the loop one read per run of close ids per round,
// not one per waiter: 300 waiters on 150 jobs in two runs cost two reads
// a round.
func TestWaitManyWaitersBoundedReads(t *testing.T) {
	mem := memory.New()
	cs := newReadCountingStore(mem)
	t.Cleanup(func() { _ = cs.Close() })
	c := newWaitClient(t, cs)
	const interval = 100 * time.Millisecond
	core.SetWaitPollInterval(c, interval)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	jobs := make([]core.InsertParams, 1000)
	for i := range jobs {
		jobs[i] = core.InsertParams{Kind: "k", Args: []byte(`{}`), Queue: core.DefaultQueue, MaxAttempts: 1, RunAt: time.Now()}
	}
	res, err := c.EnqueueMany(ctx, jobs)
	if err != nil {
		t.Fatal(err)
	}
	// Ids 1..100 (one run) and 700..749 (another), each waited twice.
	var ids []int64
	for i := 0; i < 100; i++ {
		ids = append(ids, res[i].Job.ID)
	}
	for i := 699; i < 749; i++ {
		ids = append(ids, res[i].Job.ID)
	}
	chans := make([]<-chan waitResult, 0, 2*len(ids))
	for _, id := range ids {
		chans = append(chans, goWait(ctx, c, id), goWait(ctx, c, id))
	}
	waitUntil(t, "every waiter waits", func() bool { return core.Waiting(c) == len(chans) })
	if n := cs.reads.Load(); n != int64(len(chans)) {
		t.Fatalf("%d reads before the first round, want one per waiter (%d)", n, len(chans))
	}
	cs.reads.Store(0)
	start := time.Now()
	time.Sleep(10 * interval)
	rounds := int64(time.Since(start)/interval) + 1
	if n := cs.reads.Load(); n > 2*rounds || n < 2 {
		t.Fatalf("%d reads in at most %d rounds, want 2 a round", n, rounds)
	}

	// Finish them all (another client's cancels: no notification reaches
	// a store wrapper that is no Notifier, so the poll must find them).
	other := newWaitClient(t, mem)
	for _, id := range ids {
		if _, err := other.CancelJob(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	for _, ch := range chans {
		got := recv(t, ch)
		if got.err != nil || got.job.State != core.StateCancelled {
			t.Fatalf("Wait returned %+v, %v", got.job, got.err)
		}
	}
	waitUntil(t, "the waiter loop ends", func() bool { return !core.WaitLoopRunning(c) })
}

// Jobs wider apart than WaitReadSpan are read apart, and a lone id
// costs a Get: each run is one read per round.
func TestWaitReadsRunsApart(t *testing.T) {
	mem := memory.New()
	cs := newReadCountingStore(mem)
	t.Cleanup(func() { _ = cs.Close() })
	c := newWaitClient(t, cs)
	const interval = 100 * time.Millisecond
	core.SetWaitPollInterval(c, interval)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	jobs := make([]core.InsertParams, 3*core.WaitReadSpan)
	for i := range jobs {
		jobs[i] = core.InsertParams{Kind: "k", Args: []byte(`{}`), Queue: core.DefaultQueue, MaxAttempts: 1, RunAt: time.Now()}
	}
	res, err := c.EnqueueMany(ctx, jobs)
	if err != nil {
		t.Fatal(err)
	}
	ids := []int64{res[0].Job.ID, res[core.WaitReadSpan].Job.ID, res[2*core.WaitReadSpan].Job.ID}
	for _, id := range ids {
		goWait(ctx, c, id)
	}
	waitUntil(t, "every waiter waits", func() bool { return core.Waiting(c) == len(ids) })
	cs.reads.Store(0)
	start := time.Now()
	time.Sleep(10 * interval)
	rounds := int64(time.Since(start)/interval) + 1
	if n := cs.reads.Load(); n > 3*rounds || n < 3 {
		t.Fatalf("%d reads in at most %d rounds, want 3 a round", n, rounds)
	}
}

func TestWaitTimeoutAndNotFound(t *testing.T) {
	st := memory.New()
	t.Cleanup(func() { _ = st.Close() })
	c := newWaitClient(t, st)
	ctx := context.Background()
	r, err := c.EnqueueRaw(ctx, "k", nil, nil)
	if err != nil {
		t.Fatal(err)
	}

	tctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err = c.Wait(tctx, r.Job.ID)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait past its deadline: %v, want context.DeadlineExceeded", err)
	}
	j, final, err := c.WaitTimeout(ctx, r.Job.ID, 100*time.Millisecond)
	if err != nil || final || j == nil || j.State != core.StateAvailable {
		t.Fatalf("WaitTimeout of a pending job: %+v, %v, %v", j, final, err)
	}
	j, final, err = c.WaitTimeout(ctx, r.Job.ID, 0)
	if err != nil || final || j.ID != r.Job.ID {
		t.Fatalf("WaitTimeout 0: %+v, %v, %v", j, final, err)
	}

	for _, id := range []int64{0, -1, r.Job.ID + 1000} {
		if _, err := c.Wait(ctx, id); !errors.Is(err, core.ErrNotFound) {
			t.Fatalf("Wait(%d): %v, want ErrNotFound", id, err)
		}
		if _, _, err := c.WaitTimeout(ctx, id, time.Second); !errors.Is(err, core.ErrNotFound) {
			t.Fatalf("WaitTimeout(%d): %v, want ErrNotFound", id, err)
		}
	}

	// Already final: answered by the first read.
	if _, err := c.CancelJob(ctx, r.Job.ID); err != nil {
		t.Fatal(err)
	}
	j, err = c.Wait(ctx, r.Job.ID)
	if err != nil || j.State != core.StateCancelled {
		t.Fatalf("Wait of a cancelled job: %+v, %v", j, err)
	}
	waitUntil(t, "the waiter loop ends", func() bool { return !core.WaitLoopRunning(c) })
}

// A job deleted while waited for answers ErrNotFound; a waiter whose
// ctx ends leaves and the loop ends with the last waiter.
func TestWaitDeletedJobAndLeavingWaiters(t *testing.T) {
	st := memory.New()
	t.Cleanup(func() { _ = st.Close() })
	c := newWaitClient(t, st)
	core.SetWaitPollInterval(c, 20*time.Millisecond)
	ctx := context.Background()
	a, _ := c.EnqueueRaw(ctx, "k", nil, nil)
	b, _ := c.EnqueueRaw(ctx, "k", nil, nil)
	chA := goWait(ctx, c, a.Job.ID)
	bctx, cancelB := context.WithCancel(ctx)
	chB := goWait(bctx, c, b.Job.ID)
	waitUntil(t, "both wait", func() bool { return core.Waiting(c) == 2 })
	if err := c.DeleteJob(ctx, a.Job.ID); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, chA); !errors.Is(got.err, core.ErrNotFound) {
		t.Fatalf("Wait of a deleted job: %+v, %v", got.job, got.err)
	}
	cancelB()
	if got := recv(t, chB); !errors.Is(got.err, context.Canceled) {
		t.Fatalf("Wait whose ctx ended: %v", got.err)
	}
	waitUntil(t, "the waiter loop ends", func() bool { return core.Waiting(c) == 0 && !core.WaitLoopRunning(c) })
}

// Stop answers every waiter with ErrClosed and refuses new ones; no
// goroutine of the waiter loop outlives it.
func TestWaitEndsWhenTheClientStops(t *testing.T) {
	st := memory.New()
	t.Cleanup(func() { _ = st.Close() })
	c := newWaitClient(t, st)
	ctx := context.Background()
	r, _ := c.EnqueueRaw(ctx, "k", nil, nil)
	var wg sync.WaitGroup
	errs := make([]error, 20)
	for i := range errs {
		wg.Add(1)
		go func() { defer wg.Done(); _, errs[i] = c.Wait(ctx, r.Job.ID) }()
	}
	waitUntil(t, "every waiter waits", func() bool { return core.Waiting(c) == len(errs) })
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if core.WaitLoopRunning(c) {
		t.Fatal("the waiter loop runs after Stop")
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, core.ErrClosed) {
			t.Fatalf("waiter %d: %v, want ErrClosed", i, err)
		}
	}
	if _, err := c.Wait(ctx, r.Job.ID); !errors.Is(err, core.ErrClosed) {
		t.Fatalf("Wait after Stop: %v, want ErrClosed", err)
	}
}

// On every store: waiters on a run of jobs (read with one List a round)
// and on a lone job (a Get) see another client's outcomes, and a job
// deleted meanwhile answers ErrNotFound.
func TestWaitOnEveryStore(t *testing.T) {
	teststores.Run(t, func(t *testing.T, st contract.Store) {
		h := core.NewHandlers()
		h.HandleRaw("ok", func(ctx context.Context, j *core.Job) error {
			return core.RecordRawResult(ctx, j.Args)
		})
		h.HandleRaw("bad", func(ctx context.Context, j *core.Job) error { return errors.New("bad luck") })
		waiter := newWaitClient(t, st)
		core.SetWaitPollInterval(waiter, 50*time.Millisecond)
		ctx := context.Background()
		var ids []int64
		for i := range 6 {
			kind := "ok"
			if i == 2 {
				kind = "bad"
			}
			r, err := waiter.EnqueueRaw(ctx, kind, []byte(fmt.Sprintf(`{"n":%d}`, i)), &core.Options{MaxAttempts: 1, Queue: "work"})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, r.Job.ID)
		}
		gone, err := waiter.EnqueueRaw(ctx, "ok", nil, &core.Options{Queue: "idle"})
		if err != nil {
			t.Fatal(err)
		}
		chans := map[int64]<-chan waitResult{}
		for _, id := range append(ids, gone.Job.ID) {
			chans[id] = goWait(ctx, waiter, id)
		}
		waitUntil(t, "every waiter waits", func() bool { return core.Waiting(waiter) == len(chans) })
		if err := waiter.DeleteJob(ctx, gone.Job.ID); err != nil {
			t.Fatal(err)
		}
		if got := recv(t, chans[gone.Job.ID]); !errors.Is(got.err, core.ErrNotFound) {
			t.Fatalf("deleted job: %+v, %v", got.job, got.err)
		}
		worker, err := core.NewClient(st, core.Config{
			Queues:   map[string]core.QueueConfig{"work": {MaxWorkers: 4}},
			Handlers: h, Logger: quietLogger(), PollInterval: 20 * time.Millisecond, MaintenanceInterval: -1,
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := worker.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = worker.Stop(context.Background()) })
		for i, id := range ids {
			got := recv(t, chans[id])
			if got.err != nil {
				t.Fatalf("job %d: %v", id, got.err)
			}
			if i == 2 {
				if got.job.State != core.StateDiscarded || len(got.job.Errors) != 1 || got.job.Errors[0].Error != "bad luck" {
					t.Fatalf("job %d: %+v", id, got.job)
				}
				continue
			}
			if got.job.State != core.StateCompleted || string(got.job.Result) != fmt.Sprintf(`{"n": %d}`, i) && string(got.job.Result) != fmt.Sprintf(`{"n":%d}`, i) {
				t.Fatalf("job %d: %+v result %s", id, got.job, got.job.Result)
			}
		}
	})
}

// A remote worker's final report through this client (RemoteWorkers, as
// the HTTP API applies it) wakes the waiters at once, as the completer
// does.
func TestWaitWakesOnRemoteReport(t *testing.T) {
	c, rw, _ := remoteClient(t)
	core.SetWaitPollInterval(c, time.Hour)
	ctx := context.Background()
	w := core.WorkerInfo{ID: "w1", Queues: []string{core.DefaultQueue}, StartedAt: time.Now(), HeartbeatAt: time.Now()}
	if err := rw.Register(ctx, w); err != nil {
		t.Fatal(err)
	}
	j := claimOne(t, c, rw, w, nil)
	ch := goWait(ctx, c, j.ID)
	waitUntil(t, "the waiter waits", func() bool { return core.Waiting(c) == 1 })
	res, err := rw.Report(ctx, time.Now(), []core.Report{{Job: j, Verdict: core.Verdict{Kind: contract.OutcomeComplete, Result: []byte(`7`)}}})
	if err != nil || !res[0].Applied {
		t.Fatalf("Report: %+v, %v", res, err)
	}
	got := recv(t, ch)
	if got.err != nil || got.job.State != core.StateCompleted || string(got.job.Result) != `7` {
		t.Fatalf("Wait returned %+v, %v", got.job, got.err)
	}
}

// On a store that notifies finishes (contract.FinishNotifier), a waiter
// whose loop would poll only once an hour still sees another client's
// completion and an admin's delete at once: the notification wakes it.
func TestWaitWakesOnNotifiedFinish(t *testing.T) {
	teststores.Run(t, func(t *testing.T, st contract.Store) {
		if fn, ok := st.(contract.FinishNotifier); !ok || !fn.NotifiesFinish() {
			t.Skip("the store does not notify finishes")
		}
		h := core.NewHandlers()
		h.HandleRaw("ok", func(ctx context.Context, j *core.Job) error { return nil })
		waiter := newWaitClient(t, st)
		core.SetWaitPollInterval(waiter, time.Hour)
		ctx := context.Background()
		done, err := waiter.EnqueueRaw(ctx, "ok", nil, &core.Options{Queue: "work"})
		if err != nil {
			t.Fatal(err)
		}
		gone, err := waiter.EnqueueRaw(ctx, "ok", nil, &core.Options{Queue: "idle"})
		if err != nil {
			t.Fatal(err)
		}
		doneCh, goneCh := goWait(ctx, waiter, done.Job.ID), goWait(ctx, waiter, gone.Job.ID)
		waitUntil(t, "both waiters wait", func() bool { return core.Waiting(waiter) == 2 })
		// The waiter loop's first full round (when its listener starts)
		// has found neither job final; everything after that comes from
		// notifications.
		time.Sleep(300 * time.Millisecond)
		other, err := core.NewClient(st, core.Config{
			Queues:   map[string]core.QueueConfig{"work": {MaxWorkers: 1}},
			Handlers: h, Logger: quietLogger(), PollInterval: 20 * time.Millisecond, MaintenanceInterval: -1,
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := other.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = other.Stop(context.Background()) })
		if got := recv(t, doneCh); got.err != nil || got.job.State != core.StateCompleted {
			t.Fatalf("job completed by another client: %+v, %v", got.job, got.err)
		}
		if err := other.DeleteJob(ctx, gone.Job.ID); err != nil {
			t.Fatal(err)
		}
		if got := recv(t, goneCh); !errors.Is(got.err, core.ErrNotFound) {
			t.Fatalf("job deleted by another client: %+v, %v", got.job, got.err)
		}
	})
}

// A job already moved to the store's archive is final: Wait and
// WaitTimeout return it from there instead of ErrNotFound.
func TestWaitFindsArchivedJob(t *testing.T) {
	st := memory.New()
	c := newWaitClient(t, st)
	ctx := context.Background()
	r, err := c.EnqueueRaw(ctx, "k", nil, &core.Options{Queue: "q"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	claimed, err := st.Claim(ctx, contract.ClaimParams{Queue: "q", WorkerID: "w", Limit: 1, Now: now, LeaseUntil: now.Add(time.Minute)})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	j := claimed[0]
	if _, err := st.Finish(ctx, []contract.Outcome{{JobID: j.ID, WorkerID: j.WorkerID, ClaimSeq: j.ClaimSeq, Attempt: j.Attempt, Kind: contract.OutcomeComplete, At: now}}); err != nil {
		t.Fatal(err)
	}
	if n, err := st.Archive(ctx, contract.StateCompleted, now.Add(time.Second), 10); err != nil || n != 1 {
		t.Fatalf("Archive: %d, %v", n, err)
	}
	got := recv(t, goWait(ctx, c, r.Job.ID))
	if got.err != nil || got.job.State != core.StateCompleted || got.job.ID != r.Job.ID {
		t.Fatalf("Wait on an archived job: %+v, %v", got.job, got.err)
	}
	if j, final, err := c.WaitTimeout(ctx, r.Job.ID, 0); err != nil || !final || j.State != core.StateCompleted {
		t.Fatalf("WaitTimeout on an archived job: %+v, %v, %v", j, final, err)
	}
}
