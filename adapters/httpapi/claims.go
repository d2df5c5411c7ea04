package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/backlogq/backlog/core"
)

// Bounds of the claim memory.
const (
	// claimMemoryMax is the most claims a server remembers; claims beyond
	// it are not remembered (their batched outcomes report events without
	// the job's queue, kind and duration).
	claimMemoryMax = 100_000
	// claimMemoryMin is the least time a claim is remembered; a claim is
	// forgotten at its outcome, when its job is claimed again, or after
	// max(claimMemoryMin, 2 × lease) at the latest.
	claimMemoryMin = time.Hour
	// claimSweepEvery is how often remember drops expired claims.
	claimSweepEvery = time.Minute
)

// claimMemory remembers the jobs this server handed out, as claimed, so
// that a batch of outcomes can report its completions and snoozes with
// the job's queue, kind and execution time (Event.Duration) without
// reading each job. It keeps a slim copy of each job: no args, errors,
// result or metadata. It is safe for concurrent use.
type claimMemory struct {
	mu        sync.Mutex
	m         map[int64]*core.Job // by job id; ClaimSeq says which claim
	keep      time.Duration
	lastSweep time.Time
}

func newClaimMemory(lease time.Duration) *claimMemory {
	return &claimMemory{m: map[int64]*core.Job{}, keep: max(claimMemoryMin, 2*lease)}
}

// remember records jobs claimed at now (each job's AttemptedAt is its
// claim time in the store). A job claimed again replaces its earlier
// claim.
func (c *claimMemory) remember(jobs []*core.Job, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now.Sub(c.lastSweep) >= claimSweepEvery || len(c.m)+len(jobs) > claimMemoryMax {
		c.lastSweep = now
		for id, j := range c.m {
			if now.Sub(j.AttemptedAt) >= c.keep {
				delete(c.m, id)
			}
		}
	}
	for _, j := range jobs {
		if _, ok := c.m[j.ID]; !ok && len(c.m) >= claimMemoryMax {
			continue
		}
		c.m[j.ID] = slimJob(j)
	}
}

// take returns and forgets the claim of job id at claimSeq, or nil when
// this server does not remember it (another server handed it out, it was
// forgotten, or it is another claim's).
func (c *claimMemory) take(id int64, claimSeq int64) *core.Job {
	c.mu.Lock()
	defer c.mu.Unlock()
	j, ok := c.m[id]
	if !ok || j.ClaimSeq != claimSeq {
		return nil
	}
	delete(c.m, id)
	return j
}

// peek returns the claim of job id at claimSeq without forgetting it, or
// nil when this server does not remember that claim.
func (c *claimMemory) peek(id int64, claimSeq int64) *core.Job {
	c.mu.Lock()
	defer c.mu.Unlock()
	j, ok := c.m[id]
	if !ok || j.ClaimSeq != claimSeq {
		return nil
	}
	return j
}

// len returns how many claims are remembered (for tests).
func (c *claimMemory) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// slimJob copies what events need of a claimed job.
func slimJob(j *core.Job) *core.Job {
	return &core.Job{
		ID: j.ID, Queue: j.Queue, Kind: j.Kind, Priority: j.Priority, State: j.State,
		Attempt: j.Attempt, ClaimSeq: j.ClaimSeq, MaxAttempts: j.MaxAttempts, RunAt: j.RunAt, Deadline: j.Deadline,
		UniqueKey: j.UniqueKey, Tags: j.Tags, CreatedAt: j.CreatedAt, AttemptedAt: j.AttemptedAt,
		WorkerID: j.WorkerID, LeaseUntil: j.LeaseUntil,
	}
}

