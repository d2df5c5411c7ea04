//go:build linux

package faulttest

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backlogq/backlog/internal/dbserver"
)

// galeraLease is the workers' lease in the Galera scenario unless
// BACKLOG_FAULT_LEASE says otherwise: backlog work's default. Every node
// stalls while the cluster drops a node (6.0–6.5 s here: Galera's
// evs.suspect_timeout is 5 s), so a live worker keeps its leases only if
// lease − heartbeat interval (two thirds of the lease) exceeds it: the
// suite's own default (4 s) does not.
//
// Each worker's --db lists every node, its own first, as production's
// should (docs/mysql.md): the worker of the killed node goes on through
// another one. With its own node only, it was cut off from the kill until
// the node was Synced again (17–19 s on a quiet machine, 58 s on a loaded
// one), and the jobs it had finished just before the kill, their
// outcomes not yet written, ran again elsewhere once their leases ran out.
const galeraLease = 30 * time.Second

// TestGaleraNodeLoss runs one `backlog work` per node of a three-node
// MariaDB Galera cluster (each worker's --db a URL naming its node first,
// then the others), once
// per claim strategy, with a producer enqueuing through node 3 during the
// run. Once a third of the jobs have finished, node 3 is SIGKILLed; when
// the other two have dropped it, it is started again and rejoins by state
// transfer. The ledger checks hold as in every scenario, with no outage
// to explain a re-run: 0 acknowledged jobs lost, 0 stuck, 0 duplicates.
//
// Measured and reported: the longest gap between writes of a probe that
// inserts a row every 50 ms on node 1 and one on node 2 (the stall of the
// cluster while it drops the node, and while it serves the rejoin), the
// time from the kill until the restarted node's worker starts a job again,
// the certification conflicts the nodes counted, and the peak resident
// memory of each mariadbd.
func TestGaleraNodeLoss(t *testing.T) {
	requireFault(t)
	if os.Getenv(envLease) == "" {
		t.Setenv(envLease, galeraLease.String())
	}
	if os.Getenv(envWorkers) == "" {
		t.Setenv(envWorkers, "3")
	}
	began := time.Now()
	// A node that rejoins runs the rsync state-transfer script before its
	// incremental transfer; on a loaded 2-core machine that alone has
	// taken over a minute, so each start may take up to 5 minutes (the
	// default 2 ran out in a full make test).
	gc := dbserver.Galera(t, dbserver.Options{StartTimeout: 5 * time.Minute})
	t.Logf("three Galera nodes Synced in %s", time.Since(began).Round(time.Millisecond))
	rss := watchRSS(gc)
	defer func() { t.Log(rss.stop()) }()

	for i, strategy := range []string{"skip-locked", "optimistic"} {
		t.Run(strategy, func(t *testing.T) {
			ctx := context.Background()
			wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			for n, node := range gc.Nodes() {
				if !node.Running() { // an earlier run left it down
					if err := node.Start(wctx); err != nil {
						t.Fatalf("start galera node %d: %v", n+1, err)
					}
				}
			}
			for n := range gc.Nodes() {
				if err := gc.WaitSynced(wctx, n+1, len(gc.Nodes())); err != nil {
					t.Fatal(err)
				}
			}
			name := "fault_galera_" + strconv.Itoa(i)
			if err := gc.Node(1).CreateDatabase(ctx, name); err != nil {
				t.Fatal(err)
			}
			urls := make([]string, len(gc.Nodes()))
			for n := range gc.Nodes() {
				urls[n] = galeraURL(gc, n, name) + "?strategy=" + strategy
			}
			cert0 := galeraCerts(t, gc)
			g := &galeraLoss{gc: gc, db: name}
			cfg := loadConfig(t)
			runScenario(t, scenario{
				backend: "galera/" + strategy, label: "galera", what: "node 3 SIGKILLed and rejoined",
				db: urls[0], slotDB: func(slot int) string { return urls[slot%len(urls)] },
				disrupt: g.disrupt,
				produce: cfg.jobs / 2, produceSpread: cfg.killWindow,
				producerFlags: []string{"--db", gc.Node(3).URL(name) + "?strategy=" + strategy},
			})
			cert1 := galeraCerts(t, gc)
			t.Logf("galera/%s: certification failures %d, brute-force aborts %d (all nodes); longest receive queue per node since its start %v; %s",
				strategy, cert1.cert-cert0.cert, cert1.bf-cert0.bf, cert1.recvQ, g.summary(cfg.lease))
		})
	}
}

