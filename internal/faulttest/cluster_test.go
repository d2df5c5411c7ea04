//go:build linux

package faulttest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// cluster is a set of `backlog work` processes on one store, which the
// test starts, kills and stops.
type cluster struct {
	t       *testing.T
	name    string // short scenario label, in worker ids
	bin     string
	db      string
	dir     string
	ledger  string
	marker  string
	lease   time.Duration
	conc    int
	handler string // KIND=COMMAND
	restart bool   // start a new worker in the slot of one that exited
	t0      int64  // monotonic start of the scenario
	extra   []string
	server  *jobServer            // set: the workers are remote workers of this job server
	slotDB  func(slot int) string // set: the store URL of the worker in slot (one database node each), or the http:// URL of the job server (or proxy) it is a remote worker of; else db

	mu      sync.Mutex
	slots   []*worker
	all     []*worker
	kills   []killRecord
	exits   []string // workers that exited on their own
	gen     int
	stopped bool
	stopCh  chan struct{}
	wg      sync.WaitGroup
}

// worker is one `backlog work` process.
type worker struct {
	slot     int
	id       string
	pid      int
	log      string
	done     chan struct{} // closed once it exited and was reaped
	exit     string        // how it ended, once done is closed
	killedAt int64         // monotonic ns of the test's SIGKILL; 0 if none (guarded by cluster.mu)
}

func (w *worker) exited() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

var errStopped = errors.New("cluster stopped")

// newCluster prepares a cluster; no worker runs yet.
func newCluster(t *testing.T, name, db string, lease time.Duration, conc int, handler string) *cluster {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	dir := t.TempDir()
	return &cluster{
		t: t, name: name, bin: backlogBin(t), db: db, dir: dir,
		ledger: filepath.Join(dir, "ledger"), marker: hex.EncodeToString(b[:]),
		lease: lease, conc: conc, handler: handler, restart: true,
		t0: monoNow(), stopCh: make(chan struct{}),
	}
}

// rel formats a monotonic time as seconds since the scenario started.
func (c *cluster) rel(at int64) string {
	return fmt.Sprintf("+%.3fs", time.Duration(at-c.t0).Seconds())
}

// env is the workers' environment (their handlers inherit it).
func (c *cluster) env() []string {
	self := handlerBin(c.t)
	var env []string
	gorace := "atexit_sleep_ms=0" // a race-built program otherwise sleeps 1 s at exit
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		switch {
		case k == "GORACE":
			gorace = v + " " + gorace
		case k == "BACKLOG_DB" || strings.HasPrefix(k, "BACKLOG_FAULTTEST_"):
		default:
			env = append(env, kv)
		}
	}
	env = append(env, "GORACE="+gorace, envHandler+"=ledger", envLedger+"="+c.ledger, envSelf+"="+self, envMarker+"="+c.marker)
	return append(env, c.extra...)
}

// start starts n workers.
func (c *cluster) start(n int) {
	c.t.Helper()
	c.mu.Lock()
	c.slots = make([]*worker, n)
	c.mu.Unlock()
	for i := range n {
		if _, err := c.startWorker(i); err != nil {
			c.t.Fatal(err)
		}
	}
}

// startWorker starts a worker in slot.
func (c *cluster) startWorker(slot int) (*worker, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil, errStopped
	}
	c.gen++
	id := fmt.Sprintf("%s-w%d-%d", c.name, slot, c.gen)
	w := &worker{slot: slot, id: id, log: filepath.Join(c.dir, id+".log"), done: make(chan struct{})}
	f, err := os.Create(w.log)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	db := c.db
	if c.slotDB != nil {
		db = c.slotDB(slot)
	}
	args := []string{"--db", db, "--log-level", "warn", "work", "--lease", c.lease.String(), "--poll-interval", "250ms"}
	if c.server != nil {
		db = c.server.url()
	}
	if strings.HasPrefix(db, "http://") {
		// A remote worker: the job server decides the store, the lease
		// and polling.
		args = []string{"--log-level", "warn", "work", "--server", db}
	}
	cmd := exec.Command(c.bin, append(args,
		"--queue", "fault="+strconv.Itoa(c.conc), "--handler", c.handler,
		"--shutdown-timeout", "10s", "--worker-id", id)...)
	// Handlers get only an allow-list of the worker's environment: name
	// the suite's own variables (and GORACE) so the ledger handler sees them.
	for _, name := range []string{"GORACE", envHandler, envLedger, envSelf, envMarker, envWorker, envPIDs} {
		cmd.Args = append(cmd.Args, "--handler-env", name)
	}
	cmd.Env = append(c.env(), envWorker+"="+id)
	cmd.Dir = c.dir
	cmd.Stdout, cmd.Stderr = f, f
	// Its own process group (the test's signals are its own business), and
	// SIGKILL if the test binary dies, so no worker outlives a crashed run.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start worker: %w", err)
	}
	w.pid = cmd.Process.Pid
	c.slots[slot] = w
	c.all = append(c.all, w)
	c.wg.Add(1)
	go c.watch(w, cmd)
	return w, nil
}

