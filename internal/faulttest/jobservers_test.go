//go:build linux

package faulttest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backlogq/backlog/adapters/httpapi/client"
	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/internal/dbserver"
)

// TestJobServersBehindProxy runs two `backlog serve` processes on one
// store (a private PostgreSQL database; one SQLite file, which two
// processes of one machine share through SQLite's own locking) behind
// HAProxy (mode http, round robin, health check /healthz every 500 ms),
// the workers as remote workers of the proxy and a
// producer enqueueing through it while the faults go on. Once a fifth of
// the jobs have finished, one server is SIGKILLed, started again 1–2 s
// later, and then the other one, every 3–5 s until the jobs are done or
// the kill window has passed; one server is always up. Requests the dead
// server would have had go to the live one (HAProxy tries a refused
// connection again elsewhere), and leases granted by one server are
// honoured by the other (the lease-token secret is kept in the store), so
// no outage is counted: every duplicate execution is unexplained, and the
// usual checks hold (every acknowledged job in the store and final, none
// left running, none run twice). The summary gives, for each kill, when
// HAProxy marked the server down and when jobs resumed.
func TestJobServersBehindProxy(t *testing.T) {
	requireFault(t)
	for _, b := range []string{"postgres", "sqlite"} {
		t.Run(b, func(t *testing.T) {
			cfg := loadConfig(t)
			db, srv := backendURL(t, b)
			g := startJobServers(t, db, 2, cfg.lease)
			g.checkSharedLeases(t)
			url := g.proxy.URL()
			runScenario(t, scenario{
				backend: b, label: "servers", what: "one of two job servers behind HAProxy SIGKILLed at a time",
				db: db, srv: srv,
				slotDB:  func(int) string { return url },
				disrupt: g.killInTurn,
				produce: cfg.jobs / 4, produceSpread: cfg.killWindow / 2,
				producerFlags: []string{"--server", url},
			})
			g.reportErrors(t)
		})
	}
}

// jobServers is several `backlog serve` processes on one store behind a
// private HAProxy.
type jobServers struct {
	servers []*jobServer
	proxy   *dbserver.HAProxy

	mu    sync.Mutex
	kills []serverKill
	c     *cluster // the scenario's workers, once disrupt ran
}

// serverKill is one SIGKILL of a job server, in monotonic ns.
type serverKill struct {
	server         int
	at             int64 // SIGKILL
	down           int64 // HAProxy marked it down; 0 if not seen
	started, up    int64 // started again; marked up by HAProxy (0 if not seen)
	firstClaim     int64 // first execution started after the kill
	resumed        int64 // first execution started after the kill ended (ok)
	left           int   // jobs not final at the kill (-1: unknown)
	stalledStarts  time.Duration
	haproxyLogTail string
}

// startJobServers starts n job servers on db at once (their migrations and
// lease-secret creation race, as in a rolling deployment) behind HAProxy,
// and stops them when t ends, after the workers (t.Cleanup order).
func startJobServers(t *testing.T, db string, n int, lease time.Duration) *jobServers {
	t.Helper()
	bin := backlogBin(t)
	dir := t.TempDir()
	env := serverEnv()
	g := &jobServers{}
	var addrs []string
	for i := range n {
		addr, err := freeAddr()
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, addr)
		g.servers = append(g.servers, &jobServer{addr: addr, name: fmt.Sprintf("serve%d", i+1), bin: bin, db: db, dir: dir, lease: lease, env: env})
	}
	t.Cleanup(func() {
		for _, s := range g.servers {
			s.stop()
		}
	})
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, s := range g.servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.start(context.Background())
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	g.proxy = dbserver.HAProxyFor(t, dbserver.HAProxyOptions{Backends: addrs, Mode: dbserver.HAProxyHTTP, HealthPath: "/healthz"})
	g.waitStatus(t, func(st []dbserver.HAProxyServer) bool {
		return !slices.ContainsFunc(st, func(s dbserver.HAProxyServer) bool { return s.Status != "UP" })
	}, 10*time.Second)
	t.Logf("%d job servers on %s behind HAProxy at %s", n, addrs, g.proxy.URL())
	return g
}

// serverEnv is the job servers' environment: the test's, without the
// variables that would point the CLI elsewhere.
func serverEnv() []string {
	var env []string
	gorace := "atexit_sleep_ms=0"
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		switch {
		case k == "GORACE":
			gorace = v + " " + gorace
		case k == "BACKLOG_DB" || k == "BACKLOG_SERVER" || strings.HasPrefix(k, "BACKLOG_FAULTTEST_"):
		default:
			env = append(env, kv)
		}
	}
	return append(env, "GORACE="+gorace)
}