// galeraCounts are counters of the nodes.
type galeraCounts struct {
	cert, bf int64   // wsrep_local_cert_failures, wsrep_local_bf_aborts summed over the nodes
	recvQ    []int64 // wsrep_local_recv_queue_max per node
}

// galeraCerts reads the certification counters of every node and their
// longest receive queues.
func galeraCerts(t *testing.T, gc *dbserver.GaleraCluster) galeraCounts {
	t.Helper()
	var out galeraCounts
	for i := range gc.Nodes() {
		st, err := gc.Status(context.Background(), i+1)
		if err != nil {
			t.Fatalf("galera node %d status: %v", i+1, err)
		}
		out.cert += st.CertFailures
		out.bf += st.BFAborts
		out.recvQ = append(out.recvQ, st.RecvQueueMax)
	}
	return out
}

// galeraLoss is the disruption of TestGaleraNodeLoss and what it measured.
type galeraLoss struct {
	gc *dbserver.GaleraCluster
	db string

	// Monotonic ns, 0 when it did not happen.
	killAt, droppedAt, startAt, syncedAt, resumedAt int64
	lastBefore                                      int64 // the killed node's worker's last job start before the kill
	probes                                          []*probe
	errs                                            []string
}

// disrupt waits until a third of the jobs have finished, kills node 3,
// starts it again once the others have dropped it, and waits until its
// worker starts a job again.
func (g *galeraLoss) disrupt(ctx context.Context, r *run) {
	c := r.c
	if counts := c.waitFinished(ctx, r.n/3, time.Now().Add(r.cfg.drain)); finished(counts) < r.n/3 {
		if ctx.Err() == nil {
			c.t.Errorf("a third of the jobs did not finish in %s (counts %v)", r.cfg.drain, counts)
		}
		return
	}
	for _, n := range []int{1, 2} {
		p, err := startProbe(g.gc.Node(n), g.db, n)
		if err != nil {
			c.t.Errorf("probe on node %d: %v", n, err)
			continue
		}
		g.probes = append(g.probes, p)
	}
	defer func() {
		for _, p := range g.probes {
			p.stop()
		}
	}()
	time.Sleep(time.Second) // the probes' writes before the kill

	const killed, killedSlot = 3, 2
	g.lastBefore = lastStart(c, killedSlot, 0)
	g.killAt = monoNow()
	if err := g.gc.Node(killed).Kill(); err != nil {
		c.t.Errorf("kill galera node %d: %v", killed, err)
		return
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := g.gc.WaitSynced(wctx, 1, 2); err != nil {
		c.t.Errorf("the others did not drop node %d: %v", killed, err)
		return
	}
	g.droppedAt = monoNow()
	g.startAt = monoNow()
	if err := g.gc.Node(killed).Start(ctx); err != nil {
		c.t.Errorf("start galera node %d again: %v", killed, err)
		return
	}
	g.syncedAt = monoNow()
	r.note("galera node %d SIGKILLed at %s, dropped by the others at %s, started at %s, Synced at %s",
		killed, c.rel(g.killAt), c.rel(g.droppedAt), c.rel(g.startAt), c.rel(g.syncedAt))

	// The worker of the killed node works again, through another node,
	// when it starts a job after the kill.
	deadline := time.Now().Add(r.cfg.drain)
	for g.resumedAt == 0 {
		if at := firstStart(c, killedSlot, g.killAt); at != 0 {
			g.resumedAt = at
			break
		}
		if time.Now().After(deadline) {
			c.t.Errorf("the worker of node %d started no job after the kill, nor within %s after the node was Synced again", killed, r.cfg.drain)
			return
		}
		select {
		case <-ctx.Done():
			g.errs = append(g.errs, "the jobs ran out before the worker of the restarted node started one")
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
	r.note("the worker of node %d started a job again at %s: %s after the kill (the others dropped the node %s after it)",
		killed, c.rel(g.resumedAt), time.Duration(g.resumedAt-g.killAt).Round(time.Millisecond), time.Duration(g.droppedAt-g.killAt).Round(time.Millisecond))
	time.Sleep(2 * time.Second) // the probes' writes after the rejoin
}

// galeraURL is the store URL of database on every node of gc, node n
// (from 0) first: mysql://root@HOST:PORT,HOST:PORT,…/database.
func galeraURL(gc *dbserver.GaleraCluster, n int, database string) string {
	nodes := gc.Nodes()
	u, err := url.Parse(nodes[n].URL(database))
	if err != nil {
		panic(err)
	}
	hosts := []string{u.Host}
	for i, node := range nodes {
		if i != n {
			o, err := url.Parse(node.URL(database))
			if err != nil {
				panic(err)
			}
			hosts = append(hosts, o.Host)
		}
	}
	u.Host = strings.Join(hosts, ",")
	return u.String()
}

// firstStart returns the earliest start of a job by a worker of slot after
// the monotonic time after (0: none), from the ledger.
func firstStart(c *cluster, slot int, after int64) int64 {
	starts := startsAfter(c, slot, after)
	if len(starts) == 0 {
		return 0
	}
	return slices.Min(starts)
}

// lastStart returns the latest start of a job by a worker of slot after
// the monotonic time after (0: none), from the ledger.
func lastStart(c *cluster, slot int, after int64) int64 {
	starts := startsAfter(c, slot, after)
	if len(starts) == 0 {
		return 0
	}
	return slices.Max(starts)
}

// startsAfter returns the starts of jobs by the workers of slot after the
// monotonic time after, from the ledger (none when it cannot be read).
func startsAfter(c *cluster, slot int, after int64) []int64 {
	byJob, _, err := parseLedger(c.ledger)
	if err != nil {
		return nil
	}
	prefix := fmt.Sprintf("%s-w%d-", c.name, slot)
	var out []int64
	for _, execs := range byJob {
		for _, e := range execs {
			if strings.HasPrefix(e.worker, prefix) && e.start > after {
				out = append(out, e.start)
			}
		}
	}
	return out
}

// summary describes the stall, the resume and what the probes saw,
// against the lease.
func (g *galeraLoss) summary(lease time.Duration) string {
	var parts []string
	if g.killAt == 0 {
		return "node 3 was not killed"
	}
	if g.droppedAt != 0 {
		parts = append(parts, fmt.Sprintf("node 3 dropped %s after the kill", time.Duration(g.droppedAt-g.killAt).Round(time.Millisecond)))
	}
	if g.syncedAt != 0 {
		parts = append(parts, fmt.Sprintf("rejoined (Synced) %s after its start", time.Duration(g.syncedAt-g.startAt).Round(time.Millisecond)))
	}
	if g.resumedAt != 0 {
		parts = append(parts, fmt.Sprintf("its worker worked again, through another node, %s after the kill (last job start before it: %s before the kill)",
			time.Duration(g.resumedAt-g.killAt).Round(time.Millisecond), time.Duration(g.killAt-g.lastBefore).Round(time.Millisecond)))
	}
	var longest time.Duration
	for _, p := range g.probes {
		kill, rejoin, writes, errs := p.gaps(g.killAt, g.startAt)
		longest = max(longest, kill.d, rejoin.d)
		parts = append(parts, fmt.Sprintf("probe on node %d (%d writes, %d errors): longest gap %s from %s after the kill while node 3 was dropped, %s from %s after its start during the rejoin",
			p.node, writes, errs, kill.d.Round(time.Millisecond), time.Duration(kill.from-g.killAt).Round(time.Millisecond),
			rejoin.d.Round(time.Millisecond), time.Duration(rejoin.from-g.startAt).Round(time.Millisecond)))
	}
	hb := lease / 3
	parts = append(parts, fmt.Sprintf("longest stall %s against lease %s renewed every %s: a stall stays harmless below lease − heartbeat = %s",
		longest.Round(time.Millisecond), lease, hb.Round(time.Millisecond), (lease-hb).Round(time.Millisecond)))
	if b, err := os.ReadFile(g.gc.Node(3).LogPath()); err == nil {
		if n := strings.Count(string(b), "--wsrep-recover run did not exit"); n > 0 {
			parts = append(parts, fmt.Sprintf("node 3's position recovery (mariadbd --wsrep-recover) hung after logging the position and was killed, %d times so far", n))
		}
	}
	parts = append(parts, g.errs...)
	return strings.Join(parts, "; ")
}

// probe writes a row every 50 ms on one node and records when each write
// returned.
type probe struct {
	node int
	db   *sql.DB
	done chan struct{}
	wg   sync.WaitGroup

	mu     sync.Mutex
	writes []int64 // monotonic ns of each successful write's return
	errs   int
}

func startProbe(srv *dbserver.Server, database string, node int) (*probe, error) {
	db, err := sql.Open(srv.DriverName(), srv.DriverDSN(database))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS galera_probe (node INT NOT NULL, seq BIGINT NOT NULL, at DATETIME(6) NOT NULL, PRIMARY KEY (node, seq))"); err != nil {
		db.Close()
		return nil, err
	}
	p := &probe{node: node, db: db, done: make(chan struct{})}
	p.wg.Add(1)
	go p.run()
	return p, nil
}

func (p *probe) run() {
	defer p.wg.Done()
	for seq := 0; ; seq++ {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		_, err := p.db.ExecContext(ctx, "INSERT INTO galera_probe (node, seq, at) VALUES (?, ?, NOW(6))", p.node, seq)
		cancel()
		p.mu.Lock()
		if err != nil {
			p.errs++
		} else {
			p.writes = append(p.writes, monoNow())
		}
		p.mu.Unlock()
		select {
		case <-p.done:
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (p *probe) stop() {
	select {
	case <-p.done:
	default:
		close(p.done)
	}
	p.wg.Wait()
	p.db.Close()
}

// gap is a time without a successful write: its start and length.
type gap struct {
	from int64
	d    time.Duration
}

// gaps returns the longest gap between successful writes that began
// before rejoinAt (the node's loss) and the longest that began after it
// (the rejoin), with the number of writes and errors.
func (p *probe) gaps(killAt, rejoinAt int64) (kill, rejoin gap, writes, errs int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w := slices.Clone(p.writes)
	for i := 1; i < len(w); i++ {
		g := gap{from: w[i-1], d: time.Duration(w[i] - w[i-1])}
		switch {
		case rejoinAt != 0 && w[i-1] >= rejoinAt:
			if g.d > rejoin.d {
				rejoin = g
			}
		case w[i] >= killAt:
			if g.d > kill.d {
				kill = g
			}
		}
	}
	return kill, rejoin, len(w), p.errs
}

// rssWatch samples the resident memory of every node's mariadbd twice a
// second and keeps each node's peak.
type rssWatch struct {
	gc   *dbserver.GaleraCluster
	done chan struct{}
	wg   sync.WaitGroup

	mu   sync.Mutex
	peak []int64 // kB per node
}

func watchRSS(gc *dbserver.GaleraCluster) *rssWatch {
	w := &rssWatch{gc: gc, done: make(chan struct{}), peak: make([]int64, len(gc.Nodes()))}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		for {
			for i, n := range gc.Nodes() {
				if kb := vmRSS(n.PID()); kb > 0 {
					w.mu.Lock()
					w.peak[i] = max(w.peak[i], kb)
					w.mu.Unlock()
				}
			}
			select {
			case <-w.done:
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	return w
}

// stop ends the sampling and describes the peaks.
func (w *rssWatch) stop() string {
	close(w.done)
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	var parts []string
	for i, kb := range w.peak {
		parts = append(parts, fmt.Sprintf("node %d %d MiB", i+1, kb/1024))
	}
	return "peak resident memory of mariadbd (VmRSS, sampled every 500 ms): " + strings.Join(parts, ", ") +
		" (innodb-buffer-pool-size 64M, gcache.size 32M, performance-schema off)"
}

// vmRSS reads a process's resident memory in kB (0 when unknown).
func vmRSS(pid int) int64 {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb
			}
		}
	}
	return 0
}