// watch reaps a worker, notes a worker that exited on its own, and starts
// another in its slot (at once after a kill, after 500 ms otherwise, so a
// worker that cannot start does not spin).
func (c *cluster) watch(w *worker, cmd *exec.Cmd) {
	defer c.wg.Done()
	err := cmd.Wait()
	c.mu.Lock()
	w.exit = "exit 0"
	if err != nil {
		w.exit = err.Error()
	}
	close(w.done)
	killed, stopped := w.killedAt != 0, c.stopped
	if !killed && !stopped {
		c.exits = append(c.exits, fmt.Sprintf("%s (pid %d) exited on its own at %s (%s): %s",
			w.id, w.pid, c.rel(monoNow()), w.exit, lastLines(w.log, 3)))
	}
	c.mu.Unlock()
	if stopped || !c.restart {
		return
	}
	if !killed {
		select {
		case <-c.stopCh:
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
	if _, err := c.startWorker(w.slot); err != nil && !errors.Is(err, errStopped) {
		c.t.Errorf("restart worker in slot %d: %v", w.slot, err)
	}
}

// kill SIGKILLs w (the `backlog work` process only), recording when.
func (c *cluster) kill(w *worker) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w.exited() || w.killedAt != 0 || c.stopped {
		return false
	}
	at := monoNow()
	if err := syscall.Kill(w.pid, syscall.SIGKILL); err != nil {
		c.t.Errorf("kill worker %s: %v", w.id, err)
		return false
	}
	w.killedAt = at
	c.kills = append(c.kills, killRecord{worker: w.id, pid: w.pid, at: at})
	return true
}

// killRandom SIGKILLs one live worker, chosen at random.
func (c *cluster) killRandom() bool {
	c.mu.Lock()
	var live []*worker
	for _, w := range c.slots {
		if w != nil && !w.exited() && w.killedAt == 0 {
			live = append(live, w)
		}
	}
	c.mu.Unlock()
	if len(live) == 0 {
		return false
	}
	return c.kill(live[mrand.IntN(len(live))])
}

// live returns the workers alive now, by worker id.
func (c *cluster) live() map[string]*worker {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]*worker{}
	for _, w := range c.all {
		if !w.exited() {
			out[w.id] = w
		}
	}
	return out
}

// stop stops every worker: SIGTERM (a soft stop), then SIGKILL for one
// still running 20 s later. It returns the workers that needed SIGKILL.
func (c *cluster) stop() []string {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return nil
	}
	c.stopped = true
	close(c.stopCh)
	var ws []*worker
	for _, w := range c.all {
		if !w.exited() {
			ws = append(ws, w)
		}
	}
	c.mu.Unlock()
	for _, w := range ws {
		_ = syscall.Kill(w.pid, syscall.SIGTERM)
	}
	var forced []string
	deadline := time.After(20 * time.Second)
	for _, w := range ws {
		select {
		case <-w.done:
		case <-deadline:
			forced = append(forced, w.id)
			_ = syscall.Kill(w.pid, syscall.SIGKILL)
		}
	}
	c.wg.Wait()
	c.stopServer()
	return forced
}

