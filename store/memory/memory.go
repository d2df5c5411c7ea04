// Package memory is an in-memory contract.Store.
//
// It has two jobs. First, it is the reference adapter: the smallest complete
// implementation of the contract.Store contract, written to be read. An author of
// a store for a new database can follow it method by method — each method's
// comment says which rules of the contract it implements, and the list below
// says what a database uses in place of each in-memory structure. Second, it is a fast store for unit tests of code
// that enqueues or runs jobs: no files, no server, no cleanup.
//
// It keeps nothing across processes and has no transactions, so it does not
// implement contract.TxInserter or contract.TxCompleter. It implements contract.Notifier
// by fanning notifications out to the channels of every Listen call made on
// the same *Store, contract.Settings with a map (values live as long as the
// *Store), and contract.SealedRewriter.
//
// How the contract maps onto plain Go:
//
//   - Rows are *core.Job values in a map keyed by id; ids come from a counter
//     starting at 1. Every job handed out is a deep copy, so callers can never
//     change stored state by mutating a result.
//   - One sync.Mutex serialises every method. That is what makes claims
//     exclusive (a SQL store uses SKIP LOCKED or a version column instead) and
//     unique keys race-free (a SQL store uses a primary key on its holds).
//   - Unique keys are held apart from the jobs, in a map from scoped key
//     (contract.ScopedUniqueKey) to a hold: the holder's id, queue, kind, key,
//     UniqueFor and, once its row is gone, until when the key stays held.
//     A SQL store keeps the same in a table whose primary key is the
//     scoped key, so a hold outlives the row it was taken for.
//   - Pending jobs (scheduled, available, retryable) are also indexed per
//     queue and priority in run_at, id order (see pendingIndex), so a claim
//     reads only the jobs it takes, never the rest of the backlog. A SQL
//     store gets the same effect from a composite index on (queue, priority,
//     run_at, id) over the pending states.
//   - A worker's record is a map entry keyed by its id (a SQL store's
//     primary key), so Worker reads one record, never the registry.
//   - The store never reads a clock: every time it stores comes from the
//     caller, normalised with contract.UTC.
//
// Run the conformance suite against it with storetest.Run; its own tests do.
package memory

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/core/storekit"
)

// listenBuffer is the capacity of each Listen channel. Notifications are
// wake-ups: when a listener is slow and its buffer is full, more are dropped,
// which the contract allows (delivery is best effort; the engine polls).
const listenBuffer = 64

// Store is an in-memory contract.Store and contract.Notifier. The zero value is not
// usable; create one with New. A Store is safe for concurrent use.
type Store struct {
	mu sync.Mutex

	closed bool
	nextID int64

	// jobs holds every stored job by id. The values are owned by the store:
	// they are copied on the way in and on the way out.
	jobs map[int64]*contract.Job

	// pending indexes, per queue, the jobs whose state is scheduled,
	// available or retryable: the only ones a claim may take.
	pending map[string]*pendingIndex

	// holds maps a scoped unique key to its hold: the in-memory
	// equivalent of a unique-keys table whose primary key is the scoped
	// key. holdOf maps the id of a job holding a key to that scoped key
	// (the table's index on job_id).
	holds  map[string]*hold
	holdOf map[int64]string

	// paused is the set of paused queues (the persisted queue records).
	paused map[string]bool

	// limits holds the concurrency limits of the queues whose limits were
	// set (contract.QueueLimiter), normalized; zero limits stay as a record.
	limits map[string]contract.QueueLimits
	// rates holds each queue's rate-limited groups' GCRA instants
	// (core.RateLimit): queue → group → instant.
	rates map[string]map[string]time.Time
	// fairCursor holds each fair queue's cursor: the partition key its
	// last claim's turn ended at (storekit.ClaimRoom.FairCursor).
	fairCursor map[string]string

	workers map[string]contract.WorkerInfo

	// settings holds the values of contract.Settings.
	settings map[string][]byte

	// listeners are the channels of live Listen calls.
	listeners map[chan contract.Notification]struct{}

	// history holds the queue history (contract.QueueHistory, history.go).
	history queueHistory

	// archive holds archived jobs by id (contract.Archiver, archive.go):
	// a second table of the same rows, read only by ListArchived and
	// GetArchived.
	archive map[int64]*contract.Job

	// dependants maps a job id to the ids of the jobs waiting for it
	// (contract.Dependencies, deps.go): the edges a settle follows.
	dependants map[int64][]int64
}

// Compile-time checks of the interfaces Store implements.
var (
	_ contract.Store            = (*Store)(nil)
	_ contract.Notifier         = (*Store)(nil)
	_ contract.Settings         = (*Store)(nil)
	_ contract.MutableSettings  = (*Store)(nil)
	_ contract.SealedRewriter   = (*Store)(nil)
	_ contract.QueueLimiter     = (*Store)(nil)
	_ contract.UniqueHolder     = (*Store)(nil)
	_ contract.ProgressRecorder = (*Store)(nil)
	_ contract.Archiver         = (*Store)(nil)
	_ contract.Dependencies     = (*Store)(nil)
)

// New returns an empty store.
func New() *Store {
	return &Store{
		jobs:       make(map[int64]*contract.Job),
		pending:    make(map[string]*pendingIndex),
		holds:      make(map[string]*hold),
		holdOf:     make(map[int64]string),
		paused:     make(map[string]bool),
		limits:     make(map[string]contract.QueueLimits),
		rates:      make(map[string]map[string]time.Time),
		fairCursor: make(map[string]string),
		workers:    make(map[string]contract.WorkerInfo),
		settings:   make(map[string][]byte),
		listeners:  make(map[chan contract.Notification]struct{}),
		archive:    make(map[int64]*contract.Job),
		dependants: make(map[int64][]int64),
	}
}

