package core_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/internal/syncbuf"
	"github.com/backlogq/backlog/store/memory"
)

// cutStore is a real store behind a switch: while down, every call fails as
// a call to an unreachable database would, and nothing reaches the store.
type cutStore struct {
	contract.Store
	down atomic.Bool
}

var errCut = errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")

func (s *cutStore) err() error {
	if s.down.Load() {
		return errCut
	}
	return nil
}

func (s *cutStore) Insert(ctx context.Context, now time.Time, jobs []core.InsertParams) ([]core.InsertResult, error) {
	if err := s.err(); err != nil {
		return nil, err
	}
	return s.Store.Insert(ctx, now, jobs)
}

func (s *cutStore) Claim(ctx context.Context, p contract.ClaimParams) ([]*core.Job, error) {
	if err := s.err(); err != nil {
		return nil, err
	}
	return s.Store.Claim(ctx, p)
}

func (s *cutStore) Finish(ctx context.Context, o []contract.Outcome) ([]contract.FinishResult, error) {
	if err := s.err(); err != nil {
		return nil, err
	}
	return s.Store.Finish(ctx, o)
}

func (s *cutStore) ExtendLeases(ctx context.Context, w string, l []contract.Lease, until time.Time) (int, error) {
	if err := s.err(); err != nil {
		return 0, err
	}
	return s.Store.ExtendLeases(ctx, w, l, until)
}

func (s *cutStore) Rescue(ctx context.Context, now time.Time, limit int, d contract.RescueFunc) ([]*core.Job, error) {
	if err := s.err(); err != nil {
		return nil, err
	}
	return s.Store.Rescue(ctx, now, limit, d)
}

func (s *cutStore) RescueWorkers(ctx context.Context, hb, now time.Time, limit int, d contract.RescueFunc) ([]*core.Job, error) {
	if err := s.err(); err != nil {
		return nil, err
	}
	return s.Store.RescueWorkers(ctx, hb, now, limit, d)
}

func (s *cutStore) DiscardExpired(ctx context.Context, now time.Time, limit int) (int, error) {
	if err := s.err(); err != nil {
		return 0, err
	}
	return s.Store.DiscardExpired(ctx, now, limit)
}

func (s *cutStore) RegisterWorker(ctx context.Context, w core.WorkerInfo) error {
	if err := s.err(); err != nil {
		return err
	}
	return s.Store.RegisterWorker(ctx, w)
}

func (s *cutStore) Get(ctx context.Context, id int64) (*core.Job, error) {
	if err := s.err(); err != nil {
		return nil, err
	}
	return s.Store.Get(ctx, id)
}

func (s *cutStore) List(ctx context.Context, p core.ListParams) ([]*core.Job, error) {
	if err := s.err(); err != nil {
		return nil, err
	}
	return s.Store.List(ctx, p)
}

// leaseClient starts a client over st with short leases (400 ms, renewed
// every 100 ms) running handler fn for kind "k".
func leaseClient(t *testing.T, st contract.Store, fn core.HandlerFunc, mod func(*core.Config)) *core.Client {
	t.Helper()
	h := core.NewHandlers()
	h.HandleRaw("k", fn)
	cfg := core.Config{
		Queues:              map[string]core.QueueConfig{core.DefaultQueue: {MaxWorkers: 4}},
		Handlers:            h,
		Logger:              quietLogger(),
		PollInterval:        50 * time.Millisecond,
		LeaseDuration:       400 * time.Millisecond,
		HeartbeatInterval:   100 * time.Millisecond,
		MaintenanceInterval: -1,
	}
	if mod != nil {
		mod(&cfg)
	}
	c, err := core.NewClient(st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Stop(ctx)
	})
	return c
}

// TestHeartbeatHandsBackClaimWhoseReplyWasLost: a claim that committed in
// the store but whose answer never reached the worker (connection reset,
// server killed) must not be kept alive by the worker's heartbeats; the
// worker hands it back without using an attempt.
func TestHeartbeatHandsBackClaimWhoseReplyWasLost(t *testing.T) {
	st := memory.New()
	c := leaseClient(t, st, func(context.Context, *core.Job) error { return nil }, nil)
	ctx := context.Background()
	now := time.Now().UTC()
	// A queue the client does not run, so only the lost claim holds the job.
	p, _ := core.NewInsertRaw("k", nil, &core.Options{Queue: "elsewhere"}, now)
	res, err := st.Insert(ctx, now, []core.InsertParams{p})
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.Claim(ctx, contract.ClaimParams{Queue: "elsewhere", WorkerID: c.WorkerID(), Limit: 1, Now: now, LeaseUntil: now.Add(time.Hour)})
	if err != nil || len(got) != 1 {
		t.Fatalf("claim: %v %v", got, err)
	}
	j := waitState(t, st, res[0].Job.ID, core.StateAvailable)
	if j.Attempt != 0 || len(j.Errors) != 1 || j.Errors[0].Cause != core.CauseClaimLost || !j.RunAt.Equal(res[0].Job.RunAt) {
		t.Fatalf("the unknown claim was handed back as %+v; want available at attempt 0, its own run_at, one claim_lost entry", j)
	}
}

