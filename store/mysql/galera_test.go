package mysql

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backlogq/backlog/core/contract"

	"github.com/go-sql-driver/mysql"

	"github.com/backlogq/backlog/internal/dbserver"
	"github.com/backlogq/backlog/store"
)

// TestGalera runs, on one private three-node Galera cluster: detection;
// a multi-host URL over the nodes; claims from two nodes at once, per
// strategy, that never share a job and never let a queue's limits be
// exceeded; error 1047 from a node cut off from the others, which the
// store counts transient and a multi-host store passes over; and a
// multi-host store going on when its node is killed.
func TestGalera(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode")
	}
	began := time.Now()
	c := dbserver.Galera(t, dbserver.Options{})
	t.Logf("three Galera nodes Synced in %s", time.Since(began).Round(time.Millisecond))
	ctx := t.Context()
	dbs := 0
	// open opens a store on a new database, through the nodes named
	// (1-based), the first migrating it.
	open := func(t *testing.T, strategy contract.ClaimStrategy, nodes ...int) []*Store {
		dbs++
		name := fmt.Sprintf("g%d", dbs)
		if err := c.Node(nodes[0]).CreateDatabase(ctx, name); err != nil {
			t.Fatal(err)
		}
		var out []*Store
		for _, n := range nodes {
			st, err := store.Open(ctx, c.Node(n).URL(name)+"?strategy="+string(strategy))
			if err != nil {
				t.Fatalf("open on node %d: %v", n, err)
			}
			t.Cleanup(func() { st.Close() })
			out = append(out, st.(*Store))
		}
		return out
	}
	conflicts := func() (cert, bf int64) {
		for i := range c.Nodes() {
			st, err := c.Status(ctx, i+1)
			if err != nil {
				t.Fatalf("node %d status: %v", i+1, err)
			}
			cert += st.CertFailures
			bf += st.BFAborts
		}
		return cert, bf
	}

	t.Run("detect", func(t *testing.T) {
		s := open(t, contract.StrategySkipLocked, 1)[0]
		if !s.Galera() || !strings.Contains(s.Topology(), "Galera node (cluster of 3 at open)") {
			t.Errorf("Galera() = %v, Topology() = %q; want a Galera node in a cluster of 3", s.Galera(), s.Topology())
		}
		// Migrate's causal wait is one: the node counts it.
		causal := func() int64 {
			var name string
			var n int64
			if err := s.DB().QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'wsrep_causal_reads'").Scan(&name, &n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		before := causal()
		if err := s.causalWait(ctx); err != nil {
			t.Fatal(err)
		}
		if after := causal(); after <= before {
			t.Errorf("wsrep_causal_reads %d before the causal wait, %d after: it waited for nothing", before, after)
		}
	})

	t.Run("multi-host-url", func(t *testing.T) {
		s := open(t, contract.StrategySkipLocked, 1)[0]
		var hosts []string
		for _, n := range c.Nodes() {
			hosts = append(hosts, hostPort(n))
		}
		st, err := store.Open(ctx, "mysql://root@"+strings.Join(hosts, ",")+"/"+s.dbName(t)+"?migrate=false")
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if _, err := st.Insert(ctx, time.Now(), []contract.InsertParams{{Queue: "q", Kind: "k", Args: json.RawMessage(`{}`)}}); err != nil {
			t.Fatal(err)
		}
	})

	for _, strategy := range []contract.ClaimStrategy{contract.StrategySkipLocked, contract.StrategyOptimistic} {
		t.Run("exclusive-across-nodes/"+string(strategy), func(t *testing.T) {
			cert0, bf0 := conflicts()
			stores := open(t, strategy, 1, 2)
			claims, retried := claimAcrossNodes(t, stores, 2000, 10, nil)
			cert, bf := conflicts()
			t.Logf("%d claims from nodes 1 and 2; certification failures %d, brute-force aborts %d, retried by the stores %d", claims, cert-cert0, bf-bf0, retried)
		})
		t.Run("limits-across-nodes/"+string(strategy), func(t *testing.T) {
			cert0, bf0 := conflicts()
			stores := open(t, strategy, 1, 2)
			limits := contract.QueueLimits{MaxRunning: 4, MaxRunningPerKind: map[string]int{"a": 2}}
			claims, retried := claimAcrossNodes(t, stores, 400, 3, &limits)
			cert, bf := conflicts()
			t.Logf("%d limited claims from nodes 1 and 2; certification failures %d, brute-force aborts %d, retried by the stores %d", claims, cert-cert0, bf-bf0, retried)
		})
	}

	t.Run("node-cut-off", func(t *testing.T) {
		s := open(t, contract.StrategySkipLocked, 1)[0]
		db := s.dbName(t)
		// Node 3 leaves the group: it keeps running, but no longer in
		// the primary component, so it refuses statements with 1047.
		n3, err := Open(ctx, "root@tcp("+hostPort(c.Node(3))+")/"+db, WithMigrate(false))
		if err != nil {
			t.Fatal(err)
		}
		defer n3.Close()
		conn, err := n3.DB().Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		// A store through node 3 first, then node 1, opened while node 3
		// is still in the cluster: its connections go to node 3.
		multi, err := store.Open(ctx, "mysql://root@"+hostPort(c.Node(3))+","+hostPort(c.Node(1))+"/"+db+"?migrate=false&max_conns=4")
		if err != nil {
			t.Fatal(err)
		}
		defer multi.Close()
		insert := func(s contract.Store) error {
			_, err := s.Insert(ctx, time.Now(), []contract.InsertParams{{Queue: "q", Kind: "k", Args: json.RawMessage(`{}`)}})
			return err
		}
		if err := insert(multi); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.ExecContext(ctx, "SET GLOBAL wsrep_provider_options = 'gmcast.isolate=1'"); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if _, err := conn.ExecContext(context.Background(), "SET GLOBAL wsrep_provider_options = 'gmcast.isolate=0'"); err != nil {
				t.Errorf("node 3 back in the group: %v", err)
			}
			wctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := c.WaitSynced(wctx, 3, 3); err != nil {
				t.Error(err)
			}
		}()
		var notReady error
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			var n int
			if notReady = conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM backlog_jobs").Scan(&n); notReady != nil {
				break
			}
		}
		var me *mysql.MySQLError
		if !errors.As(notReady, &me) || me.Number != errWsrepNotReady {
			t.Fatalf("a read on the cut-off node: %v; want error %d", notReady, errWsrepNotReady)
		}
		t.Logf("node 3 cut off: %v", notReady)
		if !transient(notReady) {
			t.Errorf("transient(%v) = false; a node that is not ready must be a transient error", notReady)
		}
		// The store opened before goes on through node 1: its
		// connections to node 3 meet 1047, are dropped and replaced.
		began := time.Now()
		if err := insert(multi); err != nil {
			t.Errorf("insert through a multi-host store whose node was cut off: %v", err)
		}
		t.Logf("insert through the multi-host store once its node was cut off: %s (%d retried)", time.Since(began).Round(time.Millisecond), multi.(*Store).retries.Load())
		// A store opened now, listing node 3 first, opens on node 1.
		st, err := store.Open(ctx, "mysql://root@"+hostPort(c.Node(3))+","+hostPort(c.Node(1))+"/"+db+"?migrate=false")
		if err != nil {
			t.Fatalf("a multi-host store whose first node is cut off: %v", err)
		}
		defer st.Close()
		if err := insert(st); err != nil {
			t.Errorf("insert through a multi-host store whose first node is cut off: %v", err)
		}
	})

	// Last: node 1 does not come back.
	t.Run("node-killed", func(t *testing.T) {
		galeraNodeKilled(t, c, open(t, contract.StrategySkipLocked, 1)[0].dbName(t))
	})
}