// hold is one held scoped unique key.
type hold struct {
	jobID            int64
	queue, kind, key string
	uniqueFor        time.Duration
	fingerprint      string // the holder's InsertParams.UniqueFingerprint
	// heldUntil is zero while the holder's row exists (its state and
	// FinishedAt decide then), and FinishedAt+uniqueFor once it is gone.
	heldUntil time.Time
}

// held reports whether h still holds its key at now: its job is not
// final, or final with now before FinishedAt+UniqueFor, or gone with now
// before heldUntil.
func (s *Store) held(h *hold, now time.Time) bool {
	if j, ok := s.jobs[h.jobID]; ok {
		return !j.State.Final() || now.Before(j.FinishedAt.Add(h.uniqueFor))
	}
	return now.Before(h.heldUntil)
}

// holderJob returns the job holding h: a copy of its row, or, when the
// row is gone, a job with only what the hold keeps (ID, Queue, Kind,
// UniqueKey).
func (s *Store) holderJob(h *hold) *contract.Job {
	if j, ok := s.jobs[h.jobID]; ok {
		return clone(j)
	}
	return &contract.Job{ID: h.jobID, Queue: h.queue, Kind: h.kind, UniqueKey: h.key}
}

// lock takes the mutex and reports core.ErrClosed after Close. Callers that
// get nil must unlock.
func (s *Store) lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return contract.ErrClosed
	}
	return nil
}

// Insert implements contract.Store. Each input becomes a new job, scheduled when
// its RunAt is after now and available otherwise, unless its scoped unique
// key is held (by a job not final, by a final one inside its UniqueFor
// window, or by one deleted inside it; including a job inserted earlier in
// the same batch): then the result holds that job and Duplicate is true.
// Otherwise the new job takes the hold. Inserting a due job sends one
// NotifyInsert per queue.
func (s *Store) Insert(ctx context.Context, now time.Time, jobs []contract.InsertParams) ([]contract.InsertResult, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()

	now = contract.UTC(now)
	if err := s.checkDependencies(jobs); err != nil {
		return nil, err
	}
	results := make([]contract.InsertResult, len(jobs))
	var dueQueues []string
	var workflowID int64
	for i, p := range jobs {
		sk := contract.ScopedUniqueKey(&p)
		if h, ok := s.holds[sk]; sk != "" && ok {
			if s.held(h, now) {
				results[i] = contract.InsertResult{Job: s.holderJob(h), Duplicate: true, Fingerprint: h.fingerprint}
				continue
			}
			delete(s.holdOf, h.jobID) // the hold passes to the new job
		}
		s.nextID++
		if sk != "" {
			s.holds[sk] = &hold{jobID: s.nextID, queue: p.Queue, kind: p.Kind, key: p.UniqueKey, uniqueFor: p.UniqueFor.Truncate(time.Microsecond), fingerprint: p.UniqueFingerprint}
			s.holdOf[s.nextID] = sk
		}
		j := &contract.Job{
			ID:           s.nextID,
			Queue:        p.Queue,
			Kind:         p.Kind,
			Args:         slices.Clone(p.Args),
			Priority:     p.Priority,
			State:        contract.StateAvailable,
			MaxAttempts:  p.MaxAttempts,
			RunAt:        contract.UTC(p.RunAt),
			Deadline:     contract.UTC(p.Deadline),
			UniqueKey:    p.UniqueKey,
			PartitionKey: p.PartitionKey,
			Tags:         slices.Clone(p.Tags),
			Metadata:     maps.Clone(p.Metadata),
			CreatedAt:    now,
		}
		if p.Step != "" || p.InWorkflow {
			if workflowID == 0 {
				workflowID = j.ID
			}
			j.WorkflowID, j.Step = workflowID, p.Step
		}
		if j.RunAt.After(now) {
			j.State = contract.StateScheduled
		}
		s.jobs[j.ID] = j
		s.addDependencies(j, &p, results[:i], now)
		if j.State == contract.StateAvailable && !slices.Contains(dueQueues, j.Queue) {
			dueQueues = append(dueQueues, j.Queue)
		}
		s.reindex(j, "")
		results[i] = contract.InsertResult{Job: clone(j)}
	}
	for _, q := range dueQueues {
		s.notify(contract.Notification{Kind: contract.NotifyInsert, Queue: q})
	}
	return results, nil
}

