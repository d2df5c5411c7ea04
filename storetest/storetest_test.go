package storetest_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/memory"
	"github.com/backlogq/backlog/storetest"
)

// Broken stores: the memory store with one rule of the contract violated.
// The suite must fail each of them at the named subtest.

// silentNotifier declares contract.Notifier but never delivers.
type silentNotifier struct{ *memory.Store }

func (silentNotifier) Listen(ctx context.Context) (<-chan contract.Notification, error) {
	ch := make(chan contract.Notification)
	go func() { <-ctx.Done(); close(ch) }()
	return ch, nil
}

// declaresTxInsert declares contract.TxInserter; run without Factory.BeginTx.
type declaresTxInsert struct{ *memory.Store }

func (declaresTxInsert) InsertTx(context.Context, any, time.Time, []contract.InsertParams) ([]contract.InsertResult, error) {
	return nil, contract.ErrUnsupported
}

// clockSkewed claims as if it were an hour later.
type clockSkewed struct{ *memory.Store }

func (s clockSkewed) Claim(ctx context.Context, p contract.ClaimParams) ([]*contract.Job, error) {
	p.Now = p.Now.Add(time.Hour)
	return s.Store.Claim(ctx, p)
}

// localTimes returns times in a non-UTC zone.
type localTimes struct{ *memory.Store }

func (s localTimes) Get(ctx context.Context, id int64) (*contract.Job, error) {
	j, err := s.Store.Get(ctx, id)
	if j != nil {
		j.CreatedAt = j.CreatedAt.In(time.FixedZone("CET", 3600))
	}
	return j, err
}

// racySettings gets or creates a setting by "select, then insert", with
// a pause in between, as the contract forbids.
type racySettings struct {
	*memory.Store
	mu sync.Mutex
	m  map[string][]byte
}

func (s *racySettings) GetOrCreateSetting(ctx context.Context, key string, value []byte) ([]byte, bool, error) {
	s.mu.Lock()
	v, ok := s.m[key]
	s.mu.Unlock()
	if ok {
		return v, false, nil
	}
	time.Sleep(time.Millisecond)
	s.mu.Lock()
	s.m[key] = value
	s.mu.Unlock()
	return value, true, nil
}

func (s *racySettings) Setting(ctx context.Context, key string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.m[key]; ok {
		return v, nil
	}
	return nil, contract.ErrNotFound
}

// workerScan finds one worker by id in the wrong place: ids compared
// case-insensitively.
type workerScan struct{ *memory.Store }

func (s workerScan) Worker(ctx context.Context, id string) (contract.WorkerInfo, error) {
	ws, err := s.Workers(ctx)
	if err != nil {
		return contract.WorkerInfo{}, err
	}
	for _, w := range ws {
		if strings.EqualFold(w.ID, id) {
			return w, nil
		}
	}
	return contract.WorkerInfo{}, contract.ErrNotFound
}

// dropsFingerprints keeps no UniqueFingerprint with its holds.
type dropsFingerprints struct{ *memory.Store }

func (s dropsFingerprints) Insert(ctx context.Context, now time.Time, jobs []contract.InsertParams) ([]contract.InsertResult, error) {
	cp := make([]contract.InsertParams, len(jobs))
	for i, p := range jobs {
		p.UniqueFingerprint = ""
		cp[i] = p
	}
	return s.Store.Insert(ctx, now, cp)
}

// filteredListen is the memory store's Listen with the notifications drop
// reports true for left out.
func filteredListen(ctx context.Context, s *memory.Store, drop func(contract.Notification) bool) (<-chan contract.Notification, error) {
	in, err := s.Listen(ctx)
	if err != nil {
		return nil, err
	}
	out := make(chan contract.Notification, 64)
	go func() {
		defer close(out)
		for n := range in {
			if !drop(n) {
				out <- n
			}
		}
	}()
	return out, nil
}

// cancelNotifiesRunningOnly sends a NotifyCancel only for jobs that were
// running when cancelled.
type cancelNotifiesRunningOnly struct {
	*memory.Store
	mu    sync.Mutex
	quiet map[int64]bool
}