// checkSharedLeases claims a job through the first server and extends its
// lease and completes it through the second: the servers sign lease
// tokens with the one secret kept in the store. A token with one
// character changed is refused by the second server.
func (g *jobServers) checkSharedLeases(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := client.New(g.servers[0].url())
	if err != nil {
		t.Fatal(err)
	}
	b, err := client.New(g.servers[1].url())
	if err != nil {
		t.Fatal(err)
	}
	const queue, worker = "lease-check", "lease-check-worker"
	if _, err := a.Submit(ctx, client.SubmitRequest{Kind: "check", Queue: queue}); err != nil {
		t.Fatalf("submit through server 1: %v", err)
	}
	if _, err := a.RegisterWorker(ctx, worker, client.RegisterRequest{Queues: []string{queue}}); err != nil {
		t.Fatalf("register through server 1: %v", err)
	}
	jobs, err := a.Claim(ctx, worker, client.ClaimRequest{Queues: []string{queue}, Limit: 1, Wait: 5 * time.Second})
	if err != nil || len(jobs) != 1 || jobs[0].LeaseToken == "" {
		t.Fatalf("claim through server 1: %d jobs, %v", len(jobs), err)
	}
	j := jobs[0]
	tok := []byte(j.LeaseToken)
	i := len(tok) / 2
	if tok[i] == 'A' {
		tok[i] = 'B'
	} else {
		tok[i] = 'A'
	}
	if _, err := b.Complete(ctx, j.ID, client.CompleteRequest{LeaseToken: string(tok)}); err == nil {
		t.Fatalf("server 2 accepted a lease token with a changed character")
	}
	if _, err := b.ExtendLease(ctx, j.ID, client.ExtendLeaseRequest{LeaseToken: j.LeaseToken}); err != nil {
		t.Fatalf("server 2 refused to extend a lease granted by server 1: %v", err)
	}
	done, err := b.Complete(ctx, j.ID, client.CompleteRequest{LeaseToken: j.LeaseToken, Result: json.RawMessage(`{"ok":true}`)})
	if err != nil {
		t.Fatalf("server 2 refused the outcome of a job claimed through server 1: %v", err)
	}
	if done.State != core.StateCompleted {
		t.Fatalf("job claimed through server 1 and completed through server 2 is %s", done.State)
	}
	_ = b.Deregister(ctx, worker)
}