// Claim implements contract.Store. It takes the due jobs of p.Queue in priority,
// run_at, id order from the queue's pending index and marks them running for
// p.WorkerID. Holding the mutex for the whole selection and update is what
// keeps two claims from taking the same job. A paused queue yields no jobs
// and a nil error.
func (s *Store) Claim(ctx context.Context, p contract.ClaimParams) ([]*contract.Job, error) {
	if p.Limit < 1 {
		return nil, fmt.Errorf("memory: claim limit %d is below 1: %w", p.Limit, contract.ErrInvalidArgument)
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()

	if s.paused[p.Queue] {
		return nil, nil
	}
	now := contract.UTC(p.Now)

	var picked []*contract.Job
	if x, ok := s.pending[p.Queue]; ok {
		if lim, limited := s.limits[p.Queue]; limited && !lim.IsZero() {
			picked = s.claimLimited(x, p, lim, now)
		} else {
			picked = x.popDue(now, p.Limit, func(j *contract.Job) bool { return tagsAllowed(j.Tags, p.Tags) })
		}
	}

	leaseUntil := contract.UTC(p.LeaseUntil)
	claimed := make([]*contract.Job, 0, len(picked))
	for _, j := range picked {
		old := j.State
		j.State = contract.StateRunning
		j.Attempt++
		j.ClaimSeq++
		j.AttemptedAt = now
		j.WorkerID = p.WorkerID
		j.LeaseUntil = leaseUntil
		j.Progress = nil // progress belongs to one attempt
		s.reindex(j, old)
		claimed = append(claimed, clone(j))
	}
	return claimed, nil
}

// Finish implements contract.Store. Each outcome applies only when its job is
// still running under the outcome's worker id at the outcome's ClaimSeq (the
// fence); otherwise its result says Applied=false and the job is untouched.
// An outcome of an unknown kind fails the whole call before any is applied,
// with an error wrapping core.ErrInvalidArgument.
func (s *Store) Finish(ctx context.Context, outcomes []contract.Outcome) ([]contract.FinishResult, error) {
	for _, o := range outcomes {
		switch o.Kind {
		case contract.OutcomeComplete, contract.OutcomeRetry, contract.OutcomeSnooze,
			contract.OutcomeContinue, contract.OutcomeCancel, contract.OutcomeDiscard:
		default:
			return nil, fmt.Errorf("memory: job %d: unknown outcome kind %q: %w", o.JobID, o.Kind, contract.ErrInvalidArgument)
		}
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()

	results := make([]contract.FinishResult, len(outcomes))
	for i, o := range outcomes {
		results[i] = contract.FinishResult{JobID: o.JobID, Applied: s.finish(o)}
	}
	return results, nil
}

// finish applies one outcome if the fence holds and reports whether it did.
func (s *Store) finish(o contract.Outcome) bool {
	j, ok := s.jobs[o.JobID]
	if !ok || j.State != contract.StateRunning || j.WorkerID != o.WorkerID || j.ClaimSeq != o.ClaimSeq {
		return false
	}
	at := contract.UTC(o.At)
	runAt := contract.UTC(o.RunAt)
	old := j.State

	// Every outcome ends the lease; WorkerID stays for inspection.
	j.LeaseUntil = time.Time{}
	if o.Error != nil {
		e := *o.Error
		e.At, e.StartedAt = contract.UTC(e.At), contract.UTC(e.StartedAt)
		j.Errors = appendError(j.Errors, e)
	}

	switch o.Kind {
	case contract.OutcomeComplete:
		if o.Delete {
			s.remove(j, at)
			s.settle(j.ID, contract.StateCompleted, at)
			return true
		}
		j.State = contract.StateCompleted
		j.FinishedAt = at
		j.Result = slices.Clone(o.Result)
	case contract.OutcomeRetry:
		j.State = contract.StateRetryable
		j.RunAt = runAt
	case contract.OutcomeSnooze:
		j.State = dueState(runAt, at)
		j.RunAt = runAt
		j.Attempt-- // a snooze uses no attempt
	case contract.OutcomeContinue:
		j.State = dueState(runAt, at)
		j.RunAt = runAt
		j.Attempt = 0
		j.Kind = o.NextKind
		j.Args = slices.Clone(o.NextArgs)
		j.Checkpoint = nil // the next step starts afresh
	case contract.OutcomeCancel:
		j.State = contract.StateCancelled
		j.FinishedAt = at
	case contract.OutcomeDiscard:
		j.State = contract.StateDiscarded
		j.FinishedAt = at
	}
	s.reindex(j, old)
	return true
}

// dueState is the state of a job that becomes due at runAt, seen at now.
func dueState(runAt, now time.Time) contract.State {
	if runAt.After(now) {
		return contract.StateScheduled
	}
	return contract.StateAvailable
}

// ExtendLeases implements contract.Store: each named job still running under
// workerID at the named ClaimSeq gets LeaseUntil=until. Jobs not named, or
// no longer held at that claim, are not touched.
func (s *Store) ExtendLeases(ctx context.Context, workerID string, leases []contract.Lease, until time.Time) (int, error) {
	if err := s.lock(ctx); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()

	until = contract.UTC(until)
	n := 0
	for _, l := range leases {
		j, ok := s.jobs[l.JobID]
		if ok && j.State == contract.StateRunning && j.WorkerID == workerID && j.ClaimSeq == l.ClaimSeq {
			j.LeaseUntil = until
			n++
		}
	}
	return n, nil
}

// RecordProgress implements contract.ProgressRecorder: u's progress and
// checkpoint are written on its job when it is still running under
// u.WorkerID at u.ClaimSeq; otherwise the error wraps ErrLeaseLost.
func (s *Store) RecordProgress(ctx context.Context, u contract.ProgressUpdate) error {
	if err := u.Validate(); err != nil {
		return fmt.Errorf("memory: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()

	j, ok := s.jobs[u.JobID]
	if !ok || j.State != contract.StateRunning || j.WorkerID != u.WorkerID || j.ClaimSeq != u.ClaimSeq {
		return fmt.Errorf("memory: record progress of job %d: %w", u.JobID, contract.ErrLeaseLost)
	}
	if u.Progress != nil {
		p := *u.Progress
		p.At = contract.UTC(p.At)
		j.Progress = &p
	}
	switch {
	case u.Checkpoint == nil:
	case contract.IsNullJSON(u.Checkpoint):
		j.Checkpoint = nil
	default:
		j.Checkpoint = slices.Clone(u.Checkpoint)
	}
	return nil
}

// Rescue implements contract.Store. Running jobs whose lease ended before now
// (oldest lease first, up to limit) get the outcome decide returns for
// them, applied under the store's mutex, so nothing can change them between
// the selection and the change.
func (s *Store) Rescue(ctx context.Context, now time.Time, limit int, decide contract.RescueFunc) ([]*contract.Job, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()

	now = contract.UTC(now)
	expired := s.collect(limit, func(a, b *contract.Job) int {
		if c := a.LeaseUntil.Compare(b.LeaseUntil); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	}, func(j *contract.Job) bool {
		return j.State == contract.StateRunning && j.LeaseUntil.Before(now)
	})

	rescued := make([]*contract.Job, 0, len(expired))
	for _, j := range expired {
		if r := s.handBack(j, decide(clone(j), j.LeaseUntil)); r != nil {
			rescued = append(rescued, r)
		}
	}
	return rescued, nil
}

// tagsAllowed reports whether a worker with capabilities may run a job
// with the given tags: every job tag must be among them.
func tagsAllowed(jobTags, capabilities []string) bool {
	for _, t := range jobTags {
		if !slices.Contains(capabilities, t) {
			return false
		}
	}
	return true
}

// RescueWorkers implements contract.Store: running jobs (in id order, up to
// limit) held by workers whose record's heartbeat is before heartbeatBefore
// get the outcome decide returns for them, as in Rescue.
func (s *Store) RescueWorkers(ctx context.Context, heartbeatBefore, now time.Time, limit int, decide contract.RescueFunc) ([]*contract.Job, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()

	heartbeatBefore = contract.UTC(heartbeatBefore)
	dead := func(id string) (contract.WorkerInfo, bool) {
		w, ok := s.workers[id]
		return w, ok && w.HeartbeatAt.Before(heartbeatBefore)
	}
	held := s.collect(limit, byID, func(j *contract.Job) bool {
		_, ok := dead(j.WorkerID)
		return j.State == contract.StateRunning && ok
	})
	rescued := make([]*contract.Job, 0, len(held))
	for _, j := range held {
		w, _ := dead(j.WorkerID)
		if r := s.handBack(j, decide(clone(j), w.HeartbeatAt)); r != nil {
			rescued = append(rescued, r)
		}
	}
	return rescued, nil
}

// handBack applies a rescue outcome to the running job j, which the caller
// selected under the same lock, and returns a copy of the result (nil if
// the outcome did not name j's current execution or is of a kind rescues
// do not make).
func (s *Store) handBack(j *contract.Job, o contract.Outcome) *contract.Job {
	if o.Kind != contract.OutcomeRetry && o.Kind != contract.OutcomeDiscard {
		return nil
	}
	if !s.finish(o) {
		return nil
	}
	return clone(j)
}

// DiscardExpired implements contract.Store: pending jobs (scheduled, available,
// retryable) whose deadline is set and before now, up to limit in id order,
// become discarded with an error entry saying the deadline passed.
func (s *Store) DiscardExpired(ctx context.Context, now time.Time, limit int) (int, error) {
	if err := s.lock(ctx); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()

	now = contract.UTC(now)
	expired := s.collect(limit, byID, func(j *contract.Job) bool {
		return (j.State.Pending() || j.State == contract.StateWaiting) && !j.Deadline.IsZero() && j.Deadline.Before(now)
	})
	for _, j := range expired {
		old := j.State
		j.Errors = appendError(j.Errors, contract.AttemptError{
			Attempt: j.Attempt,
			At:      now,
			Error:   "deadline passed: the job was not finished by " + j.Deadline.Format(time.RFC3339Nano),
			Cause:   core.CauseDeadline,
			// The job waited: no attempt was running, so no StartedAt.
			DiscardReason: core.ReasonDeadline,
		})
		j.State = contract.StateDiscarded
		j.FinishedAt = now
		s.reindex(j, old)
	}
	return len(expired), nil
}

// Prune implements contract.Store: it deletes up to limit jobs (oldest id first)
// in the final state `state` whose FinishedAt is before `before`, keeping
// their unique keys held until FinishedAt+UniqueFor, and forgets up to
// limit holds that ended before `before`. A state that is not final is an
// error wrapping core.ErrInvalidArgument and core.ErrInvalidState.
func (s *Store) Prune(ctx context.Context, state contract.State, before time.Time, limit int) (int, error) {
	if !state.Final() {
		return 0, fmt.Errorf("memory: prune of state %q: %w: %w (only completed, cancelled and discarded jobs are pruned)", state, contract.ErrInvalidArgument, contract.ErrInvalidState)
	}
	if err := s.lock(ctx); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()

	return len(s.prune(state, before, limit)), nil
}

// prune takes up to limit jobs (oldest id first) in the final state
// `state` whose FinishedAt is before `before` out of the jobs, keeping
// their unique keys held until FinishedAt+UniqueFor, forgets up to limit
// holds that ended before `before`, and returns the jobs taken out
// (Prune drops them, Archive keeps them). s.mu is held.
func (s *Store) prune(state contract.State, before time.Time, limit int) []*contract.Job {
	before = contract.UTC(before)
	old := s.collect(limit, byID, func(j *contract.Job) bool {
		return j.State == state && j.FinishedAt.Before(before)
	})
	for _, j := range old {
		s.remove(j, j.FinishedAt)
	}
	// Forget holds that ended before `before` (their rows are gone).
	n := 0
	for sk, h := range s.holds {
		if n == limit {
			break
		}
		if _, ok := s.jobs[h.jobID]; !ok && h.heldUntil.Before(before) {
			delete(s.holds, sk)
			n++
		}
	}
	return old
}

// Get implements contract.Store.
func (s *Store) Get(ctx context.Context, id int64) (*contract.Job, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()

	j, ok := s.jobs[id]
	if !ok {
		return nil, fmt.Errorf("memory: job %d: %w", id, contract.ErrNotFound)
	}
	return clone(j), nil
}

// List implements contract.Store: jobs matching the filters of p
// (core.ListParams.Matches, args searched in Go), in p's order
// (core.ListParams.ListOrder), after its cursor (ListAfter), at most
// p.Limit (100 when zero).
func (s *Store) List(ctx context.Context, p contract.ListParams) ([]*contract.Job, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	return s.list(s.jobs, p)
}

// list is List over rows (the jobs or the archive); s.mu is held.
func (s *Store) list(rows map[int64]*contract.Job, p contract.ListParams) ([]*contract.Job, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	leaves, err := contract.ParseArgsPattern(p.ArgsContains)
	if err != nil {
		return nil, err
	}
	filter := p
	filter.ArgsContains = nil
	found := collectFrom(rows, limit, p.ListOrder, func(j *contract.Job) bool {
		return p.ListAfter(j) && filter.Matches(j) && contract.ArgsMatch(j.Args, leaves)
	})
	out := make([]*contract.Job, len(found))
	for i, j := range found {
		out[i] = clone(j)
	}
	return out, nil
}

// Stats implements contract.Store: one entry per queue that has jobs or is
// paused, ordered by queue name. States without jobs are absent from Counts.
func (s *Store) Stats(ctx context.Context) ([]contract.QueueStats, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()

	byQueue := make(map[string]*contract.QueueStats)
	get := func(q string) *contract.QueueStats {
		st, ok := byQueue[q]
		if !ok {
			st = &contract.QueueStats{Queue: q, Paused: s.paused[q], Counts: make(map[contract.State]int)}
			byQueue[q] = st
		}
		return st
	}
	for q := range s.paused {
		get(q)
	}
	for _, j := range s.jobs {
		get(j.Queue).Counts[j.State]++
	}
	out := make([]contract.QueueStats, 0, len(byQueue))
	for _, q := range slices.Sorted(maps.Keys(byQueue)) {
		out = append(out, *byQueue[q])
	}
	return out, nil
}

// Cancel implements contract.Store: a job not in a final state becomes cancelled
// (FinishedAt=now, lease cleared) and a NotifyCancel is sent so a node
// running it can stop early. A final job returns core.ErrInvalidState.
func (s *Store) Cancel(ctx context.Context, id int64, now time.Time) (*contract.Job, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()

	j, ok := s.jobs[id]
	if !ok {
		return nil, fmt.Errorf("memory: cancel job %d: %w", id, contract.ErrNotFound)
	}
	if j.State.Final() {
		return nil, fmt.Errorf("memory: cancel job %d in state %s: %w", id, j.State, contract.ErrInvalidState)
	}
	old := j.State
	j.State = contract.StateCancelled
	j.FinishedAt = contract.UTC(now)
	j.LeaseUntil = time.Time{}
	s.reindex(j, old)
	s.notify(contract.Notification{Kind: contract.NotifyCancel, Queue: j.Queue, JobID: j.ID})
	return clone(j), nil
}

// Retry implements contract.Store: a job that is not running becomes available
// now, with FinishedAt cleared; a job whose attempts are used up gets exactly
// one more. Retrying a job whose unique key hold has passed to another job
// returns core.ErrInvalidState: the key now names that job.
func (s *Store) Retry(ctx context.Context, id int64, now time.Time) (*contract.Job, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()

	j, ok := s.jobs[id]
	if !ok {
		return nil, fmt.Errorf("memory: retry job %d: %w", id, contract.ErrNotFound)
	}
	if j.State == contract.StateRunning {
		return nil, fmt.Errorf("memory: retry job %d: it is running: %w", id, contract.ErrInvalidState)
	}
	if j.State == contract.StateWaiting {
		return nil, fmt.Errorf("memory: retry job %d: it waits for %d dependencies: %w", id, j.WaitingFor, contract.ErrInvalidState)
	}
	if _, ok := s.holdOf[j.ID]; j.UniqueKey != "" && !ok {
		return nil, fmt.Errorf("memory: retry job %d: unique key %q has passed to another job: %w", id, j.UniqueKey, contract.ErrInvalidState)
	}
	old := j.State
	now = contract.UTC(now)
	j.State = contract.StateAvailable
	j.RunAt = now
	j.FinishedAt = time.Time{}
	if j.Attempt >= j.MaxAttempts {
		j.MaxAttempts = j.Attempt + 1
	}
	s.reindex(j, old)
	s.notify(contract.Notification{Kind: contract.NotifyInsert, Queue: j.Queue})
	return clone(j), nil
}

// Delete implements contract.Store: it removes a job that is not running. A
// final job's unique key stays held until FinishedAt+UniqueFor; the key of
// a job not yet final is freed.
func (s *Store) Delete(ctx context.Context, id int64) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()

	j, ok := s.jobs[id]
	if !ok {
		return fmt.Errorf("memory: delete job %d: %w", id, contract.ErrNotFound)
	}
	if j.State == contract.StateRunning {
		return fmt.Errorf("memory: delete job %d: it is running (cancel it first): %w", id, contract.ErrInvalidState)
	}
	s.remove(j, j.FinishedAt)
	if !j.State.Final() {
		// A job deleted before its end settles its dependants as a
		// cancel would; Delete takes no time, so the store's clock.
		s.settle(j.ID, "", contract.UTC(time.Now()))
	}
	return nil
}

// PauseQueue implements contract.Store. Pausing a queue that is not yet paused
// sends a NotifyPause.
func (s *Store) PauseQueue(ctx context.Context, queue string, now time.Time) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()

	if !s.paused[queue] {
		s.paused[queue] = true
		s.notify(contract.Notification{Kind: contract.NotifyPause, Queue: queue})
	}
	return nil
}

// room returns the claim room of queue under lim: its running jobs
// counted by kind and partition key. Holding the mutex makes claims one at
// a time, so the count stays true until the claim has taken its jobs.
func (s *Store) room(queue string, lim contract.QueueLimits, now time.Time) *storekit.ClaimRoom {
	r := storekit.NewClaimRoom(lim, now)
	for g, tat := range s.rates[queue] {
		r.LoadRate(g, tat)
	}
	for _, j := range s.jobs {
		if j.Queue == queue && j.State == contract.StateRunning {
			r.AddRunning(j.Kind, j.PartitionKey, 1)
		}
	}
	return r
}

// claimLimited takes up to p.Limit due jobs of x within lim with the
// claim-policy algorithm every store shares (storekit.ClaimLimited): the
// reads are walks of the pending index, the take removes the jobs from
// it. Holding the mutex makes the room's counts true for the whole claim.
// The rate instants and the fair cursor the claim moved are kept for the
// next claim.
func (s *Store) claimLimited(x *pendingIndex, p contract.ClaimParams, lim contract.QueueLimits, now time.Time) []*contract.Job {
	room := s.room(p.Queue, lim, now)
	room.LoadFairCursor(s.fairCursor[p.Queue])
	allowed := func(j *contract.Job) bool { return tagsAllowed(j.Tags, p.Tags) }
	out, _ := storekit.ClaimLimited(p.Limit, room, storekit.LimitedReads{
		Read: func(f storekit.CandidateFilter, n int) ([]storekit.LimitCandidate, error) {
			return x.due(now, f, n, allowed), nil
		},
		Take: func(cands []storekit.LimitCandidate) ([]*contract.Job, error) {
			got := make([]*contract.Job, len(cands))
			for i, c := range cands {
				x.remove(c.ID)
				got[i] = c.Job
			}
			return got, nil
		},
		Partitions: func(after string, n int) ([]string, error) { return x.partitions(after, n), nil },
		Direct:     func(n int) ([]*contract.Job, error) { return x.popDue(now, n, allowed), nil },
	}) // the reads and the take never fail
	if room.FairCursorMoved() {
		s.fairCursor[p.Queue] = room.FairCursor()
	}
	if ups := room.RateUpdates(); len(ups) > 0 {
		if s.rates[p.Queue] == nil {
			s.rates[p.Queue] = map[string]time.Time{}
		}
		for g, tat := range s.rates[p.Queue] {
			if !tat.After(now) {
				delete(s.rates[p.Queue], g)
			}
		}
		for _, st := range ups {
			s.rates[p.Queue][st.Group] = st.TAT
		}
	}
	return out
}

// QueueRateStates implements contract.QueueLimiter.
func (s *Store) QueueRateStates(ctx context.Context, queue string, now time.Time) ([]contract.RateState, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []contract.RateState
	for g, tat := range s.rates[queue] {
		if tat.After(now) {
			out = append(out, contract.RateState{Group: g, TAT: tat})
		}
	}
	slices.SortFunc(out, func(a, b contract.RateState) int { return strings.Compare(a.Group, b.Group) })
	return out, nil
}

// SetQueueLimits implements contract.QueueLimiter.
func (s *Store) SetQueueLimits(ctx context.Context, queue string, limits contract.QueueLimits, now time.Time) error {
	if err := limits.Validate(); err != nil {
		return err
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	s.limits[queue] = limits.Normalized()
	return nil
}

// InitQueueLimits implements contract.QueueLimiter: it stores limits unless
// the queue's limits were set before.
func (s *Store) InitQueueLimits(ctx context.Context, queue string, limits contract.QueueLimits, now time.Time) (contract.QueueLimits, bool, error) {
	if err := limits.Validate(); err != nil {
		return contract.QueueLimits{}, false, err
	}
	if err := s.lock(ctx); err != nil {
		return contract.QueueLimits{}, false, err
	}
	defer s.mu.Unlock()
	if cur, ok := s.limits[queue]; ok {
		return cloneLimits(cur), false, nil
	}
	s.limits[queue] = limits.Normalized()
	return cloneLimits(s.limits[queue]), true, nil
}

// QueueLimits implements contract.QueueLimiter.
func (s *Store) QueueLimits(ctx context.Context, queue string) (contract.QueueLimits, error) {
	if err := s.lock(ctx); err != nil {
		return contract.QueueLimits{}, err
	}
	defer s.mu.Unlock()
	return cloneLimits(s.limits[queue]), nil
}

// cloneLimits copies l so callers never share the stored map.
func cloneLimits(l contract.QueueLimits) contract.QueueLimits {
	l.MaxRunningPerKind = maps.Clone(l.MaxRunningPerKind)
	l.RatePerKind = maps.Clone(l.RatePerKind)
	return l
}

// ResumeQueue implements contract.Store. Resuming a paused queue sends a
// NotifyResume; resuming one that is not paused does nothing.
func (s *Store) ResumeQueue(ctx context.Context, queue string, now time.Time) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()

	if s.paused[queue] {
		delete(s.paused, queue)
		s.notify(contract.Notification{Kind: contract.NotifyResume, Queue: queue})
	}
	return nil
}

// RegisterWorker implements contract.Store: it inserts or replaces the record
// with id w.ID.
func (s *Store) RegisterWorker(ctx context.Context, w contract.WorkerInfo) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()

	s.workers[w.ID] = cloneWorker(w)
	return nil
}

// DeregisterWorker implements contract.Store.
func (s *Store) DeregisterWorker(ctx context.Context, id string) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()

	delete(s.workers, id)
	return nil
}