func (s *cancelNotifiesRunningOnly) Cancel(ctx context.Context, id int64, now time.Time) (*contract.Job, error) {
	if j, err := s.Store.Get(ctx, id); err == nil && j.State != contract.StateRunning {
		s.mu.Lock()
		s.quiet[id] = true
		s.mu.Unlock()
	}
	return s.Store.Cancel(ctx, id, now)
}

func (s *cancelNotifiesRunningOnly) Listen(ctx context.Context) (<-chan contract.Notification, error) {
	return filteredListen(ctx, s.Store, func(n contract.Notification) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return n.Kind == contract.NotifyCancel && s.quiet[n.JobID]
	})
}

// notifiesFirstQueueOnly notifies, for a batch, only the first queue that
// got due jobs.
type notifiesFirstQueueOnly struct {
	*memory.Store
	mu   sync.Mutex
	skip map[string]int // insert notifications still to drop, per queue
}

func (s *notifiesFirstQueueOnly) Insert(ctx context.Context, now time.Time, jobs []contract.InsertParams) ([]contract.InsertResult, error) {
	var due []string
	for _, p := range jobs {
		if !p.RunAt.After(now) && !slices.Contains(due, p.Queue) {
			due = append(due, p.Queue)
		}
	}
	s.mu.Lock()
	for _, q := range due[min(1, len(due)):] {
		s.skip[q]++
	}
	s.mu.Unlock()
	return s.Store.Insert(ctx, now, jobs)
}

func (s *notifiesFirstQueueOnly) Listen(ctx context.Context) (<-chan contract.Notification, error) {
	return filteredListen(ctx, s.Store, func(n contract.Notification) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		if n.Kind == contract.NotifyInsert && s.skip[n.Queue] > 0 {
			s.skip[n.Queue]--
			return true
		}
		return false
	})
}

// eagerTx is the transaction of eagerTxInsert: the ids it inserted.
type eagerTx struct{ ids []int64 }

// eagerTxInsert inserts (and notifies) at once and deletes the jobs on
// rollback: its notification does not wait for the commit.
type eagerTxInsert struct{ *memory.Store }

func (s eagerTxInsert) InsertTx(ctx context.Context, tx any, now time.Time, jobs []contract.InsertParams) ([]contract.InsertResult, error) {
	t, ok := tx.(*eagerTx)
	if !ok {
		return nil, contract.ErrUnsupported
	}
	res, err := s.Store.Insert(ctx, now, jobs)
	for _, r := range res {
		if !r.Duplicate {
			t.ids = append(t.ids, r.Job.ID)
		}
	}
	return res, err
}

func beginEagerTx(t testing.TB, st contract.Store) (any, func() error, func() error) {
	s := st.(eagerTxInsert)
	tx := &eagerTx{}
	rollback := func() error {
		for _, id := range tx.ids {
			if err := s.Store.Delete(context.Background(), id); err != nil {
				return err
			}
		}
		return nil
	}
	return tx, func() error { return nil }, rollback
}

// claimLimitZeroIsEmpty claims nothing, without an error, for Limit < 1.
type claimLimitZeroIsEmpty struct{ *memory.Store }

func (s claimLimitZeroIsEmpty) Claim(ctx context.Context, p contract.ClaimParams) ([]*contract.Job, error) {
	if p.Limit < 1 {
		return nil, nil
	}
	return s.Store.Claim(ctx, p)
}

// pruneNonFinalIsEmpty prunes nothing, without an error, for a state that
// is not final.
type pruneNonFinalIsEmpty struct{ *memory.Store }

func (s pruneNonFinalIsEmpty) Prune(ctx context.Context, state contract.State, before time.Time, limit int) (int, error) {
	if !state.Final() {
		return 0, nil
	}
	return s.Store.Prune(ctx, state, before, limit)
}

// archiveDeletes archives by pruning: the jobs leave, but never reach
// the archive.
type archiveDeletes struct{ *memory.Store }