// claimQueues returns the queues a claim reads: requested, each of which
// must be among registered (checked through a set: linear in the two
// lists), or registered when requested is empty. Either way at most
// MaxWorkerQueues: a worker registered with more (before the cap) must
// register again or name a subset. Errors are 400 invalid-request problems
// that name the first stray queue and how many queues are registered,
// never the whole list.
func claimQueues(registered, requested []string) ([]string, error) {
	if len(requested) == 0 {
		if len(registered) > MaxWorkerQueues {
			return nil, newProblem(SlugInvalidRequest, fmt.Sprintf("the worker is registered for %d queues, over the limit of %d a claim reads: register again with fewer, or name at most %d in the claim", len(registered), MaxWorkerQueues, MaxWorkerQueues))
		}
		return registered, nil
	}
	if len(requested) > MaxWorkerQueues {
		return nil, newProblem(SlugInvalidRequest, fmt.Sprintf("queues: %d queues, over the limit of %d", len(requested), MaxWorkerQueues))
	}
	set := make(map[string]struct{}, len(registered))
	for _, q := range registered {
		set[q] = struct{}{}
	}
	for _, q := range requested {
		if _, ok := set[q]; !ok {
			return nil, newProblem(SlugInvalidRequest, fmt.Sprintf("queue %q is not among the worker's registered queues %s", q, nameList(registered)))
		}
	}
	return requested, nil
}

// claimBudgeted claims up to limit jobs for w from queues, in store calls
// of chunkSize jobs, and stops once the args and results of the jobs
// claimed reach MaxPageBytes or a call comes back short. It takes slot
// first (a 429 problem when no slot frees up in time) and gives it back
// when it claimed nothing; otherwise the caller gives it back once the
// answer is written. On an error it returns the jobs claimed before it.
func (s *Server) claimBudgeted(ctx context.Context, slot *heavySlot, w core.WorkerInfo, queues []string, limit int) ([]*core.Job, error) {
	if err := slot.acquire(ctx); err != nil {
		return nil, err
	}
	var (
		out  []*core.Job
		size int
		err  error
	)
	for len(out) < limit && size < s.cfg.MaxPageBytes {
		want := s.chunkSize(limit-len(out), size)
		var jobs []*core.Job
		jobs, err = s.rw.Claim(ctx, w, queues, want)
		out = append(out, jobs...)
		for _, j := range jobs {
			size += jobBytes(j)
		}
		if err != nil || len(jobs) < want {
			break
		}
	}
	if len(out) == 0 {
		slot.release()
	}
	return out, err
}

// undeliverableDelay is how long a claimed job that could not be encoded
// for its worker waits before it can be claimed again: it is handed back
// unrun, and would otherwise come back at once, to every claim.
const undeliverableDelay = time.Minute

// writeClaim answers a claim with claimed, each job with the lease token
// token gives it, written as it is encoded. A job that cannot be encoded
// (a stored value outside what JSON can carry) is not answered: it is
// handed back unrun without using an attempt (core.HandBack, cause
// undeliverable), due again after undeliverableDelay, and the other jobs
// are answered. Only delivered jobs are remembered and reported claimed.
func (s *Server) writeClaim(w http.ResponseWriter, r *http.Request, workerID string, claimed []*core.Job, token func(*core.Job) string) error {
	log := reqFrom(r.Context()).log
	now := s.now()
	out := newJobStream(w)
	var undeliverable []*core.Job
	for i, j := range claimed {
		aj := s.apiJob(r.Context(), j)
		aj.LeaseToken = token(j)
		// Remembered and reported before it is written: the worker can
		// send its outcome as soon as it reads it.
		s.claims.remember([]*core.Job{j}, now)
		if err := out.add(aj); err != nil {
			s.claims.take(j.ID, j.ClaimSeq)
			log.Error("backlog http: a claimed job cannot be encoded; handing it back unrun (run `backlog migrate` to repair stored times)",
				"worker_id", workerID, "job_id", j.ID, "kind", j.Kind, "err", err)
			undeliverable = append(undeliverable, j)
			continue
		}
		s.rw.Delivered(j, now)
		claimed[i] = nil // written: let it go
	}
	out.end(0, nil)
	if len(undeliverable) > 0 {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 30*time.Second)
		defer cancel()
		if _, err := s.rw.HandBack(ctx, undeliverable, core.CauseUndeliverable, undeliverableDelay, now); err != nil {
			log.Warn("backlog http: handing back undeliverable jobs failed; they return after lease expiry", "worker_id", workerID, "jobs", len(undeliverable), "err", err)
		}
	}
	return nil
}