// Workers implements contract.Store: worker records ordered by id.
func (s *Store) Workers(ctx context.Context) ([]contract.WorkerInfo, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()

	out := make([]contract.WorkerInfo, 0, len(s.workers))
	for _, id := range slices.Sorted(maps.Keys(s.workers)) {
		out = append(out, cloneWorker(s.workers[id]))
	}
	return out, nil
}

// Worker implements contract.Store: the record of worker id, or
// core.ErrNotFound.
func (s *Store) Worker(ctx context.Context, id string) (contract.WorkerInfo, error) {
	if err := s.lock(ctx); err != nil {
		return contract.WorkerInfo{}, err
	}
	defer s.mu.Unlock()

	w, ok := s.workers[id]
	if !ok {
		return contract.WorkerInfo{}, fmt.Errorf("memory: worker %q: %w", id, contract.ErrNotFound)
	}
	return cloneWorker(w), nil
}

// GetOrCreateSetting implements contract.Settings: under the store's lock the
// lookup and the insert are one step.
func (s *Store) GetOrCreateSetting(ctx context.Context, key string, value []byte) ([]byte, bool, error) {
	if err := storekit.CheckSetting(key, value); err != nil {
		return nil, false, err
	}
	if err := s.lock(ctx); err != nil {
		return nil, false, err
	}
	defer s.mu.Unlock()

	if v, ok := s.settings[key]; ok {
		return slices.Clone(v), false, nil
	}
	s.settings[key] = slices.Clone(value)
	return slices.Clone(value), true, nil
}