func (s archiveDeletes) Archive(ctx context.Context, state contract.State, before time.Time, limit int) (int, error) {
	return s.Store.Prune(ctx, state, before, limit)
}

// archiveDropsHistory reads archived jobs without their errors history
// and result.
type archiveDropsHistory struct{ *memory.Store }

func (s archiveDropsHistory) GetArchived(ctx context.Context, id int64) (*contract.Job, error) {
	j, err := s.Store.GetArchived(ctx, id)
	if j != nil {
		j.Errors, j.Result = nil, nil
	}
	return j, err
}

func (s archiveDropsHistory) ListArchived(ctx context.Context, p contract.ListParams) ([]*contract.Job, error) {
	jobs, err := s.Store.ListArchived(ctx, p)
	for _, j := range jobs {
		j.Errors, j.Result = nil, nil
	}
	return jobs, err
}

// finishSkipsUnknownKinds applies the outcomes it knows and reports the
// others as not applied.
type finishSkipsUnknownKinds struct{ *memory.Store }

func (s finishSkipsUnknownKinds) Finish(ctx context.Context, outcomes []contract.Outcome) ([]contract.FinishResult, error) {
	known := func(k contract.OutcomeKind) bool {
		switch k {
		case contract.OutcomeComplete, contract.OutcomeRetry, contract.OutcomeSnooze, contract.OutcomeContinue, contract.OutcomeCancel, contract.OutcomeDiscard:
			return true
		}
		return false
	}
	var apply []contract.Outcome
	for _, o := range outcomes {
		if known(o.Kind) {
			apply = append(apply, o)
		}
	}
	got, err := s.Store.Finish(ctx, apply)
	if err != nil {
		return nil, err
	}
	res := make([]contract.FinishResult, len(outcomes))
	k := 0
	for i, o := range outcomes {
		res[i] = contract.FinishResult{JobID: o.JobID}
		if known(o.Kind) {
			res[i] = got[k]
			k++
		}
	}
	return res, nil
}

// rescueInOrder hands back the jobs Rescue or RescueWorkers select, in the
// order given, with fenced finishes of the memory store.
func rescueInOrder(ctx context.Context, s *memory.Store, jobs []*contract.Job, limit int, lastSeen func(*contract.Job) time.Time, decide contract.RescueFunc) ([]*contract.Job, error) {
	var out []*contract.Job
	for _, j := range jobs {
		if len(out) == limit {
			break
		}
		o := decide(j, lastSeen(j))
		o.JobID, o.WorkerID, o.ClaimSeq = j.ID, j.WorkerID, j.ClaimSeq
		res, err := s.Finish(ctx, []contract.Outcome{o})
		if err != nil {
			return nil, err
		}
		if res[0].Applied {
			now, err := s.Get(ctx, j.ID)
			if err != nil {
				return nil, err
			}
			out = append(out, now)
		}
	}
	return out, nil
}

// rescueByID rescues expired leases in id order instead of oldest lease
// first.
type rescueByID struct{ *memory.Store }

func (s rescueByID) Rescue(ctx context.Context, now time.Time, limit int, decide contract.RescueFunc) ([]*contract.Job, error) {
	running, err := s.List(ctx, contract.ListParams{States: []contract.State{contract.StateRunning}, Limit: 10000})
	if err != nil {
		return nil, err
	}
	running = slices.DeleteFunc(running, func(j *contract.Job) bool { return !j.LeaseUntil.Before(now) })
	return rescueInOrder(ctx, s.Store, running, limit, func(j *contract.Job) time.Time { return j.LeaseUntil }, decide)
}

// rescueWorkersByWorker rescues the jobs of dead workers worker by worker,
// in worker id order, instead of in job id order.
type rescueWorkersByWorker struct{ *memory.Store }

