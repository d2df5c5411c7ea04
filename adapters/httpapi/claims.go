package httpapi

import (
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