// TestOutageLongerThanLeaseRerunsNothingFinished: a handler finishes while
// the store is unreachable for longer than the lease; when the store comes
// back, another node's maintenance must not rescue the job before the
// worker's outcome lands, so the job runs exactly once.
func TestOutageLongerThanLeaseRerunsNothingFinished(t *testing.T) {
	st := &cutStore{Store: memory.New()}
	release := make(chan struct{})
	var runs atomic.Int32
	var logs syncbuf.Buffer
	c := leaseClient(t, st, func(ctx context.Context, j *core.Job) error {
		runs.Add(1)
		<-release
		return nil
	}, func(cfg *core.Config) { cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	var rescued atomic.Int32
	other, err := core.NewClient(st, core.Config{Logger: quietLogger(), HeartbeatInterval: 100 * time.Millisecond, LeaseDuration: 400 * time.Millisecond,
		Observers: []core.Observer{core.ObserverFunc(func(e core.Event) {
			if e.Kind == core.EventJobsRescued {
				rescued.Add(1)
			}
		})}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r, err := c.EnqueueRaw(ctx, "k", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, st, r.Job.ID, core.StateRunning)
	for runs.Load() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	st.down.Store(true)
	close(release) // the handler succeeds; its outcome cannot be written
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) { // 2.5 leases of outage; every node sees it
		other.Maintain(ctx)
		time.Sleep(50 * time.Millisecond)
	}
	st.down.Store(false)
	for range 10 { // maintenance keeps running on the other node
		other.Maintain(ctx)
		time.Sleep(20 * time.Millisecond)
	}
	j := waitState(t, st, r.Job.ID, core.StateCompleted)
	if runs.Load() != 1 || rescued.Load() != 0 || len(j.Errors) != 0 {
		t.Fatalf("after the outage: %d runs, %d rescues, errors %+v; want the finished job completed once, never rescued", runs.Load(), rescued.Load(), j.Errors)
	}
	// The worker said, once, that the waiting outcome's lease could not be
	// renewed (the evidence the fault suite reads when a stall outlasts
	// a lease), and stopped no handler.
	if n := strings.Count(logs.String(), "lease could not be renewed while the outcome waits"); n != 1 {
		t.Errorf("the outcome's unrenewed lease was warned about %d times, want once; log:\n%s", n, logs.String())
	}
	if strings.Contains(logs.String(), "stopping the handler") {
		t.Errorf("a returned handler was stopped; log:\n%s", logs.String())
	}
}

// TestHandlerStoppedBeforeUnrenewedLeaseRunsOut: a worker cut off from the
// store stops its handler before the lease it cannot renew runs out (no
// handler outlives its lease), and hands the job back without using an
// attempt once the store answers.
func TestHandlerStoppedBeforeUnrenewedLeaseRunsOut(t *testing.T) {
	st := &cutStore{Store: memory.New()}
	stopped := make(chan error, 1)
	var leaseAt atomic.Int64
	var stoppedAt time.Time
	c := leaseClient(t, st, func(ctx context.Context, j *core.Job) error {
		if leaseAt.Load() != 0 {
			return nil // a later run after the hand-back
		}
		leaseAt.Store(1)
		<-ctx.Done()
		stoppedAt = time.Now()
		stopped <- context.Cause(ctx)
		return ctx.Err()
	}, nil)
	ctx := context.Background()
	r, err := c.EnqueueRaw(ctx, "k", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, st, r.Job.ID, core.StateRunning)
	for leaseAt.Load() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	st.down.Store(true)
	cut := time.Now()
	var cause error
	select {
	case cause = <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("the handler kept running while its lease could not be renewed")
	}
	// The store holds the last lease the worker renewed; the handler must
	// have stopped before it ran out.
	held, err := st.Store.Get(ctx, r.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !stoppedAt.Before(held.LeaseUntil) {
		t.Fatalf("the handler stopped at %s (%s after the cut), not before its lease ran out at %s", stoppedAt.UTC(), stoppedAt.Sub(cut), held.LeaseUntil)
	}
	if !errors.Is(cause, core.ErrLeaseLost) {
		t.Fatalf("handler context cause %v; want one wrapping core.ErrLeaseLost", cause)
	}
	st.down.Store(false)
	j := waitState(t, st, r.Job.ID, core.StateCompleted) // handed back, then run again
	if len(j.Errors) != 1 || j.Errors[0].Cause != core.CauseLeaseUnrenewed || j.Attempt != 1 {
		t.Fatalf("job after the outage: attempt %d errors %+v; want the hand-back entry (lease_unrenewed) and the attempt given back", j.Attempt, j.Errors)
	}
}

// TestHandlerFinishingAsUnrenewedLeaseStopsItIsNotRerun: a handler that
// returns nil after the worker stopped it for a lease it could not renew
// (it finished as the stop came, or it does not watch its context) did
// the job's work; its completion is written once the store answers, and
// the job is not handed back to run again (a finished job never re-runs).
func TestHandlerFinishingAsUnrenewedLeaseStopsItIsNotRerun(t *testing.T) {
	st := &cutStore{Store: memory.New()}
	var runs atomic.Int32
	c := leaseClient(t, st, func(ctx context.Context, j *core.Job) error {
		if runs.Add(1) > 1 {
			return nil
		}
		<-ctx.Done() // the work ends just as the stop comes
		return nil
	}, nil)
	ctx := context.Background()
	r, err := c.EnqueueRaw(ctx, "k", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, st, r.Job.ID, core.StateRunning)
	for runs.Load() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	st.down.Store(true)
	time.Sleep(time.Second) // past the stop: the lease is 400 ms
	st.down.Store(false)
	j := waitState(t, st, r.Job.ID, core.StateCompleted)
	time.Sleep(300 * time.Millisecond) // a hand-back would have re-run it by now
	if n := runs.Load(); n != 1 || len(j.Errors) != 0 || j.Attempt != 1 {
		t.Fatalf("after the outage: %d runs, attempt %d, errors %+v; want the finished job completed once, never handed back", n, j.Attempt, j.Errors)
	}
}

func (s *cutStore) Prune(ctx context.Context, state core.State, before time.Time, limit int) (int, error) {
	if err := s.err(); err != nil {
		return 0, err
	}
	return s.Store.Prune(ctx, state, before, limit)
}

func (s *cutStore) RemoveDeadWorkers(ctx context.Context, before time.Time) (int, error) {
	if err := s.err(); err != nil {
		return 0, err
	}
	return s.Store.RemoveDeadWorkers(ctx, before)
}

// cutHistoryStore is a cutStore that keeps a queue history, whose calls
// fail as well while the store is down.
type cutHistoryStore struct {
	*cutStore
	h contract.QueueHistory
}

func (s cutHistoryStore) AddQueueHistory(ctx context.Context, samples []contract.QueueSample) error {
	if err := s.err(); err != nil {
		return err
	}
	return s.h.AddQueueHistory(ctx, samples)
}

func (s cutHistoryStore) QueueHistory(ctx context.Context, queue string, since time.Time) ([]contract.QueueBucket, error) {
	if err := s.err(); err != nil {
		return nil, err
	}
	return s.h.QueueHistory(ctx, queue, since)
}

func (s cutHistoryStore) QueueTotals(ctx context.Context) ([]contract.QueueTotals, error) {
	if err := s.err(); err != nil {
		return nil, err
	}
	return s.h.QueueTotals(ctx)
}

func (s cutHistoryStore) DueJobs(ctx context.Context, now time.Time) ([]contract.QueueDue, error) {
	if err := s.err(); err != nil {
		return nil, err
	}
	return s.h.DueJobs(ctx, now)
}

func (s cutHistoryStore) PruneQueueHistory(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := s.err(); err != nil {
		return 0, err
	}
	return s.h.PruneQueueHistory(ctx, before, limit)
}

// TestOutageIsNotReportedOverWhileItLasts: a maintenance round whose
// queue history had nothing to write made no store call, yet counted as
// one that succeeded, so a node logged "store reachable again" in the
// middle of an outage (and the outage's length in that line was short).
// While the store stays down, no round may say it is back.
func TestOutageIsNotReportedOverWhileItLasts(t *testing.T) {
	mem := memory.New()
	st := cutHistoryStore{cutStore: &cutStore{Store: mem}, h: mem}
	var logs syncbuf.Buffer
	// Not started: the rounds below are the only ones. A maintenance
	// interval keeps the queue history on.
	c, err := core.NewClient(st, core.Config{MaintenanceInterval: time.Hour,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c.Maintain(ctx) // writes the first gauge sample: the next is not due for a while
	st.down.Store(true)
	for range 3 {
		c.Maintain(ctx)
	}
	out := logs.String()
	if !strings.Contains(out, "store unreachable") {
		t.Fatalf("the outage was not logged:\n%s", out)
	}
	if strings.Contains(out, "reachable again") {
		t.Fatalf("a node said the store was reachable again while it was down:\n%s", out)
	}
	st.down.Store(false)
	c.Maintain(ctx)
	if !strings.Contains(logs.String(), "reachable again") {
		t.Fatalf("the end of the outage was not logged:\n%s", logs.String())
	}
}