// Setting implements contract.Settings.
func (s *Store) Setting(ctx context.Context, key string) ([]byte, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()

	v, ok := s.settings[key]
	if !ok {
		return nil, fmt.Errorf("memory: setting %q: %w", key, contract.ErrNotFound)
	}
	return slices.Clone(v), nil
}

// PutSetting implements contract.MutableSettings.
func (s *Store) PutSetting(ctx context.Context, key string, value []byte) error {
	if err := storekit.CheckSetting(key, value); err != nil {
		return err
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	s.settings[key] = slices.Clone(value)
	return nil
}

// DeleteSetting implements contract.MutableSettings.
func (s *Store) DeleteSetting(ctx context.Context, key string) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	delete(s.settings, key)
	return nil
}

// RewriteSealed implements contract.SealedRewriter. It reads the batch under
// the lock, releases it while fn runs (fn may call the store), and then
// writes, under the lock again, the rows that are still there, not
// running, and unchanged since the read: the same state, ClaimSeq, kind,
// args, result and errors. The SQL stores fence on their version column
// instead, in one UPDATE per row (store/internal/sqlq).
func (s *Store) RewriteSealed(ctx context.Context, afterID int64, limit int, fn func(j *contract.Job) (*contract.Job, bool, error)) (int64, int, error) {
	if limit < 1 {
		return afterID, 0, fmt.Errorf("memory: RewriteSealed: limit %d must be at least 1", limit)
	}
	if err := s.lock(ctx); err != nil {
		return afterID, 0, err
	}
	read := s.collect(limit, byID, func(j *contract.Job) bool {
		return j.ID > afterID && j.State != contract.StateRunning
	})
	for i, j := range read {
		read[i] = clone(j) // the fence: the row as read
	}
	s.mu.Unlock()

	type write struct{ read, next *contract.Job }
	var writes []write
	lastID := afterID
	for _, j := range read {
		next, changed, err := fn(clone(j))
		if err != nil {
			return afterID, 0, err
		}
		lastID = j.ID
		if !changed {
			continue
		}
		if err := checkRewrite(j, next); err != nil {
			return afterID, 0, err
		}
		writes = append(writes, write{j, next})
	}
	if len(writes) == 0 {
		return lastID, 0, nil
	}

	if err := s.lock(ctx); err != nil {
		return afterID, 0, err
	}
	defer s.mu.Unlock()
	n := 0
	for _, w := range writes {
		cur, ok := s.jobs[w.read.ID]
		if !ok || cur.State == contract.StateRunning || !sameSealed(cur, w.read) {
			continue // changed since the read: the caller's next pass sees it
		}
		cur.Args = slices.Clone(w.next.Args)
		cur.Result = slices.Clone(w.next.Result)
		if len(cur.Errors) > 0 {
			cur.Errors = slices.Clone(cur.Errors)
			for i, e := range w.next.Errors {
				cur.Errors[i].Error, cur.Errors[i].Trace = e.Error, e.Trace
			}
		}
		n++
	}
	return lastID, n, nil
}