func (s rescueWorkersByWorker) RescueWorkers(ctx context.Context, heartbeatBefore, now time.Time, limit int, decide contract.RescueFunc) ([]*contract.Job, error) {
	ws, err := s.Workers(ctx)
	if err != nil {
		return nil, err
	}
	seen := map[string]time.Time{}
	var jobs []*contract.Job
	for _, w := range ws {
		if !w.HeartbeatAt.Before(heartbeatBefore) {
			continue
		}
		seen[w.ID] = w.HeartbeatAt
		held, err := s.List(ctx, contract.ListParams{States: []contract.State{contract.StateRunning}, WorkerID: w.ID, Limit: 10000})
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, held...)
	}
	return rescueInOrder(ctx, s.Store, jobs, limit, func(j *contract.Job) time.Time { return seen[j.WorkerID] }, decide)
}

// unsortedRateStates returns the rate states in reverse order.
type unsortedRateStates struct{ *memory.Store }

func (s unsortedRateStates) QueueRateStates(ctx context.Context, queue string, now time.Time) ([]contract.RateState, error) {
	st, err := s.Store.QueueRateStates(ctx, queue, now)
	slices.Reverse(st)
	return st, err
}

// pruneKeepsHolds keeps, for ever, the unique keys of the jobs it prunes.
type pruneKeepsHolds struct {
	*memory.Store
	mu   sync.Mutex
	kept map[[3]string]int64 // queue, kind, key → pruned holder
}

func (s *pruneKeepsHolds) Prune(ctx context.Context, state contract.State, before time.Time, limit int) (int, error) {
	all, err := s.List(ctx, contract.ListParams{States: []contract.State{state}, Limit: 10000})
	if err != nil {
		return 0, err
	}
	n, err := s.Store.Prune(ctx, state, before, limit)
	for _, j := range all {
		if _, gone := s.Store.Get(ctx, j.ID); j.UniqueKey != "" && errors.Is(gone, contract.ErrNotFound) {
			s.mu.Lock()
			s.kept[[3]string{j.Queue, j.Kind, j.UniqueKey}] = j.ID
			s.mu.Unlock()
		}
	}
	return n, err
}

func (s *pruneKeepsHolds) Insert(ctx context.Context, now time.Time, jobs []contract.InsertParams) ([]contract.InsertResult, error) {
	res, err := s.Store.Insert(ctx, now, jobs)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, p := range jobs {
		if id, ok := s.kept[[3]string{p.Queue, p.Kind, p.UniqueKey}]; ok && err == nil && p.UniqueKey != "" {
			_ = s.Store.Delete(ctx, res[i].Job.ID)
			res[i] = contract.InsertResult{Job: &contract.Job{ID: id, Queue: p.Queue, Kind: p.Kind, UniqueKey: p.UniqueKey}, Duplicate: true}
		}
	}
	return res, err
}

// closeKeepsServing closes nothing: the store stays usable after Close.
type closeKeepsServing struct{ *memory.Store }

func (closeKeepsServing) Close() error { return nil }

// extendKeepsZone returns the lease ExtendLeases set in the location it
// was handed.
type extendKeepsZone struct {
	*memory.Store
	mu    sync.Mutex
	until map[int64]time.Time
}

func (s *extendKeepsZone) ExtendLeases(ctx context.Context, workerID string, leases []contract.Lease, until time.Time) (int, error) {
	s.mu.Lock()
	for _, l := range leases {
		s.until[l.JobID] = until
	}
	s.mu.Unlock()
	return s.Store.ExtendLeases(ctx, workerID, leases, until)
}

