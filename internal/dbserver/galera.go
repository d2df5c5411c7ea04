package dbserver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// galeraProviders are the places StartGalera looks for the Galera 4
// replication library (Debian's galera-4 package installs the first).
var galeraProviders = []string{
	"/usr/lib/galera/libgalera_smm.so",
	"/usr/lib/galera-4/libgalera_smm.so",
	"/usr/lib64/galera-4/libgalera_smm.so",
	"/usr/lib64/galera/libgalera_smm.so",
}

// Galera starts a private three-node Galera cluster for t (StartGalera)
// and closes it when t ends, skipping or failing t as MariaDB does.
//
// The clusters of one machine take turns: Galera first waits until no
// other process holds a cluster it made (an exclusive flock on
// $TMPDIR/backlog-galera.lock, held until t's cluster is closed). Three
// nodes replicating every write use a core or more between them, and with
// two clusters at once on a 2-core machine (go test runs packages side by
// side) a node's state transfer took 58 s instead of 17 s.
func Galera(t testing.TB, opts Options) *GaleraCluster {
	t.Helper()
	began := time.Now()
	unlock, err := machineLock("backlog-galera.lock")
	if err != nil {
		t.Fatalf("dbserver: wait for this machine's other Galera clusters: %v", err)
	}
	if waited := time.Since(began); waited > time.Second {
		t.Logf("dbserver: waited %s for another process's Galera cluster to close", waited.Round(time.Millisecond))
	}
	c, err := StartGalera(context.Background(), 3, opts)
	if err != nil {
		unlock()
		Unavailable(t, "MariaDB Galera", err)
	}
	t.Cleanup(func() {
		defer unlock()
		if err := c.Close(); err != nil {
			t.Errorf("dbserver: close Galera cluster: %v", err)
		}
	})
	return c
}

// GaleraCluster is a private MariaDB Galera cluster: n mariadbd nodes on
// 127.0.0.1 that replicate every write synchronously to each other
// (multi-primary: any node accepts writes). Each node is a Server of its
// own, which can be stopped, killed and started again; a node started
// again rejoins the cluster by state transfer from a running node (an
// incremental one from the donor's cache when it can, else a full copy of
// the data directory with rsync). Its methods are safe for concurrent use.
type GaleraCluster struct {
	nodes   []*Server
	dir     string
	ownsDir bool
}

// Nodes are the cluster's nodes, in order (node 1 first: the one that
// bootstrapped the cluster).
func (c *GaleraCluster) Nodes() []*Server { return c.nodes }

// Node is node i, counted from 1 as in the package documentation and the
// servers' logs (node 1 is Nodes()[0]). It panics when i is out of range.
func (c *GaleraCluster) Node(i int) *Server { return c.nodes[i-1] }

// URLs are the backlog store URLs of the database "test" on each node
// (mysql://root@127.0.0.1:PORT/test), in node order.
func (c *GaleraCluster) URLs() []string {
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.DSN()
	}
	return out
}

// Dir is the directory holding one subdirectory per node (node1, node2, …).
func (c *GaleraCluster) Dir() string { return c.dir }

// Close kills every node and removes the cluster's directory when this
// package made it. It is idempotent.
func (c *GaleraCluster) Close() error {
	var errs []error
	for _, n := range c.nodes {
		errs = append(errs, n.Close())
	}
	if c.ownsDir {
		if err := os.RemoveAll(c.dir); err != nil {
			errs = append(errs, fmt.Errorf("dbserver: remove %s: %w", c.dir, err))
		}
	}
	return errors.Join(errs...)
}

// GaleraStatus is what a node says of itself (SHOW GLOBAL STATUS LIKE
// 'wsrep_%').
type GaleraStatus struct {
	// State is wsrep_local_state_comment: "Synced" on a node that serves
	// reads and writes; "Joining", "Joined", "Donor/Desynced" or
	// "Initialized" otherwise.
	State string
	// ClusterSize is wsrep_cluster_size: the nodes in the node's
	// component.
	ClusterSize int
	// Primary is wsrep_cluster_status = 'Primary': the node belongs to
	// the component that holds a quorum and accepts writes.
	Primary bool
	// CertFailures is wsrep_local_cert_failures: local transactions that
	// failed certification (lost a conflict with another node's write).
	CertFailures int64
	// BFAborts is wsrep_local_bf_aborts: local transactions aborted by a
	// replicated one (brute force).
	BFAborts int64
	// RecvQueueMax is wsrep_local_recv_queue_max: the most write sets
	// waiting in the node's receive queue (in memory) to be applied,
	// since the node started.
	RecvQueueMax int64
}

// Status reads node i's (counted from 1) Galera status through its unix
// socket. It returns an error when the node does not answer.
func (c *GaleraCluster) Status(ctx context.Context, i int) (GaleraStatus, error) {
	n := c.Node(i)
	return galeraStatus(ctx, n.impl.(*galeraImpl), n)
}

