//go:build linux

package dbserver

import (
	"context"
	"errors"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestGalera starts a three-node cluster, reads on node 3 a row written on
// node 1, kills node 2 and writes on the others, then starts node 2 again
// and finds it Synced with every row.
func TestGalera(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	c := Galera(t, Options{})
	t.Logf("three nodes Synced in %v", time.Since(start).Round(time.Millisecond))
	if len(c.Nodes()) != 3 || len(c.URLs()) != 3 {
		t.Fatalf("%d nodes, %d URLs", len(c.Nodes()), len(c.URLs()))
	}
	seen := map[int]bool{}
	for i, n := range c.Nodes() {
		if seen[n.Port()] || n.Port() == 3306 {
			t.Fatalf("node %d: port %d taken twice or shared", i+1, n.Port())
		}
		seen[n.Port()] = true
		if os.Geteuid() == 0 {
			if uid := procUID(t, n.PID()); uid == "0" {
				t.Fatalf("node %d runs as root", i+1)
			}
		}
		st, err := c.Status(ctx, i+1)
		if err != nil || st.State != "Synced" || st.ClusterSize != 3 || !st.Primary {
			t.Fatalf("node %d: %+v, %v", i+1, st, err)
		}
	}

	execSQL(t, c.Node(1), "test", "CREATE TABLE t (id INT PRIMARY KEY, v INT)")
	execSQL(t, c.Node(1), "test", "INSERT INTO t VALUES (1, 42)")
	if v := syncQueryInt(t, c.Node(3), "test", "SELECT v FROM t WHERE id = 1"); v != 42 {
		t.Fatalf("node 3 reads %d, want 42", v)
	}

	if err := c.Node(2).Kill(); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := c.WaitSynced(wctx, 1, 2); err != nil {
		t.Fatal(err)
	}
	execSQL(t, c.Node(1), "test", "INSERT INTO t VALUES (2, 43)")
	execSQL(t, c.Node(3), "test", "INSERT INTO t VALUES (3, 44)")

	// A client keeps querying node 2 while it is down and starting, as
	// workers do.
	knock, knocked := make(chan struct{}), make(chan struct{})
	client := open(t, c.Node(2), "test") // its pool keeps the connections
	go func() {
		defer close(knocked)
		for {
			select {
			case <-knock:
				return
			case <-time.After(20 * time.Millisecond):
				pctx, cancel := context.WithTimeout(ctx, time.Second)
				_, _ = client.ExecContext(pctx, "SELECT COUNT(*) FROM t")
				cancel()
			}
		}
	}()
	restart := time.Now()
	err := c.Node(2).Start(ctx)
	close(knock)
	<-knocked
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("node 2 Synced again %v after its start", time.Since(restart).Round(time.Millisecond))
	// A deadline of its own: the rejoin may have used most of wctx's
	// minute on a loaded machine (59 s once, beside other clusters).
	sctx, scancel := context.WithTimeout(ctx, time.Minute)
	defer scancel()
	if err := c.WaitSynced(sctx, 2, 3); err != nil {
		t.Fatal(err)
	}
	if n := syncQueryInt(t, c.Node(2), "test", "SELECT COUNT(*) FROM t"); n != 3 {
		t.Fatalf("node 2 has %d rows, want 3", n)
	}
	// Its position recovered, node 2 caught up on the write sets it missed
	// (an incremental transfer, from seqno > 0) instead of copying a whole
	// data directory.
	if from, ok := istFrom(c.Node(2).LogPath()); !ok || from == 0 {
		t.Fatalf("node 2 rejoined without an incremental state transfer (from seqno %d, found %v); see %s", from, ok, c.Node(2).LogPath())
	}
	execSQL(t, c.Node(2), "test", "INSERT INTO t VALUES (4, 45)")
	if n := syncQueryInt(t, c.Node(1), "test", "SELECT COUNT(*) FROM t"); n != 4 {
		t.Fatalf("node 1 has %d rows, want 4", n)
	}

	if err := c.Node(1).CreateDatabase(ctx, "other_db"); err != nil {
		t.Fatal(err)
	}
	execSQL(t, c.Node(3), "other_db", "CREATE TABLE u (v INT PRIMARY KEY)")
}

// istFrom returns the first seqno of the incremental state transfer the
// node's last start prepared for (0: a full one), from its log.
func istFrom(logPath string) (int, bool) {
	b, err := os.ReadFile(logPath)
	if err != nil {
		return 0, false
	}
	log := string(b)
	if i := strings.LastIndex(log, "===== dbserver:"); i >= 0 {
		log = log[i:]
	}
	m := regexp.MustCompile(`Prepared IST receiver for (\d+)-`).FindStringSubmatch(log)
	if m == nil {
		return 0, false
	}
	n, _ := strconv.Atoi(m[1])
	return n, true
}

// syncQueryInt is queryInt after the node has applied every write the
// cluster committed before (wsrep_sync_wait = 1): a node applies others'
// writes after they commit there, so a plain read may miss the latest.
func syncQueryInt(t *testing.T, s *Server, db, q string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := open(t, s, db).Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SET SESSION wsrep_sync_wait = 1"); err != nil {
		t.Fatal(err)
	}
	var v int
	if err := conn.QueryRowContext(ctx, q).Scan(&v); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return v
}

func TestGaleraUnavailable(t *testing.T) {
	ctx := context.Background()
	if _, err := StartGalera(ctx, 3, Options{BinDir: t.TempDir()}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("StartGalera with an empty BinDir: %v, want ErrUnavailable", err)
	}
	if _, err := StartGalera(ctx, 3, Options{Port: 3306}); err == nil {
		t.Fatal("StartGalera with a port succeeded")
	}
	if _, err := StartGalera(ctx, 0, Options{}); err == nil {
		t.Fatal("StartGalera of 0 nodes succeeded")
	}
}