// checkRewrite reports a next that RewriteSealed cannot store for the job
// read.
func checkRewrite(read, next *contract.Job) error {
	switch {
	case next == nil:
		return fmt.Errorf("memory: RewriteSealed: job %d: changed, but no job returned", read.ID)
	case !json.Valid(next.Args):
		return fmt.Errorf("memory: RewriteSealed: job %d: the new args are not valid JSON", read.ID)
	case len(next.Errors) != len(read.Errors):
		return fmt.Errorf("memory: RewriteSealed: job %d: %d error entries returned for %d stored; entries are rewritten, never added or dropped", read.ID, len(next.Errors), len(read.Errors))
	}
	return nil
}

// sameSealed reports whether the stored job cur is unchanged since read in
// what RewriteSealed fences on.
func sameSealed(cur, read *contract.Job) bool {
	return cur.State == read.State && cur.ClaimSeq == read.ClaimSeq && cur.Kind == read.Kind &&
		bytes.Equal(cur.Args, read.Args) && bytes.Equal(cur.Result, read.Result) &&
		slices.EqualFunc(cur.Errors, read.Errors, func(a, b contract.AttemptError) bool {
			return a.Attempt == b.Attempt && a.At.Equal(b.At) && a.Error == b.Error && a.Trace == b.Trace && a.Cause == b.Cause
		})
}