// sweep finds the processes still carrying this cluster's marker (handlers
// and their children left behind), SIGKILLs them and describes them.
func (c *cluster) sweep() []string {
	var out []string
	for _, p := range markedProcs(c.marker) {
		out = append(out, fmt.Sprintf("pid %d (%s)", p.pid, p.cmdline))
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
	return out
}

type markedProc struct {
	pid     int
	cmdline string
}

// markedProcs lists live processes whose environment holds
// BACKLOG_FAULTTEST_RUN=marker.
func markedProcs(marker string) []markedProc {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	want := []byte(envMarker + "=" + marker + "\x00")
	var out []markedProc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !bytes.Contains(env, want) {
			continue
		}
		if st, ok := procState(pid); !ok || st == 'Z' {
			continue
		}
		cl, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		out = append(out, markedProc{pid, strings.TrimSpace(strings.ReplaceAll(string(cl), "\x00", " "))})
	}
	return out
}

// procState is the state letter of a process (R, S, Z…), from /proc.
func procState(pid int) (byte, bool) {
	st, _, ok := procStat(pid)
	return st, ok
}

// procStat returns a process's state and start time (clock ticks after
// boot, to tell a reused pid apart).
func procStat(pid int) (byte, string, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, "", false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, "", false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 || f[0] == "" {
		return 0, "", false
	}
	return f[0][0], f[19], true
}