// WaitSynced waits until node i (counted from 1) is Synced and sees a
// primary component of want nodes (want ≤ 0: any size), or ctx ends.
func (c *GaleraCluster) WaitSynced(ctx context.Context, i, want int) error {
	var last error
	for {
		st, err := c.Status(ctx, i)
		switch {
		case err != nil:
			last = err
		case st.State != "Synced" || !st.Primary:
			last = fmt.Errorf("state %s, primary %v", st.State, st.Primary)
		case want > 0 && st.ClusterSize != want:
			last = fmt.Errorf("cluster size %d, want %d", st.ClusterSize, want)
		default:
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("dbserver: galera node %d not synced: %v (%w)", i, last, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// StartGalera starts a MariaDB Galera cluster of n nodes (n ≥ 1; 3 is the
// smallest that survives the loss of one node with a quorum) and waits
// until every node is Synced. Node 1 gets a new data directory
// (mariadb-install-db), bootstraps the cluster (--wsrep-new-cluster) and is
// set up as StartMariaDB sets up a server (root@127.0.0.1 without password,
// the database "test"); the other nodes then join one after the other, each
// receiving node 1's data by rsync state transfer. Each node listens on
// ports of its own (SQL, group communication, incremental and full state
// transfer), all on 127.0.0.1.
//
// opts applies to every node: Options.Dir, when given, holds one
// subdirectory per node; Options.Port must be 0 (ports are picked);
// Options.Settings override the defaults of every node, the
// "wsrep-provider-options" setting being appended to the provider options
// this package sets (addresses and gcache size), so its later values win.
// Options.StartTimeout bounds each node's start, state transfer included.
//
// Errors wrap ErrUnavailable when MariaDB, the Galera library or rsync is
// not installed, or the mysql OS user is missing while running as root; on
// any error nothing is left behind. Close the cluster when done.
func StartGalera(ctx context.Context, n int, opts Options) (*GaleraCluster, error) {
	if n < 1 {
		return nil, fmt.Errorf("dbserver: a Galera cluster of %d nodes", n)
	}
	if opts.Port != 0 {
		return nil, errors.New("dbserver: StartGalera picks its ports: Options.Port must be 0")
	}
	bins, err := findMariaDB(opts.BinDir)
	if err != nil {
		return nil, err
	}
	provider := ""
	for _, p := range galeraProviders {
		if _, err := os.Stat(p); err == nil {
			provider = p
			break
		}
	}
	if provider == "" {
		return nil, fmt.Errorf("%w: Galera library not found among %v (Debian package galera-4)", ErrUnavailable, galeraProviders)
	}
	for _, prog := range []string{"rsync", "wsrep_sst_rsync"} {
		if _, err := exec.LookPath(prog); err != nil {
			return nil, fmt.Errorf("%w: %s not found on PATH (Debian packages rsync and mariadb-server)", ErrUnavailable, prog)
		}
	}
	if _, err := credential(opts.OSUser, "mysql"); err != nil {
		return nil, err
	}

	c := &GaleraCluster{}
	if opts.Dir == "" {
		d, err := os.MkdirTemp("", "backlog-galera-")
		if err != nil {
			return nil, fmt.Errorf("dbserver: %w", err)
		}
		c.dir, c.ownsDir = d, true
	} else {
		d, err := filepath.Abs(opts.Dir)
		if err != nil {
			return nil, fmt.Errorf("dbserver: %w", err)
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("dbserver: %w", err)
		}
		c.dir = d
	}
	// The nodes' users must reach their own subdirectories.
	if err := os.Chmod(c.dir, 0o755); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("dbserver: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			_ = c.Close()
		}
	}()

	ports, err := distinctFreePorts(4 * n)
	if err != nil {
		return nil, err
	}
	gcomm := make([]string, n)
	for i := range n {
		gcomm[i] = "127.0.0.1:" + strconv.Itoa(ports[4*i+1])
	}
	address := "gcomm://" + strings.Join(gcomm, ",")
	impls := make([]*galeraImpl, n)
	for i := range n {
		g := &galeraImpl{mariaImpl: mariaImpl{bins: bins, fsync: opts.Fsync}}
		g.bootstrap.Store(i == 0)
		impls[i] = g
		nopts := opts
		nopts.Dir = filepath.Join(c.dir, "node"+strconv.Itoa(i+1))
		nopts.Port = ports[4*i]
		nopts.Settings = galeraSettings(provider, address, ports[4*i+1], ports[4*i+2], ports[4*i+3], opts.Settings)
		s, err := newServer(KindMariaDB, nopts, "mysql", g)
		if err != nil {
			return nil, err
		}
		c.nodes = append(c.nodes, s)
	}

	// Node 1 is installed and bootstraps; the joiners' data directories
	// are made meanwhile (state transfer replaces them entirely, but
	// mariadbd wants a directory it owns).
	first := c.nodes[0]
	if err := impls[0].installDB(ctx, first); err != nil {
		return nil, err
	}
	for _, s := range c.nodes[1:] {
		if err := os.Mkdir(s.dataDir, 0o700); err != nil {
			return nil, fmt.Errorf("dbserver: %w", err)
		}
		if err := s.chown(s.dataDir); err != nil {
			return nil, err
		}
	}
	if err := first.Start(ctx); err != nil {
		return nil, fmt.Errorf("dbserver: galera node 1: %w", err)
	}
	// Later starts of node 1 join the others instead of founding a new
	// cluster.
	impls[0].bootstrap.Store(false)
	if err := impls[0].setUp(ctx, first); err != nil {
		return nil, err
	}
	for i, s := range c.nodes[1:] {
		if err := s.Start(ctx); err != nil {
			return nil, fmt.Errorf("dbserver: galera node %d: %w", i+2, err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for i := range c.nodes {
		if err := c.WaitSynced(wctx, i+1, n); err != nil {
			return nil, err
		}
	}
	ok = true
	return c, nil
}

// galeraSettings are a node's settings: Galera's requirements, its ports,
// modest memory, then the caller's settings (which win; provider options
// are appended to this package's).
func galeraSettings(provider, address string, gport, istPort, sstPort int, user map[string]string) map[string]string {
	popts := "gmcast.listen_addr=tcp://127.0.0.1:" + strconv.Itoa(gport) +
		";ist.recv_addr=127.0.0.1:" + strconv.Itoa(istPort) +
		";gcache.size=" + galeraGcacheSize
	out := map[string]string{
		"wsrep-on":                  "ON",
		"wsrep-provider":            provider,
		"wsrep-cluster-address":     address,
		"wsrep-cluster-name":        "backlog",
		"wsrep-node-address":        "127.0.0.1:" + strconv.Itoa(gport),
		"wsrep-sst-receive-address": "127.0.0.1:" + strconv.Itoa(sstPort),
		"wsrep-sst-method":          "rsync",
		"binlog-format":             "ROW",
		"innodb-autoinc-lock-mode":  "2",
		"default-storage-engine":    "InnoDB",
		"innodb-buffer-pool-size":   "64M",
		"innodb-log-file-size":      "48M",
		"performance-schema":        "OFF",
		"wsrep-provider-options":    popts,
	}
	for k, v := range user {
		if k == "wsrep-provider-options" || k == "wsrep_provider_options" {
			out["wsrep-provider-options"] = popts + ";" + v
			continue
		}
		out[k] = v
	}
	return out
}

// galeraGcacheSize is each node's write-set cache (a file mapped into
// memory): what a rejoining node can catch up on incrementally.
const galeraGcacheSize = "32M"

// distinctFreePorts picks n different free ports (freePort).
func distinctFreePorts(n int) ([]int, error) {
	seen := map[int]bool{}
	var out []int
	for tries := 0; len(out) < n; tries++ {
		if tries > 20*n {
			return nil, errors.New("dbserver: no free ports for a Galera cluster")
		}
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out, nil
}

// galeraImpl is a MariaDB server that is a Galera node: it founds the
// cluster on its first start when bootstrap is set, and counts as
// started once it is Synced.
type galeraImpl struct {
	mariaImpl
	bootstrap atomic.Bool
	// startPosition is the position prepare recovered ("uuid:seqno"), for
	// the next start; guarded by the Server's mutex.
	startPosition string
}

func (g *galeraImpl) command(s *Server) []string {
	argv := g.mariaImpl.command(s)
	if g.bootstrap.Load() {
		argv = append(argv, "--wsrep-new-cluster")
	}
	if g.startPosition != "" {
		argv = append(argv, "--wsrep-start-position="+g.startPosition)
	}
	return argv
}

// prepare recovers the replication position of a node that crashed (or
// was killed), as the galera_recovery script of MariaDB's service does:
// its grastate.dat then says seqno -1, and without a position the node
// would need a full state transfer (rsync of the whole data directory from
// a donor, which blocks writes on the donor meanwhile) where the write
// sets it missed, still in the donor's gcache, would do (an incremental
// transfer). `mariadbd --wsrep-recover` runs InnoDB's crash recovery,
// logs "Recovered position: uuid:seqno" and exits; the next start passes
// that position as --wsrep-start-position.
//
// The recovery run also replays the node's DDL log (ddl_recovery.log)
// against its own data. Without it, a node that needs a full state
// transfer after all would replay its stale DDL log on the donor's data,
// which rsync transfer leaves in place: seen here dropping a table created
// before the kill.
func (g *galeraImpl) prepare(ctx context.Context, s *Server) error {
	g.startPosition = ""
	b, err := os.ReadFile(filepath.Join(s.dataDir, "grastate.dat"))
	if err != nil {
		return nil // a new node: state transfer
	}
	var seqno string
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "seqno:"); ok {
			seqno = strings.TrimSpace(v)
		}
	}
	if seqno != "-1" {
		return nil // a clean stop: the position is there
	}
	logPath := filepath.Join(s.dir, "recover.log")
	_ = os.Remove(logPath)
	// No network and a socket of its own: clients of the node, which keep
	// trying while it is down, must not reach the recovery run.
	argv := append(g.mariaImpl.command(s), "--wsrep-recover", "--log-error="+logPath,
		"--skip-networking", "--socket="+filepath.Join(s.dir, "recover.sock"))
	p, err := s.spawn(argv)
	if err != nil {
		return err
	}
	// Once the position is logged the run has nothing left to do. It
	// usually exits at once, but in about one in four runs after a kill
	// under load (MariaDB 10.11.19) it never exits and grows by some
	// 80 MB of resident memory a second (7.4 GB after 80 s): its main
	// thread waits in InnoDB's shutdown (ha_finalize_handlerton,
	// tpool::waitable_task::disable) for a background task that spins in
	// sched_yield. Give it a moment, then kill it.
	var exitBy <-chan time.Time
	for g.startPosition == "" {
		out, _ := os.ReadFile(logPath)
		if pos, ok := recoveredPosition(string(out)); ok {
			g.startPosition = pos
			exitBy = time.After(3 * time.Second)
			break
		}
		select {
		case <-p.done:
			out, _ := os.ReadFile(logPath)
			if pos, ok := recoveredPosition(string(out)); ok {
				g.startPosition = pos
				return nil
			}
			// No position: the node starts without one and gets a full
			// state transfer.
			return nil
		case <-ctx.Done():
			_ = p.killTree()
			return fmt.Errorf("dbserver: recover the galera position: %w\n%s", ctx.Err(), fileTail(logPath, 2000))
		case <-time.After(50 * time.Millisecond):
		}
	}
	select {
	case <-p.done:
	case <-exitBy:
		if f, err := os.OpenFile(s.logPath, os.O_WRONLY|os.O_APPEND, 0); err == nil {
			fmt.Fprintf(f, "===== dbserver: %s: %s\n", time.Now().Format(time.RFC3339Nano), recoveryKilled)
			f.Close()
		}
		return p.killTree()
	}
	return nil
}

// recoveryKilled is the note written to a Galera node's log when its
// position recovery had to be killed.
const recoveryKilled = "the --wsrep-recover run did not exit 3 s after it logged the position: killed"

// recoveredPosition finds "WSREP: Recovered position: uuid:seqno" in the
// log of a --wsrep-recover run, unless the seqno is -1 (unknown).
func recoveredPosition(log string) (string, bool) {
	for _, line := range strings.Split(log, "\n") {
		_, pos, ok := strings.Cut(line, "WSREP: Recovered position: ")
		if !ok {
			continue
		}
		pos = strings.TrimSpace(pos)
		if u, n, ok := strings.Cut(pos, ":"); ok && u != "" && n != "-1" {
			return pos, true
		}
	}
	return "", false
}

// ping succeeds once the node is Synced in a primary component.
func (g *galeraImpl) ping(ctx context.Context, s *Server) error {
	st, err := galeraStatus(ctx, g, s)
	if err != nil {
		return err
	}
	if st.State != "Synced" || !st.Primary {
		return fmt.Errorf("galera node is %s (primary: %v)", st.State, st.Primary)
	}
	return nil
}

func galeraStatus(ctx context.Context, g *galeraImpl, s *Server) (GaleraStatus, error) {
	db, err := sql.Open("mysql", g.socketDSN(s))
	if err != nil {
		return GaleraStatus{}, err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_local_state_comment', 'wsrep_cluster_size', 'wsrep_cluster_status', 'wsrep_local_cert_failures', 'wsrep_local_bf_aborts', 'wsrep_local_recv_queue_max')")
	if err != nil {
		return GaleraStatus{}, err
	}
	defer rows.Close()
	var st GaleraStatus
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return GaleraStatus{}, err
		}
		switch k {
		case "wsrep_local_state_comment":
			st.State = v
		case "wsrep_cluster_size":
			st.ClusterSize, _ = strconv.Atoi(v)
		case "wsrep_cluster_status":
			st.Primary = v == "Primary"
		case "wsrep_local_cert_failures":
			st.CertFailures, _ = strconv.ParseInt(v, 10, 64)
		case "wsrep_local_bf_aborts":
			st.BFAborts, _ = strconv.ParseInt(v, 10, 64)
		case "wsrep_local_recv_queue_max":
			st.RecvQueueMax, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return st, rows.Err()
}