// waitStatus polls HAProxy until ok holds for its servers' states, and
// returns the monotonic time it first did (0 after timeout).
func (g *jobServers) waitStatus(t *testing.T, ok func([]dbserver.HAProxyServer) bool, timeout time.Duration) int64 {
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := g.proxy.Servers(ctx)
		cancel()
		if err == nil && ok(st) {
			return monoNow()
		}
		if time.Now().After(deadline) {
			t.Logf("HAProxy servers %+v (%v) after %s", st, err, timeout)
			return 0
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// statusOf returns a predicate: server i (0-based) has status want.
func statusOf(i int, want string) func([]dbserver.HAProxyServer) bool {
	return func(st []dbserver.HAProxyServer) bool { return i < len(st) && st[i].Status == want }
}

// killInTurn is the disruption of TestJobServersBehindProxy.
func (g *jobServers) killInTurn(ctx context.Context, r *run) {
	t := r.c.t
	g.mu.Lock()
	g.c = r.c
	g.mu.Unlock()
	deadline := time.Now().Add(r.cfg.killWindow)
	// The first kill once a fifth of the jobs have finished.
	for {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		counts, err := r.c.counts(cctx)
		cancel()
		if err == nil && finished(counts) >= r.cfg.jobs/5 {
			break
		}
		select {
		case <-ctx.Done():
			r.note("the jobs finished before the first kill: raise %s", envJobs)
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	victim := mrand.IntN(len(g.servers))
	for time.Now().Before(deadline) && ctx.Err() == nil {
		k := serverKill{server: victim, left: -1}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if counts, err := r.c.counts(cctx); err == nil {
			k.left = r.n - finished(counts)
		}
		cancel()
		s := g.servers[victim]
		k.at = monoNow()
		s.kill()
		k.down = g.waitStatus(t, statusOf(victim, "DOWN"), 10*time.Second)
		time.Sleep(time.Second + time.Duration(mrand.Int64N(int64(time.Second))))
		var err error
		for try := 0; try < 3; try++ {
			if err = s.start(context.Background()); err == nil {
				break
			}
		}
		if err != nil {
			t.Errorf("start job server %d again: %v", victim+1, err)
			return
		}
		k.started = monoNow()
		k.up = g.waitStatus(t, statusOf(victim, "UP"), 10*time.Second)
		if k.up == 0 {
			t.Errorf("HAProxy did not mark job server %d up within 10 s of its restart", victim+1)
			k.haproxyLogTail = lastLines(g.proxy.LogPath(), 5)
		}
		g.mu.Lock()
		g.kills = append(g.kills, k)
		g.mu.Unlock()
		victim = (victim + 1) % len(g.servers)
		select {
		case <-ctx.Done():
		case <-time.After(3*time.Second + time.Duration(mrand.Int64N(int64(2*time.Second)))):
		}
	}
	if ctx.Err() == nil {
		r.note("server kills stopped after the kill window (%s) with jobs left", r.cfg.killWindow)
	}
	g.noteKills(r)
}

// noteKills adds to the summary, for each kill, when HAProxy marked the
// server down and up, and when jobs resumed: the first execution started
// after the kill (a claim answered by the live server) and its end (the
// next job done). It also adds HAProxy's counters per server.
func (g *jobServers) noteKills(r *run) {
	byJob, _, err := parseLedger(r.c.ledger)
	if err != nil {
		r.note("read the ledger: %v", err)
		return
	}
	var starts []int64
	var execs []*execution
	for _, es := range byJob {
		for _, e := range es {
			starts = append(starts, e.start)
			execs = append(execs, e)
		}
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i] < starts[j] })
	g.mu.Lock()
	defer g.mu.Unlock()
	ms := func(from, to int64) string {
		if to == 0 || from == 0 {
			return "never"
		}
		return time.Duration(to - from).Round(time.Millisecond).String()
	}
	var worstResume time.Duration
	for i := range g.kills {
		k := &g.kills[i]
		if j := sort.Search(len(starts), func(j int) bool { return starts[j] > k.at }); j < len(starts) {
			k.firstClaim = starts[j]
			// The longest pause between two execution starts from the
			// last one before the kill until the first after it.
			if j > 0 {
				k.stalledStarts = time.Duration(starts[j] - starts[j-1])
			}
		}
		for _, e := range execs {
			if e.start > k.at && e.status == "ok" && (k.resumed == 0 || e.end < k.resumed) {
				k.resumed = e.end
			}
		}
		if k.resumed != 0 {
			worstResume = max(worstResume, time.Duration(k.resumed-k.at))
		}
		r.note("job server %d SIGKILLed at %s with %d jobs not final: HAProxy marked it down after %s; first claim after %s (gap between execution starts %s); "+
			"first job claimed after the kill done after %s; started again after %s, marked up after %s%s",
			k.server+1, r.c.rel(k.at), k.left, ms(k.at, k.down), ms(k.at, k.firstClaim), k.stalledStarts.Round(time.Millisecond),
			ms(k.at, k.resumed), ms(k.at, k.started), ms(k.at, k.up), k.haproxyLogTail)
	}
	r.note("%d job server kills; time to resume (kill → first job claimed after it done): at most %s", len(g.kills), worstResume.Round(time.Millisecond))
	// Every time HAProxy marked a server down, with its reason: once per
	// kill is expected, anything else is a health check that failed on a
	// live server.
	var downs []string
	if b, err := os.ReadFile(g.proxy.LogPath()); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if i := strings.Index(line, "Server be/"); i >= 0 && strings.Contains(line, " is DOWN") {
				downs = append(downs, strings.TrimSpace(line[i:]))
			}
		}
	}
	r.note("HAProxy marked a server down %d times (%d kills)%s", len(downs), len(g.kills), strings.Join(append([]string{""}, firstN(downs, 10)...), "\n    "))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if st, err := g.proxy.Servers(ctx); err == nil {
		var parts []string
		for _, s := range st {
			parts = append(parts, fmt.Sprintf("%s %s: %d requests, %d retried, %d redispatched, %d connection errors, %d response errors",
				s.Name, s.Status, s.Sessions, s.Retries, s.Redispatches, s.ConnErrors, s.ResponseErrors))
		}
		r.note("HAProxy: %s", strings.Join(parts, "; "))
	}
}

// logLevel matches the level and message of a slog text line.
var logLevel = regexp.MustCompile(`level=(WARN|ERROR) msg=("(?:[^"\\]|\\.)*"|\S+)`)

// logErr matches the err attribute of a slog text line.
var logErr = regexp.MustCompile(` err=("(?:[^"\\]|\\.)*"|\S+)`)

// reportErrors summarises the warnings and errors the workers logged
// (their requests to a killed server, mostly), by message.
func (g *jobServers) reportErrors(t *testing.T) {
	g.mu.Lock()
	c := g.c
	g.mu.Unlock()
	if c == nil {
		return
	}
	c.mu.Lock()
	ws := slices.Clone(c.all)
	c.mu.Unlock()
	byMsg := map[string]int{}
	example := map[string]string{}
	total := 0
	for _, w := range ws {
		b, err := os.ReadFile(w.log)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if m := logLevel.FindStringSubmatch(line); m != nil {
				k := m[1] + " " + m[2]
				byMsg[k]++
				total++
				if e := logErr.FindStringSubmatch(line); e != nil && example[k] == "" {
					example[k] = e[1]
				}
			}
		}
	}
	var msgs []string
	for m, n := range byMsg {
		if e := example[m]; e != "" {
			m += " (first: err=" + firstLine(e) + ")"
		}
		msgs = append(msgs, fmt.Sprintf("%d× %s", n, m))
	}
	slices.Sort(msgs)
	report(t, fmt.Sprintf("servers: the %d workers logged %d warnings and errors", len(ws), total), msgs)
}
