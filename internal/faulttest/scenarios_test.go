//go:build linux

package faulttest

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/backlogq/backlog/internal/dbserver"
)

// backends are the stores every scenario runs on, where it applies.
var backends = []string{"sqlite", "postgres", "mariadb"}

// TestWorkerKills SIGKILLs a random `backlog work` process every 1–3 s
// while the others keep working, and starts a new one in its place, until
// every job has finished (or BACKLOG_FAULT_KILL_WINDOW has passed). A
// producer adds a quarter more jobs while the kills go on.
func TestWorkerKills(t *testing.T) {
	requireFault(t)
	for _, b := range backends {
		t.Run(b, func(t *testing.T) {
			cfg := loadConfig(t)
			runScenario(t, scenario{backend: b, label: "kill", what: "worker kills", disrupt: killWorkers,
				produce: cfg.jobs / 4, produceSpread: cfg.killWindow / 2})
		})
	}
}

// TestServerKills runs the workers as remote workers of a `backlog serve`
// process and SIGKILLs that server every 2–4 s, starting it again on the
// same address: claims whose answer nobody receives (the claim committed,
// the server died before replying) must be handed back, not held, and
// outcomes sent to a dying server must land once it is back.
func TestServerKills(t *testing.T) {
	requireFault(t)
	for _, b := range []string{"sqlite", "postgres"} {
		t.Run(b, func(t *testing.T) {
			runLedgerOn(t, b, "serve", "job server kills", true, killServers, 0, 0)
		})
	}
}

// TestDatabaseOutage stops or kills the database server once a third of
// the jobs have finished and starts it again on the same port: once for an
// outage shorter than the lease (a quarter of it, plus the restart), once
// for one longer than the lease (two and a half leases) but far shorter
// than the workers' dead-worker timeout (2 min, which `backlog work` does
// not let us shorten). Twice as many jobs as there are workers (priority
// 1, claimed first) run from before the outage until three leases after
// it began, so their workers cannot renew their leases while it lasts.
// Neither outage may re-run a job that finished; a job whose handler its
// worker stopped during the outage may run again (docs/guarantees.md,
// promises 4 and 5), never alongside the stopped run.
//
// Lost claim replies: an outage that starts while a claim's COMMIT is in
// flight can leave the claim committed while its worker never hears of it.
// The server kill (and the immediate stop, which ends backends with
// SIGQUIT) cuts every connection at a random moment of a busy run with
// dozens of claims, heartbeats and completions per second, so some runs hit
// that window; no scenario stages it deterministically. When it is hit, the
// job sits `running` under a live worker that does not run it: if that
// worker's heartbeats keep extending its lease, the job never finishes
// ("not final" and "running without a live worker running it" below); if
// the lease runs out, the job is rescued and runs once, which passes.
func TestDatabaseOutage(t *testing.T) {
	requireFault(t)
	for _, tc := range []struct {
		backend, name, how string
		long               bool
	}{
		{"postgres", "short-immediate", "immediate", false},
		{"postgres", "long-kill", "kill", true},
		{"mariadb", "short-kill", "kill", false},
		{"mariadb", "long-immediate", "immediate", true},
	} {
		t.Run(tc.backend+"/"+tc.name, func(t *testing.T) {
			cfg := loadConfig(t)
			// Jobs running from before the outage until well after it:
			// their workers cannot renew their leases meanwhile.
			spanLen := outageDown(cfg, tc.long) + 3*cfg.lease
			runLedger(t, tc.backend, "outage", tc.name+" outage", outage(tc.how, tc.long), cfg.workers*2, spanLen)
		})
	}
}

// run is one ledger scenario in progress.
type run struct {
	c    *cluster
	cfg  config
	srv  *dbserver.Server // nil for SQLite
	n    int              // jobs enqueued first plus jobs the producer is to add
	prod *producer        // nil: every job is enqueued first

	mu      sync.Mutex
	notes   []string
	outages []window
}

func (r *run) note(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
}

