package mysql

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/internal/dbserver"
	"github.com/backlogq/backlog/store"
)

// twoMariaDB starts two private MariaDB servers at once.
func twoMariaDB(t *testing.T) (a, b *dbserver.Server) {
	t.Helper()
	var wg sync.WaitGroup
	var errs [2]error
	var srv [2]*dbserver.Server
	for i := range srv {
		wg.Go(func() { srv[i], errs[i] = dbserver.StartMariaDB(context.Background(), dbserver.Options{}) })
	}
	wg.Wait()
	for i, s := range srv {
		if s != nil {
			t.Cleanup(func() { s.Close() })
		}
		if errs[i] != nil {
			dbserver.Unavailable(t, "MariaDB", errs[i])
		}
	}
	return srv[0], srv[1]
}

// hostPort is the "127.0.0.1:PORT" of a private server.
func hostPort(s *dbserver.Server) string { return fmt.Sprintf("127.0.0.1:%d", s.Port()) }

// argsNumbers returns the "n" of every job's args in the database "test"
// of srv.
func argsNumbers(t *testing.T, ctx context.Context, srv *dbserver.Server) map[int64]bool {
	return argsNumbersIn(t, ctx, srv, "test", "")
}

// argsNumbersIn returns the "n" of the args of the jobs in database db of
// srv that match the SQL condition where ("" for every job).
func argsNumbersIn(t *testing.T, ctx context.Context, srv *dbserver.Server, db, where string) map[int64]bool {
	t.Helper()
	st, err := Open(ctx, "root@tcp("+hostPort(srv)+")/"+db, WithMigrate(false))
	if err != nil {
		t.Fatalf("open %s: %v", hostPort(srv), err)
	}
	defer st.Close()
	q := "SELECT CAST(JSON_EXTRACT(args, '$.n') AS SIGNED) FROM backlog_jobs"
	if where != "" {
		q += " WHERE " + where
	}
	rows, err := st.DB().QueryContext(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[int64]bool{}
	for rows.Next() {
		var n int64
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		out[n] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMultiHostFailover: a store opened on mysql://root@A,B/test works on
// A; when A is killed while producers insert, the operations in flight
// fail with the driver's connection error (reported, not retried: they
// may have committed), the next ones run on B, and every insert that
// returned is found afterwards on A (restarted) or on B. The two servers
// are independent databases: the test proves the store follows the live
// host, not that data survive (that takes a cluster).
func TestMultiHostFailover(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	a, b := twoMariaDB(t)
	// B gets its schema first: a store migrates only the server it opens on.
	if st, err := store.Open(ctx, b.DSN()); err != nil {
		t.Fatal(err)
	} else {
		st.Close()
	}
	url := "mysql://root@" + hostPort(a) + "," + hostPort(b) + "/test?max_conns=8"
	st, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	insert := func(n int64) error {
		_, err := st.Insert(ctx, time.Now(), []contract.InsertParams{{Queue: "q", Kind: "k", Args: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n))}})
		return err
	}
	if err := insert(0); err != nil {
		t.Fatal(err)
	}
	if got := argsNumbers(t, ctx, a); !got[0] {
		t.Fatal("the first insert is not on the first host")
	}

	const producers = 4
	load := startInserts(producers, 0, insert)
	load.acked.Store(int64(0), true)
	load.kill(t, a.Kill)
	load.waitResumed(30 * time.Second)
	time.Sleep(200 * time.Millisecond) // a few more inserts on B
	worst := load.end(t)
	t.Logf("resumed on the second host %s after the kill (slowest of %d producers); %d inserts failed: %v", worst.Round(time.Millisecond), producers, load.failed.Load(), load.errTexts)
	if worst > 5*time.Second {
		t.Errorf("resuming took %s; want well under the 3 s per-host bound plus a retry", worst)
	}
	for text := range load.errTexts {
		if !connectionError(text) {
			t.Errorf("an insert failed with %q, not a connection error", text)
		}
	}

	// Claims and reads go to B now.
	jobs, err := st.Claim(ctx, contract.ClaimParams{Queue: "q", WorkerID: "w", Limit: 5, Now: time.Now(), LeaseUntil: time.Now().Add(time.Minute)})
	if err != nil || len(jobs) == 0 {
		t.Fatalf("claim after the failover: %d jobs, %v", len(jobs), err)
	}

	// Every acknowledged insert is on one of the two servers.
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	onA, onB := argsNumbers(t, ctx, a), argsNumbers(t, ctx, b)
	var lost []int64
	count, both := 0, 0
	load.acked.Range(func(k, _ any) bool {
		n := k.(int64)
		count++
		if onA[n] && onB[n] {
			both++
		}
		if !onA[n] && !onB[n] {
			lost = append(lost, n)
		}
		return true
	})
	t.Logf("%d inserts acknowledged: %d on the first host, %d on the second, %d lost", count, len(onA), len(onB), len(lost))
	if len(lost) > 0 || both > 0 {
		t.Errorf("%d acknowledged inserts lost (%v…), %d on both hosts", len(lost), lost[:min(len(lost), 10)], both)
	}
	if len(onB) == 0 {
		t.Error("nothing was inserted on the second host")
	}
}

// connectionError reports whether an error text is one of those a
// statement meets when its server dies under it.
func connectionError(text string) bool {
	for _, s := range []string{"invalid connection", "bad connection", "unexpected EOF", "connection reset", "broken pipe", "connection refused", "EOF"} {
		if strings.Contains(text, s) {
			return true
		}
	}
	return false
}

// blackHole listens on 127.0.0.1 and accepts connections without ever
// answering: a server that hangs, or a host whose packets vanish.
func blackHole(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}

// refused returns an address on 127.0.0.1 where nothing listens.
func refused(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestMultiHostDeadHosts: a refusing first host costs nothing, a host that
// never answers costs its timeout once (later connections start from the
// host that answered), and when no host answers the error names each.
func TestMultiHostDeadHosts(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	srv := dbserver.MariaDB(t, dbserver.Options{})
	if st, err := store.Open(ctx, srv.DSN()); err != nil {
		t.Fatal(err)
	} else {
		st.Close()
	}
	live := hostPort(srv)

	start := time.Now()
	st, err := store.Open(ctx, "mysql://root@"+refused(t)+","+live+"/test")
	if err != nil {
		t.Fatalf("open with a refusing first host: %v", err)
	}
	if s := st.(*Store); s.Galera() || strings.Contains(s.Topology(), "Galera") {
		t.Errorf("a plain MariaDB server: Galera() = %v, Topology() = %q", s.Galera(), s.Topology())
	}
	st.Close()
	t.Logf("open with a refusing first host: %s", time.Since(start).Round(time.Millisecond))

	const timeout = 500 * time.Millisecond
	start = time.Now()
	ms, err := Open(ctx, "root@tcp(127.0.0.1:1)/test?timeout="+timeout.String(), WithHosts(blackHole(t), live), WithMigrate(false))
	if err != nil {
		t.Fatalf("open with a silent first host: %v", err)
	}
	defer ms.Close()
	took := time.Since(start)
	t.Logf("open with a silent first host (timeout %s): %s", timeout, took.Round(time.Millisecond))
	if took < timeout || took > timeout+10*time.Second {
		t.Errorf("open with a silent first host took %s; want about its timeout %s", took, timeout)
	}
	// New connections start from the host that answered: eight at once
	// cost no timeout.
	start = time.Now()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := ms.DB().ExecContext(ctx, "SELECT SLEEP(0.05)"); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if took := time.Since(start); took > timeout {
		t.Errorf("eight new connections took %s: the silent host was tried again", took)
	}

	a, b := refused(t), blackHole(t)
	_, err = Open(ctx, "root@tcp(127.0.0.1:1)/test?timeout=200ms", WithHosts(a, b))
	if err == nil || !strings.Contains(err.Error(), "no host answered") || !strings.Contains(err.Error(), a) || !strings.Contains(err.Error(), b) {
		t.Errorf("open with no live host: %v; want an error naming both hosts", err)
	}
}

// TestHostConfigTLS: with TLS each host's certificate is checked against
// its own name, unless the TLS configuration names a server.
func TestHostConfigTLS(t *testing.T) {
	cfg, err := DriverConfig("u@tcp(db1:3306)/app?tls=true")
	if err != nil {
		t.Fatal(err)
	}
	if got := hostConfig(cfg, "db2:3307"); got.Addr != "db2:3307" || got.TLS.ServerName != "db2" {
		t.Errorf("host db2: address %q, TLS server name %q", got.Addr, got.TLS.ServerName)
	}
	if got := hostConfig(cfg, "[::1]:3306"); got.TLS.ServerName != "::1" {
		t.Errorf("host [::1]: TLS server name %q", got.TLS.ServerName)
	}
	if cfg.TLS.ServerName != "db1" {
		t.Errorf("hostConfig changed the DSN's configuration: server name %q", cfg.TLS.ServerName)
	}
	cfg.TLS.ServerName = "cluster.example"
	if got := hostConfig(cfg, "db2:3306"); got.TLS.ServerName != "cluster.example" {
		t.Errorf("a named server: TLS server name %q", got.TLS.ServerName)
	}
	if _, err := Open(t.Context(), "u@unix(/tmp/x.sock)/db", WithHosts("h1:3306")); err == nil || !strings.Contains(err.Error(), "TCP") {
		t.Errorf("Open on a unix socket DSN with one host in WithHosts = %v; want an error naming TCP", err)
	}
}

// insertLoad is producers inserting numbered jobs until ended, for the tests
// that kill a server under them: it records the numbers acknowledged, the
// failures, and when each producer's first insert after the kill returned.
type insertLoad struct {
	next      atomic.Int64
	acked     sync.Map // n → true for every insert that returned nil
	failed    atomic.Int64
	killedAt  atomic.Int64   // unix ns
	resumedAt []atomic.Int64 // per producer, unix ns
	mu        sync.Mutex
	errTexts  map[string]int
	okAt      []int64 // unix ns of every insert that returned after the kill
	stop      chan struct{}
	wg        sync.WaitGroup
}

// startInserts starts producers goroutines calling insert with 1, 2, 3…,
// pausing pause after a failed insert.
func startInserts(producers int, pause time.Duration, insert func(n int64) error) *insertLoad {
	l := &insertLoad{resumedAt: make([]atomic.Int64, producers), errTexts: map[string]int{}, stop: make(chan struct{})}
	for p := range producers {
		l.wg.Go(func() {
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				n := l.next.Add(1)
				if err := insert(n); err != nil {
					l.failed.Add(1)
					l.mu.Lock()
					l.errTexts[err.Error()]++
					l.mu.Unlock()
					time.Sleep(pause)
					continue
				}
				l.acked.Store(n, true)
				if l.killedAt.Load() != 0 {
					now := time.Now().UnixNano()
					l.resumedAt[p].CompareAndSwap(0, now)
					l.mu.Lock()
					l.okAt = append(l.okAt, now)
					l.mu.Unlock()
				}
			}
		})
	}
	return l
}

// kill waits until 200 inserts were started, then records the time and
// runs kill.
func (l *insertLoad) kill(t *testing.T, kill func() error) {
	t.Helper()
	for l.next.Load() < 200 {
		time.Sleep(5 * time.Millisecond)
	}
	l.killedAt.Store(time.Now().UnixNano())
	if err := kill(); err != nil {
		t.Fatal(err)
	}
}

// waitResumed waits until every producer had an insert return after the
// kill, at most d.
func (l *insertLoad) waitResumed(d time.Duration) {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		all := true
		for p := range l.resumedAt {
			all = all && l.resumedAt[p].Load() != 0
		}
		if all {
			return
		}
	}
}

// end stops the producers and returns the slowest producer's time from
// the kill to its first returned insert; it fails t if one never resumed.
// The load's fields may be read without locks afterwards.
func (l *insertLoad) end(t *testing.T) time.Duration {
	t.Helper()
	close(l.stop)
	l.wg.Wait()
	var worst time.Duration
	for p := range l.resumedAt {
		r := l.resumedAt[p].Load()
		if r == 0 {
			t.Fatalf("producer %d never inserted again after the kill (errors: %v)", p, l.errTexts)
		}
		worst = max(worst, time.Duration(r-l.killedAt.Load()))
	}
	return worst
}