// RemoveDeadWorkers implements contract.Store: it deletes the records whose
// HeartbeatAt is before `before`.
func (s *Store) RemoveDeadWorkers(ctx context.Context, before time.Time) (int, error) {
	if err := s.lock(ctx); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()

	before = contract.UTC(before)
	n := 0
	for id, w := range s.workers {
		if w.HeartbeatAt.Before(before) {
			delete(s.workers, id)
			n++
		}
	}
	return n, nil
}

// Listen implements contract.Notifier. The returned channel receives every
// notification sent through this Store until ctx ends or the store is
// closed; then it is closed. Sends never block: when the channel's buffer is
// full, the notification is dropped for that listener.
func (s *Store) Listen(ctx context.Context) (<-chan contract.Notification, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	ch := make(chan contract.Notification, listenBuffer)
	s.listeners[ch] = struct{}{}
	s.mu.Unlock()

	go func() {
		<-ctx.Done()
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, ok := s.listeners[ch]; ok { // Close may have closed it already
			delete(s.listeners, ch)
			close(ch)
		}
	}()
	return ch, nil
}

// notify sends n to every listener without blocking. The caller holds s.mu,
// which also keeps a channel from being closed during the send.
func (s *Store) notify(n contract.Notification) {
	for ch := range s.listeners {
		select {
		case ch <- n:
		default: // listener is behind; it will poll
		}
	}
}