// killWorkers is the disruption of TestWorkerKills.
func killWorkers(ctx context.Context, r *run) {
	deadline := time.Now().Add(r.cfg.killWindow)
	for time.Now().Before(deadline) {
		d := time.Second + time.Duration(mrand.Int64N(int64(2*time.Second)))
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
		r.c.killRandom()
	}
	r.note("kills stopped after the kill window (%s) with jobs left", r.cfg.killWindow)
}

// outage returns the disruption of TestDatabaseOutage: how is "immediate"
// (Stop(StopImmediate)) or "kill" (Kill).
func outage(how string, long bool) func(context.Context, *run) {
	return func(ctx context.Context, r *run) {
		if r.srv == nil {
			r.c.t.Errorf("an outage needs a database server")
			return
		}
		for {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			counts, err := r.c.counts(cctx)
			cancel()
			if err == nil && finished(counts) >= r.n/3 {
				break
			}
			select {
			case <-ctx.Done():
				r.c.t.Errorf("the jobs finished before the outage could start: raise %s", envJobs)
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
		down := outageDown(r.cfg, long)
		from := monoNow()
		var err error
		if how == "kill" {
			err = r.srv.Kill()
		} else {
			err = r.srv.Stop(dbserver.StopImmediate)
		}
		if err != nil {
			r.c.t.Errorf("%s the server: %v", how, err)
		}
		time.Sleep(down)
		for try := 0; ; try++ {
			if err = r.srv.Start(context.Background()); err == nil || try == 2 {
				break
			}
		}
		if err != nil {
			r.c.t.Errorf("start the server again: %v", err)
		}
		to := monoNow()
		r.mu.Lock()
		r.outages = append(r.outages, window{from, to + int64(r.cfg.lease/3)})
		r.mu.Unlock()
		length := time.Duration(to - from)
		r.note("database %s from %s, back at %s: down %s (lease %s)", how, r.c.rel(from), r.c.rel(to), length.Round(time.Millisecond), r.cfg.lease)
		if !long && length >= r.cfg.lease {
			r.note("NOTE: the short outage was not shorter than the lease; this run tested a long one")
		}
		if long && length <= r.cfg.lease {
			r.note("NOTE: the long outage was not longer than the lease")
		}
	}
}

// outageDown is how long the server stays down, restart not counted: a
// quarter of the lease for a short outage, two and a half leases for a
// long one.
func outageDown(cfg config, long bool) time.Duration {
	if long {
		return cfg.lease * 5 / 2
	}
	return cfg.lease / 4
}

// runLedger runs one ledger scenario: cfg.jobs jobs of the ledger handler
// on cfg.workers workers, disrupt running alongside until every job has
// finished, then the checks. The first span jobs take spanLen.
func runLedger(t *testing.T, backend, label, what string, disrupt func(context.Context, *run), span int, spanLen time.Duration) {
	runScenario(t, scenario{backend: backend, label: label, what: what, disrupt: disrupt, span: span, spanLen: spanLen})
}

// runLedgerOn is runLedger; with remote the workers are remote workers of
// a `backlog serve` process on the store.
func runLedgerOn(t *testing.T, backend, label, what string, remote bool, disrupt func(context.Context, *run), span int, spanLen time.Duration) {
	runScenario(t, scenario{backend: backend, label: label, what: what, remote: remote, disrupt: disrupt, span: span, spanLen: spanLen})
}

// scenario is one ledger scenario: the store, the workers, what breaks
// them, and the jobs.
type scenario struct {
	// backend names the store in the summary; with db empty it is also the
	// kind of fresh store made for the scenario (backendURL: sqlite,
	// postgres or mariadb).
	backend, label, what string
	// db, when set, is the store URL of a topology the test built (a
	// standby pair, a pooler, a cluster): the workers, the checks and the
	// producer use it. srv is the server disruptions act on (may be nil).
	db  string
	srv *dbserver.Server
	// slotDB, when set, is the store URL of the worker in each slot (one
	// database node each); the checks still read through db.
	slotDB func(slot int) string
	// remote: the workers are remote workers of a `backlog serve` process
	// on the store.
	remote bool
	// disrupt runs alongside the workers until it returns or every job
	// has finished.
	disrupt func(context.Context, *run)
	// The first span jobs (priority 1, claimed first) take spanLen.
	span    int
	spanLen time.Duration
	// produce more jobs are enqueued while the workers run (producer), in
	// chunks spread over produceSpread (default: the kill window), each
	// retried until it is acknowledged or the drain time has passed too.
	// The checks require every acknowledged job in the store, final and
	// run at least once. producerFlags are the global flags of the
	// producer's `backlog enqueue` runs (default: --db with db).
	produce       int
	produceSpread time.Duration
	producerFlags []string
}

// runScenario runs one ledger scenario: cfg.jobs jobs enqueued first, sc.produce
// more during the run, cfg.workers workers, sc.disrupt alongside, then the
// checks.
func runScenario(t *testing.T, sc scenario) {
	backend, label, what, remote, disrupt, span, spanLen := sc.backend, sc.label, sc.what, sc.remote, sc.disrupt, sc.span, sc.spanLen
	cfg := loadConfig(t)
	db, srv := sc.db, sc.srv
	if db == "" {
		db, srv = backendURL(t, backend)
	}
	c := newCluster(t, label, db, cfg.lease, cfg.conc, `fault=exec "$`+envSelf+`"`)
	c.slotDB = sc.slotDB
	t.Cleanup(func() { c.stop(); c.sweep() })
	if remote {
		addr, err := freeAddr()
		if err != nil {
			t.Fatal(err)
		}
		c.server = &jobServer{addr: addr}
		if err := c.startServer(context.Background()); err != nil {
			t.Fatal(err)
		}
	}

	// Most jobs take 20–120 ms; one in 32 takes 1.5–6 s, longer than a
	// heartbeat, so a handler that outlives its worker or its lease is
	// still running when its job runs again.
	// The first span jobs (priority 1, so they are claimed first) take
	// spanLen, to run across a database outage from start to end.
	rng := mrand.New(mrand.NewPCG(uint64(cfg.jobs), 7))
	lines := make([]string, cfg.jobs)
	for i := range lines {
		ms, prio := 20+rng.IntN(100), 5
		if rng.IntN(32) == 0 {
			ms = 1500 + rng.IntN(4500)
		}
		if i < span {
			ms, prio = int(spanLen.Milliseconds()), 1
		}
		lines[i] = jobLine("fault", fmt.Sprintf(`{"ms":%d}`, ms), prio)
	}
	c.enqueue(lines)

	wall := time.Now()
	c.t0 = monoNow()
	c.start(cfg.workers)
	r := &run{c: c, cfg: cfg, srv: srv, n: cfg.jobs + sc.produce}
	if span > 0 {
		r.note("%d jobs of %s each, claimed first", span, spanLen)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var prod *producer
	if sc.produce > 0 {
		flags := sc.producerFlags
		if flags == nil {
			flags = []string{"--db", db}
		}
		spread := sc.produceSpread
		if spread <= 0 {
			spread = cfg.killWindow
		}
		prod = newProducer(c, flags, sc.produce, spread, cfg.drain)
		r.prod = prod
		go prod.run(ctx)
	}
	disrupted := make(chan struct{})
	go func() {
		defer close(disrupted)
		disrupt(ctx, r)
	}()

	// Wait until every job has finished; once the faults are over the jobs
	// have cfg.drain to get there.
	var drainUntil time.Time
	var counts map[string]int
	timedOut := false
	for {
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		got, err := c.counts(cctx)
		ccancel()
		produced, producing := 0, false
		if prod != nil {
			select {
			case <-prod.done:
			default:
				producing = true
			}
			produced = prod.acknowledged()
		}
		if err == nil {
			counts = got
			if !producing && finished(got) >= cfg.jobs+produced {
				break
			}
		}
		select {
		case <-disrupted:
			if drainUntil.IsZero() && !producing {
				drainUntil = time.Now().Add(cfg.drain)
			}
		default:
		}
		if !drainUntil.IsZero() && time.Now().After(drainUntil) {
			timedOut = true
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	cancel()
	<-disrupted
	elapsed := time.Since(wall)

	// Judge the jobs while the workers still run: a running job needs a
	// live worker with an open execution of it.
	jobs, err := c.jobs(context.Background())
	if err != nil {
		t.Fatalf("list the jobs: %v", err)
	}
	before, _, err := parseLedger(c.ledger)
	if err != nil {
		t.Fatal(err)
	}
	holders := checkHolders(c, jobs, before)
	forced := c.stop()
	leftovers := c.sweep()
	byJob, problems, err := parseLedger(c.ledger)
	if err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	kills := slices.Clone(c.kills)
	exits := slices.Clone(c.exits)
	c.mu.Unlock()
	r.mu.Lock()
	outages := slices.Clone(r.outages)
	r.mu.Unlock()
	v := analyze(byJob, kills, outages, c.unrenewedStops(), c.rel)

	states, causes := map[string]int{}, map[string]int{}
	var notFinal, discarded, noRun []string
	for _, j := range jobs {
		states[j.State]++
		for _, e := range j.Errors {
			causes[e.Cause]++
		}
		switch {
		case !finalStates[j.State]:
			notFinal = append(notFinal, describeJob(j))
		case j.State == "discarded":
			discarded = append(discarded, describeJob(j))
		}
		if j.State == "completed" && !slices.ContainsFunc(byJob[j.ID], func(e *execution) bool { return e.status == "ok" }) {
			noRun = append(noRun, describeJob(j))
		}
	}

	summary := fmt.Sprintf("%s/%s (%s): %d jobs, %d workers × %d, lease %s; %d worker kills, %d worker exits on their own; "+
		"%d executions (%d ended by SIGTERM, %d without an end and without a kill); "+
		"duplicates: %d explained (%d killed mid-run, %d killed with the outcome in flight, at most %s after the end, %d stopped by their worker during the outage, %d stopped by their worker in a stall outside it, %d finished with the outcome held up in a stall outside it), %d unexplained; "+
		"%d overlapping; %d outlived their worker; final states %s; error entries by cause: %s; wall %s",
		backend, label, what, cfg.jobs, cfg.workers, cfg.conc, cfg.lease, len(kills), len(exits),
		v.executions, v.terminated, len(v.vanished),
		v.dupMid+v.dupAfterEnd+v.dupOutage+v.dupStall+v.dupStallOut, v.dupMid, v.dupAfterEnd, v.maxAfterEnd.Round(time.Millisecond), v.dupOutage, v.dupStall, v.dupStallOut, len(v.unexplained),
		len(v.overlaps), len(v.outlived), formatStates(states), formatStates(causes), elapsed.Round(100*time.Millisecond))
	var lost []string
	if prod != nil {
		summary += "; " + prod.summary()
		lost = prod.lost(jobs)
		summary += fmt.Sprintf(", %d lost", len(lost))
	}
	report(t, summary, r.notes)

	fail := func(what string, items []string) {
		if len(items) > 0 {
			t.Errorf("%d %s:\n  %s", len(items), what, strings.Join(firstN(items, 10), "\n  "))
		}
	}
	if timedOut {
		t.Errorf("not every job finished within %s after the faults ended (counts %v)", cfg.drain, counts)
	}
	fail("acknowledged jobs missing from the store", lost)
	fail("jobs not in a final state", notFinal)
	fail("jobs discarded (the handler never fails: their attempts went to lost executions)", discarded)
	fail("completed jobs without a finished execution in the ledger", noRun)
	fail("jobs running without a live worker running them", holders)
	fail("duplicate executions no dead worker explains", v.unexplained)
	if len(v.unexplained) > 0 {
		t.Logf("what the workers logged about those jobs and the store (run began at %s):\n%s",
			wall.UTC().Format(time.RFC3339Nano), c.logLinesAbout(dupJobIDs(v.unexplained), 40))
	}
	fail("overlapping executions of one job", v.overlaps)
	fail(fmt.Sprintf("handlers that outlived their SIGKILLed worker by more than %s", OutliveBound), v.outlived)
	fail("malformed ledger lines", problems)
	if len(v.vanished) > 0 {
		t.Logf("%d executions ended without an end line although their worker was not killed:\n  %s", len(v.vanished), strings.Join(firstN(v.vanished, 10), "\n  "))
	}
	if len(exits) > 0 {
		t.Logf("workers that exited on their own:\n  %s", strings.Join(firstN(exits, 10), "\n  "))
	}
	if len(forced) > 0 {
		t.Errorf("workers that did not stop within 20 s of SIGTERM: %v", forced)
	}
	if len(leftovers) > 0 {
		t.Logf("processes left after every worker stopped (killed now): %s", strings.Join(firstN(leftovers, 10), "; "))
	}
	checkRaces(t, c)
}

// checkHolders returns the running jobs whose holder is not a live worker
// with an open execution of the job (byJob nil: a live worker suffices).
func checkHolders(c *cluster, jobs []jobInfo, byJob map[int64][]*execution) []string {
	live := c.live()
	var out []string
	for _, j := range jobs {
		if j.State != "running" {
			continue
		}
		w := live[j.WorkerID]
		switch {
		case w == nil:
			out = append(out, describeJob(j)+": its worker is dead")
		case byJob != nil && !slices.ContainsFunc(byJob[j.ID], func(e *execution) bool { return e.wpid == w.pid && e.end == 0 }):
			out = append(out, describeJob(j)+fmt.Sprintf(": its worker (pid %d) is alive but runs no execution of it", w.pid))
		}
	}
	return out
}

func describeJob(j jobInfo) string {
	s := fmt.Sprintf("job %d %s attempt %d", j.ID, j.State, j.Attempt)
	if j.WorkerID != "" {
		s += " worker " + j.WorkerID
	}
	if !j.LeaseUntil.IsZero() {
		s += " lease until " + j.LeaseUntil.Format("15:04:05.000")
	}
	if n := len(j.Errors); n > 0 {
		e := j.Errors[n-1]
		s += fmt.Sprintf("; %d errors, last (attempt %d, %s): %s", n, e.Attempt, e.Cause, e.Error)
	}
	return s
}

func formatStates(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func firstN(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	return append(slices.Clone(s[:n]), fmt.Sprintf("… and %d more", len(s)-n))
}

// report logs a scenario's summary and appends it to BACKLOG_FAULT_SUMMARY
// when set.
func report(t *testing.T, summary string, notes []string) {
	t.Helper()
	text := summary
	for _, n := range notes {
		text += "\n  " + n
	}
	t.Log(text)
	if path := os.Getenv(envSummary); path != "" {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err == nil {
			fmt.Fprintf(f, "%s %s\n", t.Name(), text)
			f.Close()
		}
	}
}

// checkRaces fails t if a race-built worker reported a data race.
func checkRaces(t *testing.T, c *cluster) {
	c.mu.Lock()
	ws := slices.Clone(c.all)
	c.mu.Unlock()
	for _, w := range ws {
		if b, err := os.ReadFile(w.log); err == nil && strings.Contains(string(b), "WARNING: DATA RACE") {
			t.Errorf("worker %s reported a data race: see %s:\n%s", w.id, w.log, fileTail(w.log, 4000))
		}
	}
}

// OrphanGrace is how long a shell handler and its child may live on after
// their worker was SIGKILLed.
const OrphanGrace = 5 * time.Second

// TestOrphanHandlers SIGKILLs only the `backlog work` process while its
// shell handlers run, each with a child of its own (sleep 600), and checks
// that handlers and children die within OrphanGrace; then a new worker
// must finish the jobs once their leases are gone.
func TestOrphanHandlers(t *testing.T) {
	requireFault(t)
	for _, b := range backends {
		t.Run(b, func(t *testing.T) { runOrphans(t, b) })
	}
}

func runOrphans(t *testing.T, backend string) {
	cfg := loadConfig(t)
	db, _ := backendURL(t, backend)
	const n = 4
	pidFile := filepath.Join(t.TempDir(), "pids")
	handler := `orphan=if [ "$BACKLOG_JOB_ATTEMPT" = 1 ]; then sleep 600 & echo "$BACKLOG_JOB_ID $$ $!" >> "$` + envPIDs + `"; wait; fi; echo done`
	c := newCluster(t, "orphan", db, cfg.lease, n, handler)
	c.extra = []string{envPIDs + "=" + pidFile}
	c.restart = false
	t.Cleanup(func() { c.stop(); c.sweep() })
	lines := make([]string, n)
	for i := range lines {
		lines[i] = jobLine("orphan", `{}`, 5)
	}
	c.enqueue(lines)
	wall := time.Now()
	c.t0 = monoNow()
	c.start(1)

	// Wait until every handler runs and has started its child.
	type proc struct {
		what, start string
		pid         int
		diedAfter   time.Duration
		dead        bool
	}
	var procs []*proc
	deadline := time.Now().Add(60 * time.Second)
	for {
		b, _ := os.ReadFile(pidFile)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(b) > 0 && len(lines) >= n {
			for _, l := range lines {
				f := strings.Fields(l)
				if len(f) != 3 {
					t.Fatalf("pid file line %q", l)
				}
				for i, what := range []string{"shell handler", "its child sleep"} {
					pid, _ := strconv.Atoi(f[1+i])
					_, start, ok := procStat(pid)
					if !ok {
						t.Fatalf("job %s: %s (pid %d) is gone before the worker was killed", f[0], what, pid)
					}
					procs = append(procs, &proc{what: fmt.Sprintf("job %s: %s pid %d", f[0], what, pid), pid: pid, start: start})
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the %d handlers did not all start within a minute (pid file: %q); worker log: %s", n, b, lastLines(c.all[0].log, 5))
		}
		time.Sleep(50 * time.Millisecond)
	}

	w := c.all[0]
	if !c.kill(w) {
		t.Fatalf("could not kill worker %s", w.id)
	}
	killedAt := time.Now()
	<-w.done
	for {
		left := 0
		for _, p := range procs {
			if p.dead {
				continue
			}
			st, start, ok := procStat(p.pid)
			if !ok || start != p.start || st == 'Z' {
				p.dead, p.diedAfter = true, time.Since(killedAt)
				continue
			}
			left++
		}
		if left == 0 || time.Since(killedAt) > OrphanGrace {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	var survivors, deaths []string
	for _, p := range procs {
		if p.dead {
			deaths = append(deaths, fmt.Sprintf("%s died %s after the kill", p.what, p.diedAfter.Round(time.Millisecond)))
			continue
		}
		survivors = append(survivors, p.what+" is still alive")
		_ = syscall.Kill(p.pid, syscall.SIGKILL) // do not leave it behind
	}

	// The jobs come back once their leases run out; a new worker finishes them.
	if _, err := c.startWorker(0); err != nil {
		t.Fatal(err)
	}
	counts := c.waitFinished(context.Background(), n, time.Now().Add(cfg.drain))
	jobs, err := c.jobs(context.Background())
	if err != nil {
		t.Fatalf("list the jobs: %v", err)
	}
	holders := checkHolders(c, jobs, nil)
	c.stop()
	leftovers := c.sweep()
	states := map[string]int{}
	var notFinal []string
	for _, j := range jobs {
		states[j.State]++
		if !finalStates[j.State] || j.State == "discarded" {
			notFinal = append(notFinal, describeJob(j))
		}
	}
	report(t, fmt.Sprintf("%s/orphans: %d shell handlers each with a child, worker SIGKILLed; %d of %d processes gone within %s; final states %s; wall %s",
		backend, n, len(deaths), len(procs), OrphanGrace, formatStates(states), time.Since(wall).Round(100*time.Millisecond)), deaths)
	if len(survivors) > 0 {
		t.Errorf("%d processes outlived their SIGKILLed worker by more than %s (a handler never outlives its worker):\n  %s",
			len(survivors), OrphanGrace, strings.Join(survivors, "\n  "))
	}
	if len(notFinal) > 0 {
		t.Errorf("jobs not completed within %s after a new worker started (counts %v):\n  %s", cfg.drain, counts, strings.Join(firstN(notFinal, 10), "\n  "))
	}
	if len(holders) > 0 {
		t.Errorf("jobs running without a live worker:\n  %s", strings.Join(holders, "\n  "))
	}
	if len(leftovers) > 0 {
		t.Logf("processes left after the workers stopped (killed now): %s", strings.Join(leftovers, "; "))
	}
	checkRaces(t, c)
}
