//go:build linux

package faulttest

import (
	"context"
	"testing"
	"time"

	"github.com/backlogq/backlog/internal/dbserver"
)

// FailoverDelay is how long the primary stays dead before the test, as
// the failover manager, promotes the standby.
const FailoverDelay = 2 * time.Second

// TestPostgresFailover runs the workers and a producer on the multi-host
// URL (target_session_attrs=read-write) of a private PostgreSQL primary
// with a synchronous standby (dbserver.PostgresPair). Once a third of the
// jobs enqueued first have finished, it SIGKILLs the primary (every
// process of it, as when its machine dies) and promotes the standby
// FailoverDelay later (a scripted failover: dbserver.Server.Promote).
// Workers and producer reconnect by themselves through the URL. The
// ledger checks hold as in every scenario: every job whose enqueue
// returned is in the store and final, none left running, no re-run
// without a dead worker (the failover counts as a database outage, from
// the kill until a third of a lease after the promotion). The summary
// states the time to resume: from the kill to the first claim and to the
// first finished execution on the new primary.
func TestPostgresFailover(t *testing.T) {
	requireFault(t)
	cfg := loadConfig(t)
	start := time.Now()
	primary, standby := dbserver.PostgresPair(t, dbserver.Options{})
	t.Logf("private primary on port %d with a synchronous standby on port %d, started in %s",
		primary.Port(), standby.Port(), time.Since(start).Round(time.Millisecond))
	runScenario(t, scenario{
		backend:       "postgres-failover",
		label:         "failover",
		what:          "primary SIGKILLed, standby promoted " + FailoverDelay.String() + " later",
		db:            dbserver.FailoverURL("test", primary, standby),
		srv:           primary,
		disrupt:       failover(standby, FailoverDelay),
		produce:       cfg.jobs / 4,
		produceSpread: cfg.killWindow / 2,
	})
}

// failover returns the disruption of TestPostgresFailover: once a third of
// the jobs enqueued first have finished, kill r.srv (the primary), promote
// standby delay later, record the outage and note the time to resume.
func failover(standby *dbserver.Server, delay time.Duration) func(context.Context, *run) {
	return func(ctx context.Context, r *run) {
		third := r.cfg.jobs / 3
		if counts := r.c.waitFinished(ctx, third, time.Now().Add(2*time.Minute)); finished(counts) < third {
			r.c.t.Errorf("%d of %d jobs finished before the failover could start (counts %v)", finished(counts), third, counts)
			return
		}
		from := monoNow()
		if err := r.srv.Kill(); err != nil {
			r.c.t.Errorf("kill the primary: %v", err)
			return
		}
		// The failover manager sees the primary gone, waits, promotes. The
		// promotion must happen even when the jobs are done meanwhile, or
		// the checks could not read the store.
		time.Sleep(delay)
		pctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := standby.Promote(pctx)
		cancel()
		if err != nil {
			r.c.t.Errorf("promote the standby: %v", err)
			return
		}
		promoted := monoNow()
		r.mu.Lock()
		r.outages = append(r.outages, window{from, promoted + int64(r.cfg.lease/3)})
		r.mu.Unlock()

		// Time to resume, from the ledger: the first execution that
		// started after the promotion ran on a job claimed on the new
		// primary (the old one is dead, and claims made there before the
		// kill started their handlers long before).
		claimed, done := r.resumedAfter(promoted)
		if done == 0 {
			r.note("primary SIGKILLed at %s, standby promoted at %s; no job ran on the new primary within %s", r.c.rel(from), r.c.rel(promoted), r.cfg.drain)
			r.c.t.Errorf("no job ran on the promoted standby within %s", r.cfg.drain)
			return
		}
		r.note("time to resume: primary SIGKILLed at %s, standby promoted at %s (%s after the kill); first claim on the new primary %s after the kill (%s after the promotion), first execution finished there %s after the kill",
			r.c.rel(from), r.c.rel(promoted), time.Duration(promoted-from).Round(time.Millisecond),
			time.Duration(claimed-from).Round(time.Millisecond), time.Duration(claimed-promoted).Round(time.Millisecond),
			time.Duration(done-from).Round(time.Millisecond))
	}
}