// galeraNodeKilled: four producers insert through a store on all three
// nodes (mysql://root@n1,n2,n3/db) when node 1, the one it is on, is
// SIGKILLed; the inserts resume on node 2 (the time is logged), and every
// insert that returned is on node 2 afterwards: the cluster replicated it
// before the insert returned.
func galeraNodeKilled(t *testing.T, c *dbserver.GaleraCluster, db string) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var hosts []string
	for _, n := range c.Nodes() {
		hosts = append(hosts, hostPort(n))
	}
	st, err := store.Open(ctx, "mysql://root@"+strings.Join(hosts, ",")+"/"+db+"?migrate=false&max_conns=8")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const producers = 4
	load := startInserts(producers, 10*time.Millisecond, func(n int64) error {
		_, err := st.Insert(ctx, time.Now(), []contract.InsertParams{{Queue: "killed", Kind: "k", Args: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n))}})
		return err
	})
	load.kill(t, c.Node(1).Kill)
	load.waitResumed(time.Minute)
	// Go on until the cluster has had time to drop node 1 (its
	// suspicion timeout, 5 s by default), and measure the longest pause.
	time.Sleep(time.Until(time.Unix(0, load.killedAt.Load()).Add(10 * time.Second)))
	worst := load.end(t)
	slices.Sort(load.okAt)
	var stall time.Duration
	prev := load.killedAt.Load()
	for _, at := range load.okAt {
		stall, prev = max(stall, time.Duration(at-prev)), at
	}
	t.Logf("node 1 SIGKILLed: inserts resumed on another node after %s (slowest of %d producers); the longest pause without a returned insert in the 10 s after the kill: %s; %d inserts failed: %v",
		worst.Round(time.Millisecond), producers, stall.Round(time.Millisecond), load.failed.Load(), load.errTexts)
	on2 := argsNumbersIn(t, ctx, c.Node(2), db, "queue = 'killed'")
	count, lost := 0, 0
	load.acked.Range(func(k, _ any) bool {
		count++
		if !on2[k.(int64)] {
			lost++
		}
		return true
	})
	t.Logf("%d inserts acknowledged, %d found on node 2, %d missing", count, len(on2), lost)
	if lost > 0 {
		t.Errorf("%d of %d acknowledged inserts missing on node 2", lost, count)
	}
}