func (s *extendKeepsZone) Get(ctx context.Context, id int64) (*contract.Job, error) {
	j, err := s.Store.Get(ctx, id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if u, ok := s.until[id]; ok && j != nil && j.LeaseUntil.Equal(u) {
		j.LeaseUntil = u
	}
	return j, err
}

// limitsLookPaused shows a queue whose record holds limits as paused.
type limitsLookPaused struct{ *memory.Store }

func (s limitsLookPaused) Stats(ctx context.Context) ([]contract.QueueStats, error) {
	st, err := s.Store.Stats(ctx)
	for i := range st {
		if l, _ := s.QueueLimits(ctx, st[i].Queue); !l.IsZero() {
			st[i].Paused = true
		}
	}
	return st, err
}

// dropsDependencyEnds reads every job back without its DependencyEnds.
type dropsDependencyEnds struct{ *memory.Store }

func (s dropsDependencyEnds) Get(ctx context.Context, id int64) (*contract.Job, error) {
	j, err := s.Store.Get(ctx, id)
	if j != nil {
		j.DependencyEnds = contract.DependencyEnds{}
	}
	return j, err
}

// listsEveryWorkflow ignores ListParams.WorkflowFirst.
type listsEveryWorkflow struct{ *memory.Store }

func (s listsEveryWorkflow) List(ctx context.Context, p contract.ListParams) ([]*contract.Job, error) {
	p.WorkflowFirst = false
	return s.Store.List(ctx, p)
}

var broken = []struct {
	name    string
	wrap    func(*memory.Store) contract.Store
	subtest string // the rule that must fail
	message string // a phrase the failure must contain
	slow    bool   // waits out the suite's notification timeout
	beginTx func(testing.TB, contract.Store) (any, func() error, func() error)
}{
	{"silent-notifier", func(s *memory.Store) contract.Store { return silentNotifier{s} }, "notify/insert-of-due-job-wakes-listener", "must deliver it", true, nil},
	{"tx-without-begintx", func(s *memory.Store) contract.Store { return declaresTxInsert{s} }, "tx/insert-is-visible-after-commit", "Factory.BeginTx is nil", false, nil},
	{"clock-skewed", func(s *memory.Store) contract.Store { return clockSkewed{s} }, "claim/never-returns-future-jobs", "never return a job that is not due", false, nil},
	{"local-times", func(s *memory.Store) contract.Store { return localTimes{s} }, "insert/state-follows-run-at", "UTC", false, nil},
	{"racy-settings", func(s *memory.Store) contract.Store { return &racySettings{Store: s, m: map[string][]byte{}} }, "settings/get-or-create-is-atomic", "exactly 1", false, nil},
	{"worker-case-insensitive", func(s *memory.Store) contract.Store { return workerScan{s} }, "workers/get-one-record-by-id", "byte for byte", false, nil},
	{"drops-fingerprints", func(s *memory.Store) contract.Store { return dropsFingerprints{s} }, "unique-holds/fingerprint-kept-with-the-hold", "fingerprint", false, nil},
	{"cancel-notifies-running-only", func(s *memory.Store) contract.Store {
		return &cancelNotifiesRunningOnly{Store: s, quiet: map[int64]bool{}}
	}, "notify/every-cancel-notifies", "for every cancel", true, nil},
	{"notifies-first-queue-only", func(s *memory.Store) contract.Store { return &notifiesFirstQueueOnly{Store: s, skip: map[string]int{}} }, "notify/batch-insert-notifies-every-queue", "for every queue that got due jobs", true, nil},
	{"tx-rollback-notifies", func(s *memory.Store) contract.Store { return eagerTxInsert{s} }, "notify/rolled-back-tx-insert-sends-nothing", "only if the transaction commits", false, beginEagerTx},
	{"claim-limit-zero-is-empty", func(s *memory.Store) contract.Store { return claimLimitZeroIsEmpty{s} }, "claim/limit-below-one-is-an-invalid-argument", "core.ErrInvalidArgument", false, nil},
	{"prune-non-final-is-empty", func(s *memory.Store) contract.Store { return pruneNonFinalIsEmpty{s} }, "prune/non-final-state-is-an-invalid-argument", "core.ErrInvalidArgument", false, nil},
	{"finish-skips-unknown-kinds", func(s *memory.Store) contract.Store { return finishSkipsUnknownKinds{s} }, "finish/unknown-outcome-kind-is-an-invalid-argument", "core.ErrInvalidArgument", false, nil},
	{"rescue-by-id", func(s *memory.Store) contract.Store { return rescueByID{s} }, "rescue/takes-the-oldest-lease-first", "the oldest lease first", false, nil},
	{"rescue-workers-by-worker", func(s *memory.Store) contract.Store { return rescueWorkersByWorker{s} }, "dead-workers/takes-jobs-in-id-order", "in id order across all dead workers", false, nil},
	{"unsorted-rate-states", func(s *memory.Store) contract.Store { return unsortedRateStates{s} }, "policy/rate-states-sorted-by-group", "sorted by group", false, nil},
	{"prune-keeps-holds", func(s *memory.Store) contract.Store { return &pruneKeepsHolds{Store: s, kept: map[[3]string]int64{}} }, "prune/key-of-a-pruned-job-is-free-once-its-window-ends", "then pruned: the key is free", false, nil},
	{"close-keeps-serving", func(s *memory.Store) contract.Store { return closeKeepsServing{s} }, "close/calls-after-close-return-err-closed", "core.ErrClosed", false, nil},
	{"extend-keeps-zone", func(s *memory.Store) contract.Store { return &extendKeepsZone{Store: s, until: map[int64]time.Time{}} }, "lease/extend-with-non-utc-time-returns-utc", "in UTC", false, nil},
	{"archive-deletes", func(s *memory.Store) contract.Store { return archiveDeletes{s} }, "archive/moves-exactly-what-prune-would-delete", "the archive holds", false, nil},
	{"archive-drops-history", func(s *memory.Store) contract.Store { return archiveDropsHistory{s} }, "archive/keeps-every-field", "differs from the job Get returned before Archive", false, nil},
	{"limits-look-paused", func(s *memory.Store) contract.Store { return limitsLookPaused{s} }, "pause/stats-show-only-persisted-pauses", "persisted PauseQueue", false, nil},
	{"drops-dependency-ends", func(s *memory.Store) contract.Store { return dropsDependencyEnds{s} }, "deps/dependency-ends-are-counted", "DependencyEnds", false, nil},
	{"lists-every-workflow", func(s *memory.Store) contract.Store { return listsEveryWorkflow{s} }, "deps/list-by-workflow", "WorkflowFirst", false, nil},
}

// TestBrokenStore runs the suite against the broken store named by
// STORETEST_BROKEN; TestSuiteCatchesBrokenStores runs it in a subprocess.
func TestBrokenStore(t *testing.T) {
	name := os.Getenv("STORETEST_BROKEN")
	if name == "" {
		t.Skip("run by TestSuiteCatchesBrokenStores")
	}
	for _, b := range broken {
		if b.name == name {
			storetest.Run(t, storetest.Factory{New: func(t testing.TB, _ contract.ClaimStrategy) contract.Store {
				s := memory.New()
				t.Cleanup(func() { s.Close() })
				return b.wrap(s)
			}, BeginTx: b.beginTx})
			return
		}
	}
	t.Fatalf("unknown broken store %q", name)
}

// TestSuiteCatchesBrokenStores checks that the suite fails stores that
// break the contract, at the subtest named after the broken rule, with a
// message that says what is wrong.
func TestSuiteCatchesBrokenStores(t *testing.T) {
	if os.Getenv("STORETEST_BROKEN") != "" {
		t.Skip("inside a subprocess")
	}
	for _, b := range broken {
		t.Run(b.name, func(t *testing.T) {
			if b.slow && testing.Short() {
				t.Skip("waits for the notification timeout")
			}
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestBrokenStore$/^strategy=default$/^"+b.subtest+"$", "-test.v")
			cmd.Env = append(os.Environ(), "STORETEST_BROKEN="+b.name)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed a store that breaks %s:\n%s", b.subtest, out)
			}
			if !strings.Contains(string(out), "--- FAIL: TestBrokenStore/strategy=default/"+b.subtest) {
				t.Fatalf("the suite did not fail subtest %s:\n%s", b.subtest, out)
			}
			if !strings.Contains(string(out), b.message) {
				t.Fatalf("the failure message does not contain %q:\n%s", b.message, out)
			}
		})
	}
}
