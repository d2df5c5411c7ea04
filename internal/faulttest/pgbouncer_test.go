//go:build linux

package faulttest

import (
	"context"
	neturl "net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/internal/dbserver"
)

// TestPgBouncerRestart runs the workers and a producer through a PgBouncer
// in transaction pooling in front of the suite's private PostgreSQL, with
// the store URL a user writes there (pooler=transaction, listen_host on a
// direct connection for notifications). Once a third of the jobs enqueued
// first have finished, it SIGKILLs PgBouncer and starts it again a second
// later on the same port; a third of the rest later, it stops PgBouncer
// with its safe shutdown (SIGINT: it waits for the transactions in flight)
// and starts it again. Every connection through the pooler breaks both
// times. The ledger checks hold as in every scenario, each restart
// counting as a database outage.
func TestPgBouncerRestart(t *testing.T) {
	requireFault(t)
	cfg := loadConfig(t)
	pg := server(t, dbserver.KindPostgres)
	db := freshDatabase(t, pg)
	pb, err := dbserver.StartPgBouncer(context.Background(), pg, dbserver.PgBouncerOptions{})
	if err != nil {
		dbserver.Unavailable(t, "PgBouncer", err)
	}
	t.Cleanup(func() { _ = pb.Close() })
	u, err := neturl.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	url := pb.URL(name) + "&pooler=transaction&listen_host=127.0.0.1:" + strconv.Itoa(pg.Port())
	runScenario(t, scenario{
		backend:       "pgbouncer",
		label:         "pgbouncer",
		what:          "PgBouncer SIGKILLed and restarted, then stopped safely and restarted",
		db:            url,
		srv:           pb,
		disrupt:       restartPooler,
		produce:       cfg.jobs / 4,
		produceSpread: cfg.killWindow / 2,
	})
}

// restartPooler is the disruption of TestPgBouncerRestart.
func restartPooler(ctx context.Context, r *run) {
	for i, how := range []string{"kill", "safe stop"} {
		at := r.cfg.jobs * (i + 1) / 3
		if counts := r.c.waitFinished(ctx, at, time.Now().Add(2*time.Minute)); finished(counts) < at {
			r.c.t.Errorf("%d of %d jobs finished before the %s (counts %v)", finished(counts), at, how, counts)
			return
		}
		from := monoNow()
		var err error
		if how == "kill" {
			err = r.srv.Kill()
		} else {
			err = r.srv.Stop(dbserver.StopFast)
		}
		if err != nil {
			r.c.t.Errorf("%s PgBouncer: %v", how, err)
			return
		}
		time.Sleep(time.Second)
		if err := r.srv.Start(context.Background()); err != nil {
			r.c.t.Errorf("start PgBouncer again: %v", err)
			return
		}
		back := monoNow()
		r.mu.Lock()
		r.outages = append(r.outages, window{from, back + int64(r.cfg.lease/3)})
		r.mu.Unlock()
		claimed, done := r.resumedAfter(back)
		r.note("PgBouncer %s at %s, back at %s (%s later): first execution started %s and finished %s after it went down",
			how, r.c.rel(from), r.c.rel(back), time.Duration(back-from).Round(time.Millisecond),
			durAfter(claimed, from), durAfter(done, from))
	}
}

// resumedAfter waits (at most the drain time) until an execution that
// started after at has finished, reading the ledger, and returns the
// monotonic start of the first execution started after at and the first
// end of one of those (0 when none came).
func (r *run) resumedAfter(at int64) (started, done int64) {
	deadline := time.Now().Add(r.cfg.drain)
	for {
		if byJob, _, err := parseLedger(r.c.ledger); err == nil {
			for _, execs := range byJob {
				for _, e := range execs {
					if e.start <= at {
						continue
					}
					if started == 0 || e.start < started {
						started = e.start
					}
					if e.end != 0 && e.status == "ok" && (done == 0 || e.end < done) {
						done = e.end
					}
				}
			}
		}
		if done != 0 || time.Now().After(deadline) {
			return started, done
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// durAfter formats the time from from to at, or "never" when at is 0.
func durAfter(at, from int64) string {
	if at == 0 {
		return "never"
	}
	return time.Duration(at - from).Round(time.Millisecond).String()
}