// lastLines returns the last n non-empty lines of a file, joined by " | ".
func lastLines(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// cli runs `backlog --db DB args…` and returns its stdout.
func (c *cluster) cli(ctx context.Context, args ...string) ([]byte, error) {
	return c.run(ctx, append([]string{"--db", c.db, "--log-level", "error"}, args...)...)
}

// run runs `backlog args…` (at most a minute) and returns its stdout.
func (c *cluster) run(ctx context.Context, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("backlog %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// enqueue adds jobs to the queue "fault" in one `backlog enqueue --from`
// run; each line is a job object ({"kind":…,"args":…,"priority":…}).
func (c *cluster) enqueue(lines []string) {
	c.t.Helper()
	path := filepath.Join(c.dir, "jobs.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		c.t.Fatal(err)
	}
	out, err := c.cli(context.Background(), "-o", "json", "enqueue", "--from", path, "--queue", "fault", "--batch-size", "5000")
	if err != nil {
		c.t.Fatal(err)
	}
	var res struct {
		Inserted int `json:"inserted"`
	}
	if err := json.Unmarshal(out, &res); err != nil || res.Inserted != len(lines) {
		c.t.Fatalf("enqueue: inserted %d of %d (%v): %s", res.Inserted, len(lines), err, out)
	}
}

// jobLine is one line for enqueue.
func jobLine(kind, args string, priority int) string {
	return fmt.Sprintf(`{"kind":%q,"args":%s,"priority":%d}`, kind, args, priority)
}

// counts returns the number of jobs per state in the queue "fault".
func (c *cluster) counts(ctx context.Context) (map[string]int, error) {
	out, err := c.cli(ctx, "-o", "json", "queues")
	if err != nil {
		return nil, err
	}
	var qs []struct {
		Queue  string         `json:"queue"`
		Counts map[string]int `json:"counts"`
	}
	if err := json.Unmarshal(out, &qs); err != nil {
		return nil, fmt.Errorf("queues -o json: %v: %s", err, out)
	}
	for _, q := range qs {
		if q.Queue == "fault" {
			return q.Counts, nil
		}
	}
	return map[string]int{}, nil
}

// finalStates are the states a job never leaves.
var finalStates = map[string]bool{"completed": true, "cancelled": true, "discarded": true}

// finished returns how many jobs are in a final state, from counts.
func finished(counts map[string]int) int {
	n := 0
	for s, k := range counts {
		if finalStates[s] {
			n += k
		}
	}
	return n
}

// jobInfo is the part of `backlog jobs list -o json` the checks read.
type jobInfo struct {
	ID         int64     `json:"id"`
	State      string    `json:"state"`
	Attempt    int       `json:"attempt"`
	WorkerID   string    `json:"worker_id"`
	LeaseUntil time.Time `json:"lease_until"`
	UniqueKey  string    `json:"unique_key"`
	Errors     []struct {
		Attempt int    `json:"attempt"`
		Error   string `json:"error"`
		Cause   string `json:"cause"`
	} `json:"errors"`
}

// jobs lists every job of the queue "fault".
func (c *cluster) jobs(ctx context.Context) ([]jobInfo, error) {
	var all []jobInfo
	var after int64
	for {
		out, err := c.cli(ctx, "-o", "json", "jobs", "list", "--order", "asc", "--queue", "fault", "--limit", "1000", "--after", strconv.FormatInt(after, 10))
		if err != nil {
			return nil, err
		}
		var page []jobInfo
		if err := json.Unmarshal(out, &page); err != nil {
			return nil, fmt.Errorf("jobs list -o json: %v", err)
		}
		all = append(all, page...)
		if len(page) < 1000 {
			return all, nil
		}
		after = page[len(page)-1].ID
	}
}

// waitFinished polls until n jobs are in a final state or the deadline
// passes; it returns the last counts seen (nil if none could be read).
func (c *cluster) waitFinished(ctx context.Context, n int, deadline time.Time) map[string]int {
	var last map[string]int
	for {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		counts, err := c.counts(cctx)
		cancel()
		if err == nil {
			last = counts
			if finished(counts) >= n {
				return counts
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return last
		}
		select {
		case <-ctx.Done():
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// fileTail returns the end of a file, at most n bytes.
func fileTail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	defer f.Close()
	fi, _ := f.Stat()
	off := max(fi.Size()-n, 0)
	b, _ := io.ReadAll(io.NewSectionReader(f, off, fi.Size()-off))
	return string(b)
}

// logLinesAbout returns, per worker log, the lines that name one of ids
// (job_id=N) or report the store out of reach, at most max per worker: why
// a worker stopped or handed back a job the ledger cannot explain.
func (c *cluster) logLinesAbout(ids []int64, max int) string {
	c.mu.Lock()
	var logs []string
	for _, w := range c.all {
		logs = append(logs, w.log)
	}
	c.mu.Unlock()
	var b strings.Builder
	for _, path := range logs {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		var lines []string
		for _, line := range strings.Split(string(data), "\n") {
			hit := strings.Contains(line, "unreachable") || strings.Contains(line, "heartbeat")
			for _, id := range ids {
				hit = hit || strings.Contains(line, "job_id="+strconv.FormatInt(id, 10)+" ")
			}
			if hit {
				lines = append(lines, line)
			}
		}
		if len(lines) > 0 {
			fmt.Fprintf(&b, "  %s:\n    %s\n", filepath.Base(path), strings.Join(firstN(lines, max), "\n    "))
		}
	}
	return b.String()
}

// dupJobIDs reads the job ids of analyze's duplicate descriptions ("job N: …").
func dupJobIDs(items []string) []int64 {
	var out []int64
	for _, s := range items {
		var id int64
		if _, err := fmt.Sscanf(s, "job %d:", &id); err == nil {
			out = append(out, id)
		}
	}
	return out
}

// unrenewedStops reads, from every worker's log, the executions whose
// lease it could not renew (core's warnings "lease could not be renewed",
// with job_id and attempt): the handler stopped, or the outcome waiting
// ("while the outcome waits").
func (c *cluster) unrenewedStops() map[stopKey]unrenewal {
	c.mu.Lock()
	workers := slices.Clone(c.all)
	c.mu.Unlock()
	out := map[stopKey]unrenewal{}
	for _, w := range workers {
		data, err := os.ReadFile(w.log)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if !strings.Contains(line, "lease could not be renewed") {
				continue
			}
			k := stopKey{worker: w.id}
			for _, f := range strings.Fields(line) {
				if v, ok := strings.CutPrefix(f, "job_id="); ok {
					k.job, _ = strconv.ParseInt(v, 10, 64)
				} else if v, ok := strings.CutPrefix(f, "attempt="); ok {
					k.attempt, _ = strconv.Atoi(v)
				}
			}
			if k.job != 0 {
				u := out[k]
				if strings.Contains(line, "while the outcome waits") {
					u.waiting = true
				} else {
					u.stopped = true
				}
				out[k] = u
			}
		}
	}
	return out
}
