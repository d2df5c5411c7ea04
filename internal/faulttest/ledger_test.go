//go:build linux

package faulttest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// The ledger: one line per start and per end of a handler execution,
// appended with O_APPEND (each line is one small write, so lines of
// concurrent handlers never interleave):
//
//	S <job> <attempt> <worker id> <worker pid> <handler pid> <monotonic ns>
//	E <job> <attempt> <worker id> <worker pid> <handler pid> <monotonic ns> <ok|term>
//
// The worker id comes from BACKLOG_FAULTTEST_WORKER, which the test sets on
// each worker process and its handlers inherit, so an execution is tied to
// its worker even when that worker died before the handler looked at its
// parent pid (the worker pid is the parent pid the handler saw). "term" is
// an execution ended by SIGTERM or SIGINT (the worker cancelled it). An
// execution without an E line was SIGKILLed.

// Bounds of the checks.
const (
	// OutcomeWindow is how long after an execution ended its worker may
	// still have held the outcome unwritten (the completer batches outcomes
	// for milliseconds; a busy store takes longer to commit): a worker
	// SIGKILLed that soon after the end explains a second start.
	OutcomeWindow = 2 * time.Second
	// OutliveBound is how long a handler may keep running after its worker
	// was SIGKILLed (the time for the handler to learn of it and stop).
	OutliveBound = time.Second
)

// monoNow reads CLOCK_MONOTONIC, which every process of the machine shares,
// in nanoseconds.
func monoNow() int64 {
	var ts syscall.Timespec
	if _, _, e := syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, 1 /* CLOCK_MONOTONIC */, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		panic("clock_gettime: " + e.Error())
	}
	return ts.Nano()
}

// ledgerHandler is the job handler (this binary, run by a worker with
// BACKLOG_FAULTTEST_HANDLER=ledger): args {"ms": N}; it records its start,
// sleeps N ms, records its end and completes. On SIGTERM or SIGINT it
// records a "term" end and exits 143.
func ledgerHandler() int {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	var args struct {
		MS int `json:"ms"`
	}
	b, _ := io.ReadAll(os.Stdin)
	if err := json.Unmarshal(b, &args); err != nil {
		fmt.Fprintf(os.Stderr, "ledger handler: args %q: %v\n", b, err)
		return 2
	}
	f, err := os.OpenFile(os.Getenv(envLedger), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ledger handler:", err)
		return 2
	}
	id := fmt.Sprintf("%s %s %s %d %d", os.Getenv("BACKLOG_JOB_ID"), os.Getenv("BACKLOG_JOB_ATTEMPT"), os.Getenv(envWorker), os.Getppid(), os.Getpid())
	write := func(line string) {
		if _, err := f.Write([]byte(line)); err != nil {
			fmt.Fprintln(os.Stderr, "ledger handler:", err)
			os.Exit(2)
		}
	}
	write(fmt.Sprintf("S %s %d\n", id, monoNow()))
	select {
	case <-time.After(time.Duration(args.MS) * time.Millisecond):
		write(fmt.Sprintf("E %s %d ok\n", id, monoNow()))
		fmt.Println("ok")
		return 0
	case <-sigs:
		write(fmt.Sprintf("E %s %d term\n", id, monoNow()))
		return 143
	}
}

// execution is one run of a handler, from the ledger.
type execution struct {
	job     int64
	attempt int
	worker  string // the id of the worker that started it
	wpid    int    // the handler's parent pid when it started (the worker's, unless it had died)
	pid     int    // the handler process
	start   int64  // monotonic ns
	end     int64  // monotonic ns; 0 when it has no end line
	status  string
}

