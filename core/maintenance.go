package core

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

// Maintenance batch sizes: each store call touches at most this many rows,
// and one round repeats a call at most maintenanceRounds times, so no round
// holds locks or runs for long. Work left over is taken next round.
const (
	maintenanceBatch  = 1000
	maintenanceRounds = 10
)

// maintenanceLoop runs on every node; every step is idempotent, so nodes
// need no leader. Rounds are jittered ±10 % so nodes don't collide.
func (c *Client) maintenanceLoop(ctx context.Context) {
	// First round soon after start, so a restarted node rescues at once.
	if !sleepCtx(ctx, jitter(c.cfg.MaintenanceInterval/5)) {
		return
	}
	for {
		c.Maintain(ctx)
		if !sleepCtx(ctx, jitter(c.cfg.MaintenanceInterval)) {
			return
		}
	}
}

func jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.9 + 0.2*rand.Float64()))
}

// Maintain runs one maintenance round now: rescue expired leases, discard
// pending jobs past their deadline, prune finished jobs past their
// retention (or move them to the archive, with Retention.Archive, and
// prune the archive past Retention.ArchiveTTL), have a store that is a Vacuumer reclaim dead rows when
// enough have accumulated, hand back dead workers' jobs and remove their
// records, and write this node's part of the queue history (see
// QueueHistory).
// Started clients run it every MaintenanceInterval; tests and tools may
// call it directly. Errors are logged and reported to observers, never
// returned: the next round retries.
func (c *Client) Maintain(ctx context.Context) {
	now := c.clock.Now()
	// Expired leases are rescued only once this node has reached the store
	// for RescueGrace without a failure: after an outage every worker's
	// leases look expired, and live workers need a moment to write their
	// outcomes and renew their leases before anyone takes their jobs.
	if c.reach.settled(now, c.cfg.RescueGrace) {
		decide := rescueFunc(CauseLeaseExpired, now)
		for range maintenanceRounds {
			jobs, err := c.store.Rescue(ctx, now, maintenanceBatch, decide)
			if c.maintErr(ctx, "rescue", err) {
				break
			}
			c.emitRescued(now, jobs, CauseLeaseExpired)
			if len(jobs) < maintenanceBatch {
				break
			}
		}
	} else {
		c.log.Debug("backlog: rescue of expired leases waits for the store to stay reachable", "grace", c.cfg.RescueGrace)
	}
	c.repeat(ctx, "discard expired", func() (int, error) {
		n, err := c.store.DiscardExpired(ctx, now, maintenanceBatch)
		if n > 0 {
			c.emit(Event{Kind: EventJobsExpired, At: now, Count: n, State: StateDiscarded, Reason: ReasonDeadline})
		}
		return n, err
	})
	r := c.cfg.Retention
	for _, st := range []struct {
		state State
		ttl   time.Duration
	}{{StateCompleted, r.Completed}, {StateCancelled, r.Cancelled}, {StateDiscarded, r.Discarded}} {
		if st.ttl < 0 {
			continue
		}
		before := now.Add(-st.ttl)
		if archiver, ok := c.store.(contract.Archiver); ok && r.Archive {
			c.repeat(ctx, "archive "+string(st.state), func() (int, error) {
				n, err := archiver.Archive(ctx, st.state, before, maintenanceBatch)
				if n > 0 {
					c.emit(Event{Kind: EventJobsArchived, At: now, Count: n, State: st.state})
				}
				return n, err
			})
			continue
		}
		c.repeat(ctx, "prune "+string(st.state), func() (int, error) {
			n, err := c.store.Prune(ctx, st.state, before, maintenanceBatch)
			if n > 0 {
				c.emit(Event{Kind: EventJobsPruned, At: now, Count: n, State: st.state})
			}
			return n, err
		})
	}
	if archiver, ok := c.store.(contract.Archiver); ok && r.ArchiveTTL > 0 {
		before := now.Add(-r.ArchiveTTL)
		c.repeat(ctx, "prune archive", func() (int, error) {
			n, err := archiver.PruneArchive(ctx, before, maintenanceBatch)
			if n > 0 {
				c.emit(Event{Kind: EventArchivePruned, At: now, Count: n})
			}
			return n, err
		})
	}
	if v, ok := c.store.(contract.Vacuumer); ok {
		began := time.Now()
		n, err := v.Vacuum(ctx)
		if !c.maintErr(ctx, "vacuum", err) && n > 0 {
			took := time.Since(began)
			c.log.Debug("backlog: store vacuumed", "dead_rows", n, "duration", took)
			c.emit(Event{Kind: EventStoreVacuumed, At: now, Count: int(n), Duration: took})
		}
	}
	c.buryDeadWorkers(ctx, now)
	c.maintainHistory(ctx, now)
}

// buryDeadWorkers hands back the jobs of workers declared dead and then
// removes their records. A record is removed only after rescue rounds that
// ended without error and took every job left, so a dead worker's jobs
// never lose their fast path back to the queue (their leases still expire
// if everything else fails).
func (c *Client) buryDeadWorkers(ctx context.Context, now time.Time) {
	deadBefore := now.Add(-c.cfg.WorkerDeadAfter)
	for round := range maintenanceRounds {
		jobs, err := c.store.RescueWorkers(ctx, deadBefore, now, maintenanceBatch, rescueFunc(CauseWorkerDead, now))
		if c.maintErr(ctx, "rescue dead workers' jobs", err) {
			return
		}
		c.emitRescued(now, jobs, CauseWorkerDead)
		if len(jobs) < maintenanceBatch {
			break
		}
		if round == maintenanceRounds-1 {
			return // more may be left: keep the records for the next round
		}
	}
	n, err := c.store.RemoveDeadWorkers(ctx, deadBefore)
	if !c.maintErr(ctx, "remove dead workers", err) && n > 0 {
		c.emit(Event{Kind: EventWorkersPruned, At: now, Count: n})
	}
}

// emitRescued logs and reports jobs handed back from a lost worker; cause
// is CauseLeaseExpired or CauseWorkerDead.
func (c *Client) emitRescued(now time.Time, jobs []*Job, cause string) {
	for _, j := range jobs {
		reason := ""
		if j.State == StateDiscarded {
			reason = ReasonWorkerLost
		}
		c.log.Warn("backlog: rescued job from lost worker", "job_id", j.ID, "kind", j.Kind, "attempt", j.Attempt, "state", j.State, "holder", j.WorkerID, "cause", cause)
		c.emit(Event{Kind: EventJobsRescued, At: now, Queue: j.Queue, Job: j, Count: 1, State: j.State, Reason: reason, Cause: cause})
	}
}

// repeat calls step while it returns a full batch, at most
// maintenanceRounds times.
func (c *Client) repeat(ctx context.Context, what string, step func() (int, error)) {
	for range maintenanceRounds {
		n, err := step()
		if c.maintErr(ctx, what, err) || n < maintenanceBatch {
			return
		}
	}
}

func (c *Client) maintErr(ctx context.Context, what string, err error) bool {
	if ctx.Err() != nil {
		return err != nil
	}
	first := c.reach.observe(c, err)
	if err == nil {
		return false
	}
	if first {
		c.log.Error("backlog: maintenance step failed", "step", what, "err", err)
	} else {
		c.log.Debug("backlog: maintenance step failed", "step", what, "err", err)
	}
	c.emit(Event{Kind: EventStoreError, At: c.clock.Now(), Err: err})
	return true
}