// Close implements contract.Store. It closes every Listen channel; later calls
// of any method return core.ErrClosed. Closing twice is not an error.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()

	s.closed = true
	for ch := range s.listeners {
		delete(s.listeners, ch)
		close(ch)
	}
	return nil
}

// reindex brings the pending index in line with j's current
// state after a change from state old ("" for a new job). Every state change
// goes through it.
func (s *Store) reindex(j *contract.Job, old contract.State) {
	if old != "" && !old.Final() && j.State.Final() {
		defer s.settle(j.ID, j.State, j.FinishedAt)
	}
	// Remove and re-add rather than update in place: the job's run_at (its
	// position in the index) may have changed.
	if old.Pending() {
		s.pending[j.Queue].remove(j.ID)
	}
	if j.State.Pending() {
		x, ok := s.pending[j.Queue]
		if !ok {
			x = newPendingIndex()
			s.pending[j.Queue] = x
		}
		x.add(j)
	}
}

// remove deletes j and its index entries. A hold j has on a unique key
// outlives it until finishedAt+UniqueFor; with a zero UniqueFor, or a
// zero finishedAt (j never reached a final state), the hold goes with it.
func (s *Store) remove(j *contract.Job, finishedAt time.Time) {
	delete(s.jobs, j.ID)
	if x, ok := s.pending[j.Queue]; ok {
		x.remove(j.ID)
	}
	if sk, ok := s.holdOf[j.ID]; ok {
		delete(s.holdOf, j.ID)
		h := s.holds[sk]
		if h.uniqueFor == 0 || finishedAt.IsZero() {
			delete(s.holds, sk)
		} else {
			h.heldUntil = finishedAt.Add(h.uniqueFor)
		}
	}
}

// collect returns up to limit jobs for which keep reports true, ordered by
// order. A limit below 1 means no limit.
func (s *Store) collect(limit int, order func(a, b *contract.Job) int, keep func(*contract.Job) bool) []*contract.Job {
	return collectFrom(s.jobs, limit, order, keep)
}

// collectFrom is collect over rows (the jobs or the archive).
func collectFrom(rows map[int64]*contract.Job, limit int, order func(a, b *contract.Job) int, keep func(*contract.Job) bool) []*contract.Job {
	var out []*contract.Job
	for _, j := range rows {
		if keep(j) {
			out = append(out, j)
		}
	}
	slices.SortFunc(out, order)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}

// byID orders jobs by ascending id.
func byID(a, b *contract.Job) int { return cmp.Compare(a.ID, b.ID) }

// clone returns a deep copy of j, so that callers never share memory with
// the store.
func clone(j *contract.Job) *contract.Job {
	c := *j
	c.Args = slices.Clone(j.Args)
	c.Tags = slices.Clone(j.Tags)
	c.Metadata = maps.Clone(j.Metadata)
	c.Errors = slices.Clone(j.Errors)
	c.Result = slices.Clone(j.Result)
	c.Checkpoint = slices.Clone(j.Checkpoint)
	c.DependsOn = slices.Clone(j.DependsOn)
	if j.Progress != nil {
		p := *j.Progress
		c.Progress = &p
	}
	return &c
}

// cloneWorker returns a deep copy of w with its times normalised.
func cloneWorker(w contract.WorkerInfo) contract.WorkerInfo {
	w.Queues = slices.Clone(w.Queues)
	w.Tags = slices.Clone(w.Tags)
	w.Metadata = maps.Clone(w.Metadata)
	w.StartedAt = contract.UTC(w.StartedAt)
	w.HeartbeatAt = contract.UTC(w.HeartbeatAt)
	return w
}

// appendError appends e to a job's errors history, first dropping the
// oldest entry after the first when the history already holds
// contract.MaxErrorEntries.
func appendError(errs []contract.AttemptError, e contract.AttemptError) []contract.AttemptError {
	if len(errs) >= contract.MaxErrorEntries {
		errs = slices.Delete(errs, 1, 2)
	}
	return append(errs, e)
}