// parseLedger reads the ledger into executions per job, in start order.
// Malformed lines and end lines without a start are returned as problems.
func parseLedger(path string) (map[int64][]*execution, []string, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return map[int64][]*execution{}, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	type key struct {
		job int64
		att int
		pid int
	}
	open := map[key]*execution{}
	byJob := map[int64][]*execution{}
	var problems []string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		fs := strings.Fields(sc.Text())
		bad := func() { problems = append(problems, fmt.Sprintf("ledger line %d: %q", n, sc.Text())) }
		if len(fs) < 7 || (fs[0] == "E") != (len(fs) == 8) {
			bad()
			continue
		}
		job, e1 := strconv.ParseInt(fs[1], 10, 64)
		att, e2 := strconv.Atoi(fs[2])
		worker := fs[3]
		wpid, e3 := strconv.Atoi(fs[4])
		pid, e4 := strconv.Atoi(fs[5])
		at, e5 := strconv.ParseInt(fs[6], 10, 64)
		if e1 != nil || e2 != nil || e3 != nil || e4 != nil || e5 != nil {
			bad()
			continue
		}
		k := key{job, att, pid}
		switch fs[0] {
		case "S":
			e := &execution{job: job, attempt: att, worker: worker, wpid: wpid, pid: pid, start: at}
			open[k] = e
			byJob[job] = append(byJob[job], e)
		case "E":
			e := open[k]
			if e == nil {
				problems = append(problems, fmt.Sprintf("ledger line %d: an end without a start: %q", n, sc.Text()))
				continue
			}
			e.end, e.status = at, fs[7]
			delete(open, k)
		default:
			bad()
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, err
	}
	for _, es := range byJob {
		slices.SortFunc(es, func(a, b *execution) int { return cmpInt(a.start, b.start) })
	}
	return byJob, problems, nil
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// killRecord is a worker process the test SIGKILLed, and when (monotonic
// ns, taken just before the kill).
type killRecord struct {
	worker string // worker id
	pid    int
	at     int64
}

// verdict is what the ledger says about one scenario.
type verdict struct {
	executions  int
	terminated  int           // executions ended by SIGTERM
	dupMid      int           // second starts explained by a worker killed mid-execution
	dupAfterEnd int           // … killed within OutcomeWindow after the execution ended
	dupOutage   int           // … stopped by its worker (SIGTERM) during a database outage
	dupStall    int           // … stopped by its worker (SIGTERM) whose log says it could not renew the lease, outside any outage
	dupStallOut int           // … finished, its outcome waiting while its worker's log says it could not renew the lease, outside any outage
	maxAfterEnd time.Duration // the longest such gap between an end and the kill
	unexplained []string
	overlaps    []string
	outlived    []string
	vanished    []string // no end line, and the worker was not killed
}

// window is a stretch of monotonic time, such as a database outage: from
// the moment the test began to stop the server until the server answered
// again, widened by the time a worker may take to notice it is back (one
// heartbeat).
type window struct{ from, to int64 }

// stopKey names an execution whose lease its worker could not renew: the
// worker's id, the job and the attempt, as its log gives them.
type stopKey struct {
	worker  string
	job     int64
	attempt int
}

// unrenewal is what a worker logged about an execution whose lease it
// could not renew: that it stopped the handler (stopped), or that the
// handler had returned and its outcome waited for the store (waiting).
type unrenewal struct{ stopped, waiting bool }

// analyze applies the checks of the package documentation to the
// executions of each job, given the workers the test killed, the
// database outages it staged and what workers logged about executions
// whose lease they could not renew (unrenewed: the handler stopped, or
// its outcome waiting). rel formats a monotonic time for messages.
func analyze(byJob map[int64][]*execution, kills []killRecord, outages []window, unrenewed map[stopKey]unrenewal, rel func(int64) string) verdict {
	var v verdict
	killed := map[string]killRecord{}
	for _, k := range kills {
		killed[k.worker] = k
	}
	killOf := func(e *execution) (int64, bool) {
		k, ok := killed[e.worker]
		return k.at, ok
	}
	effEnd := func(e *execution) int64 {
		if e.end != 0 {
			return e.end
		}
		if k, ok := killOf(e); ok {
			return max(k, e.start) // it died with its worker (an orphan would have written its end)
		}
		return math.MaxInt64
	}
	desc := func(e *execution) string {
		s := fmt.Sprintf("attempt %d on worker %s (pid %d, handler pid %d) from %s", e.attempt, e.worker, e.wpid, e.pid, rel(e.start))
		if e.end != 0 {
			s += " to " + rel(e.end) + " (" + e.status + ")"
		} else {
			s += ", no end"
		}
		if k, ok := killOf(e); ok {
			s += ", worker SIGKILLed at " + rel(k)
		}
		return s
	}
	jobs := make([]int64, 0, len(byJob))
	for j := range byJob {
		jobs = append(jobs, j)
	}
	slices.Sort(jobs)
	for _, job := range jobs {
		es := byJob[job]
		for i, e := range es {
			v.executions++
			if e.status == "term" {
				v.terminated++
			}
			k, wasKilled := killOf(e)
			if e.end == 0 && !wasKilled {
				v.vanished = append(v.vanished, fmt.Sprintf("job %d: %s", job, desc(e)))
			}
			if e.end != 0 && wasKilled && k < e.end && time.Duration(e.end-k) > OutliveBound {
				v.outlived = append(v.outlived, fmt.Sprintf("job %d: handler ran %s after its worker was SIGKILLed: %s",
					job, time.Duration(e.end-k).Round(time.Millisecond), desc(e)))
			}
			for _, prev := range es[:i] {
				if e.start < effEnd(prev) {
					v.overlaps = append(v.overlaps, fmt.Sprintf("job %d: %s overlaps %s", job, desc(e), desc(prev)))
				}
			}
			if i == 0 {
				continue
			}
			prev := es[i-1]
			pk, pkilled := killOf(prev)
			switch {
			case pkilled && pk < e.start && (prev.end == 0 || pk <= prev.end):
				v.dupMid++
			case pkilled && pk < e.start && time.Duration(pk-prev.end) <= OutcomeWindow:
				v.dupAfterEnd++
				v.maxAfterEnd = max(v.maxAfterEnd, time.Duration(pk-prev.end))
			case prev.status == "term" && e.start > prev.end && slices.ContainsFunc(outages, func(o window) bool { return o.from <= prev.end && prev.end <= o.to }):
				// Its worker could not renew the lease and stopped the
				// handler (docs/guarantees.md, promise 4): cut off, the
				// worker gave the job up; running it again is the
				// documented price. A finished ("ok") execution is never
				// explained this way.
				v.dupOutage++
			case prev.status == "term" && e.start > prev.end && unrenewed[stopKey{prev.worker, prev.job, prev.attempt}].stopped:
				// No outage was staged, but the store did not answer the
				// worker's heartbeat within its bound (a stall: a loaded
				// machine, a slow commit), and the worker logged stopping
				// this handler before the lease could run out: the same
				// documented price as an outage. Counted apart, so a run
				// with many shows.
				v.dupStall++
			case prev.status != "term" && prev.end != 0 && e.start > prev.end && unrenewed[stopKey{prev.worker, prev.job, prev.attempt}].waiting:
				// The handler had finished, but its worker could not reach
				// the store to renew the lease while the outcome waited
				// (the worker's log says so): a worker cut off longer than
				// its lease, whose job another node rightly rescued
				// (docs/guarantees.md, promise 6). Counted apart.
				v.dupStallOut++
			default:
				why := "its worker was not killed"
				if pkilled && pk >= e.start {
					why = "its worker was killed only after the second start"
				} else if pkilled {
					why = fmt.Sprintf("its worker was killed %s after it ended", time.Duration(pk-prev.end).Round(time.Millisecond))
				}
				v.unexplained = append(v.unexplained, fmt.Sprintf("job %d: %s started again after %s; %s", job, desc(e), desc(prev), why))
			}
		}
	}
	return v
}