// dbName returns the database s is opened on.
func (s *Store) dbName(t *testing.T) string {
	t.Helper()
	var name string
	if err := s.DB().QueryRow("SELECT DATABASE()").Scan(&name); err != nil {
		t.Fatal(err)
	}
	return name
}

// claimAcrossNodes inserts total jobs (kinds a, b, c) in queue "q" with
// limits (none when nil), then drains it with 8 claimers (batch jobs a
// claim) spread over stores, completing each claim after a short pause. It
// fails t when a job is claimed twice, when the claimers' ledger of
// claimed, unfinished jobs, or a listing of running jobs right after a
// claim, exceeds the limits, or when jobs are left. It returns the number
// of claims that got jobs and the transient errors the stores retried. A
// claim that returns a transient error (it lost the race more often than
// the store retries) took no effect: the claimer claims again, as the
// engine's fetch loop does.
func claimAcrossNodes(t *testing.T, stores []*Store, total, batch int, limits *contract.QueueLimits) (int64, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	now := time.Now().UTC().Truncate(time.Microsecond)
	if limits != nil {
		if err := stores[0].SetQueueLimits(ctx, "q", *limits, now); err != nil {
			t.Fatal(err)
		}
	}
	kinds := []string{"a", "b", "c"}
	var ps []contract.InsertParams
	for i := range total {
		ps = append(ps, contract.InsertParams{Queue: "q", Kind: kinds[i%len(kinds)], Args: json.RawMessage(`{}`), Priority: 5, MaxAttempts: 3, RunAt: now.Add(-time.Second)})
	}
	for len(ps) > 0 {
		n := min(len(ps), 500)
		if _, err := stores[0].Insert(ctx, now, ps[:n]); err != nil {
			t.Fatal(err)
		}
		ps = ps[n:]
	}
	var retried0 int64
	for _, s := range stores {
		retried0 += s.retries.Load()
	}
	var (
		mu      sync.Mutex
		running = map[int64]*contract.Job{}
		seen    = map[int64]string{}
		done    atomic.Int64
		claims  atomic.Int64
		gaveUp  atomic.Int64
		failed  atomic.Bool
	)
	check := func(what string, jobs []*contract.Job) {
		if limits == nil {
			return
		}
		all, perKind := 0, map[string]int{}
		for _, j := range jobs {
			all++
			perKind[j.Kind]++
		}
		if (all > limits.MaxRunning || perKind["a"] > limits.MaxRunningPerKind["a"]) && failed.CompareAndSwap(false, true) {
			t.Errorf("%s: %d running (per kind %v) exceeds the limits %+v", what, all, perKind, *limits)
		}
	}
	var wg sync.WaitGroup
	for c := range 8 {
		s := stores[c%len(stores)]
		worker := fmt.Sprintf("claimer-%d", c)
		wg.Go(func() {
			for done.Load() < int64(total) && !failed.Load() {
				if ctx.Err() != nil {
					t.Errorf("%s: gave up with %d of %d jobs completed", worker, done.Load(), total)
					return
				}
				got, err := s.Claim(ctx, contract.ClaimParams{Queue: "q", WorkerID: worker, Limit: batch, Now: now, LeaseUntil: now.Add(time.Hour)})
				if err != nil && transient(err) && ctx.Err() == nil {
					// A claim that lost the race more times than the
					// store retries: it took no effect, and the
					// engine's fetch loop claims again.
					gaveUp.Add(1)
					continue
				}
				if err != nil {
					t.Errorf("%s: Claim: %v", worker, err)
					failed.Store(true)
					return
				}
				if len(got) == 0 {
					time.Sleep(time.Millisecond)
					continue
				}
				claims.Add(1)
				mu.Lock()
				for _, j := range got {
					if w, dup := seen[j.ID]; dup {
						t.Errorf("job %d claimed by %s and %s", j.ID, w, worker)
						failed.Store(true)
					}
					seen[j.ID] = worker
					running[j.ID] = j
				}
				check("the ledger of claimed, unfinished jobs", slices.Collect(maps.Values(running)))
				mu.Unlock()
				if limits != nil {
					listed, err := s.List(ctx, contract.ListParams{Queue: "q", States: []contract.State{contract.StateRunning}, Limit: 1000})
					if err != nil {
						t.Errorf("%s: List: %v", worker, err)
						return
					}
					check("List of running jobs right after a claim", listed)
				}
				time.Sleep(time.Duration(len(got)) * 100 * time.Microsecond)
				outs := make([]contract.Outcome, len(got))
				mu.Lock()
				for i, j := range got {
					delete(running, j.ID)
					outs[i] = contract.Outcome{JobID: j.ID, WorkerID: worker, ClaimSeq: j.ClaimSeq, Attempt: j.Attempt, Kind: contract.OutcomeComplete, At: now}
				}
				mu.Unlock()
				res, err := s.Finish(ctx, outs)
				if err != nil {
					t.Errorf("%s: Finish: %v", worker, err)
					failed.Store(true)
					return
				}
				for _, r := range res {
					if !r.Applied {
						t.Errorf("%s: completion of job %d it had just claimed was not applied", worker, r.JobID)
					}
				}
				done.Add(int64(len(got)))
			}
		})
	}
	wg.Wait()
	if !failed.Load() && len(seen) != total {
		t.Errorf("%d distinct jobs claimed of %d", len(seen), total)
	}
	var retried int64
	for _, s := range stores {
		retried += s.retries.Load()
	}
	if n := gaveUp.Load(); n > 0 {
		t.Logf("%d claims returned a transient error after the store's retries (claimed again)", n)
	}
	return claims.Load(), retried - retried0
}
