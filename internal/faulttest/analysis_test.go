//go:build linux

package faulttest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestLedgerAnalysis checks the checker on made-up ledgers; it runs
// without BACKLOG_FAULT.
func TestLedgerAnalysis(t *testing.T) {
	ms := func(n int64) int64 { return n * int64(time.Millisecond) }
	rel := func(at int64) string { return strconv.FormatInt(at/int64(time.Millisecond), 10) + "ms" }
	type want struct{ mid, after, outage, stall, stallOut, unexplained, overlaps, outlived, vanished int }
	outage := []window{{ms(1000), ms(3000)}}
	for _, tc := range []struct {
		name  string
		execs []*execution
		kills []killRecord
		want  want
	}{
		{"stopped by its worker during an outage, run again after it",
			[]*execution{{wpid: 10, start: ms(500), end: ms(2000), status: "term"}, {wpid: 11, start: ms(4000), end: ms(4100), status: "ok"}},
			nil, want{outage: 1}},
		{"finished during an outage, run again after it",
			[]*execution{{wpid: 10, start: ms(500), end: ms(2000), status: "ok"}, {wpid: 11, start: ms(4000), end: ms(4100), status: "ok"}},
			nil, want{unexplained: 1}},
		{"stopped by its worker outside an outage, run again",
			[]*execution{{wpid: 10, start: ms(5000), end: ms(6000), status: "term"}, {wpid: 11, start: ms(7000), end: ms(7100), status: "ok"}},
			nil, want{unexplained: 1}},
		{"stopped by its worker outside an outage, its log says the lease could not be renewed",
			[]*execution{{wpid: 12, start: ms(5000), end: ms(6000), status: "term"}, {wpid: 11, start: ms(7000), end: ms(7100), status: "ok"}},
			nil, want{stall: 1}},
		{"finished outside an outage, its worker's log says the lease could not be renewed",
			[]*execution{{wpid: 12, start: ms(5000), end: ms(6000), status: "ok"}, {wpid: 11, start: ms(7000), end: ms(7100), status: "ok"}},
			nil, want{unexplained: 1}},
		{"finished outside an outage, its worker's log says the lease of the waiting outcome could not be renewed",
			[]*execution{{wpid: 13, start: ms(5000), end: ms(6000), status: "ok"}, {wpid: 11, start: ms(7000), end: ms(7100), status: "ok"}},
			nil, want{stallOut: 1}},
		{"stopped outside an outage, but its worker's log only says the outcome waited",
			[]*execution{{wpid: 13, start: ms(5000), end: ms(6000), status: "term"}, {wpid: 11, start: ms(7000), end: ms(7100), status: "ok"}},
			nil, want{unexplained: 1}},
		{"finished with the outcome waiting, but the rerun overlaps it",
			[]*execution{{wpid: 13, start: ms(5000), end: ms(6000), status: "ok"}, {wpid: 11, start: ms(5500), end: ms(7100), status: "ok"}},
			nil, want{unexplained: 1, overlaps: 1}},
		{"stopped during an outage, but the rerun overlaps it",
			[]*execution{{wpid: 10, start: ms(500), end: ms(2500), status: "term"}, {wpid: 11, start: ms(2000), end: ms(4100), status: "ok"}},
			nil, want{unexplained: 1, overlaps: 1}},
		{"one execution", []*execution{{wpid: 10, start: ms(100), end: ms(200), status: "ok"}}, nil, want{}},
		{"killed mid-run, run again later",
			[]*execution{{wpid: 10, start: ms(100)}, {wpid: 11, start: ms(5000), end: ms(5100), status: "ok"}},
			[]killRecord{{worker: "w10", at: ms(150)}}, want{mid: 1}},
		{"run again although nobody died",
			[]*execution{{wpid: 10, start: ms(100), end: ms(200), status: "ok"}, {wpid: 11, start: ms(300), end: ms(400), status: "ok"}},
			nil, want{unexplained: 1}},
		{"orphan outlives its killed worker and overlaps the rerun",
			[]*execution{{wpid: 10, start: ms(100), end: ms(9000), status: "ok"}, {wpid: 11, start: ms(5000), end: ms(5100), status: "ok"}},
			[]killRecord{{worker: "w10", at: ms(150)}}, want{mid: 1, overlaps: 1, outlived: 1}},
		{"killed just after the end, outcome in flight",
			[]*execution{{wpid: 10, start: ms(100), end: ms(200), status: "ok"}, {wpid: 11, start: ms(5000), end: ms(5100), status: "ok"}},
			[]killRecord{{worker: "w10", at: ms(230)}}, want{after: 1}},
		{"killed long after the end",
			[]*execution{{wpid: 10, start: ms(100), end: ms(200), status: "ok"}, {wpid: 11, start: ms(9000), end: ms(9100), status: "ok"}},
			[]killRecord{{worker: "w10", at: ms(8000)}}, want{unexplained: 1}},
		{"vanished without a kill",
			[]*execution{{wpid: 10, start: ms(100)}, {wpid: 11, start: ms(5000), end: ms(5100), status: "ok"}},
			nil, want{unexplained: 1, overlaps: 1, vanished: 1}},
		{"worker killed only after the second start",
			[]*execution{{wpid: 10, start: ms(100)}, {wpid: 11, start: ms(200), end: ms(300), status: "ok"}},
			[]killRecord{{worker: "w10", at: ms(250)}}, want{unexplained: 1, overlaps: 1}},
		{"a kill of another worker explains nothing",
			[]*execution{{wpid: 10, start: ms(100), end: ms(200), status: "ok"}, {wpid: 11, start: ms(300), end: ms(400), status: "ok"}},
			[]killRecord{{worker: "w12", at: ms(250)}}, want{unexplained: 1}},
		{"worker killed while the handler was starting",
			[]*execution{{wpid: 10, start: ms(100)}, {wpid: 11, start: ms(5000), end: ms(5100), status: "ok"}},
			[]killRecord{{worker: "w10", at: ms(90)}}, want{mid: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i, e := range tc.execs {
				e.job, e.attempt, e.pid, e.worker = 1, i+1, 1000+i, "w"+strconv.Itoa(e.wpid)
			}
			// Worker w12 logged stopping job 1's first attempt; w13, that
			// the lease of its waiting outcome could not be renewed.
			unrenewed := map[stopKey]unrenewal{{"w12", 1, 1}: {stopped: true}, {"w13", 1, 1}: {waiting: true}}
			v := analyze(map[int64][]*execution{1: tc.execs}, tc.kills, outage, unrenewed, rel)
			got := want{v.dupMid, v.dupAfterEnd, v.dupOutage, v.dupStall, v.dupStallOut, len(v.unexplained), len(v.overlaps), len(v.outlived), len(v.vanished)}
			if got != tc.want {
				t.Errorf("got %+v, want %+v\n%+v", got, tc.want, v)
			}
		})
	}
}

func TestParseLedger(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger")
	lines := []string{
		"S 1 1 a-w0-1 10 100 1000",
		"S 2 1 a-w0-1 10 101 1100",
		"E 1 1 a-w0-1 10 100 2000 ok",
		"S 1 2 a-w1-2 11 102 5000",
		"garbage",
		"E 3 1 a-w0-1 10 103 2000 ok",
		"E 1 2 a-w1-2 11 102 5100 term",
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	byJob, problems, err := parseLedger(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 2 {
		t.Errorf("problems %q, want the garbage line and the end without a start", problems)
	}
	if len(byJob[1]) != 2 || byJob[1][0].end != 2000 || byJob[1][1].status != "term" || byJob[1][1].wpid != 11 || byJob[1][1].worker != "a-w1-2" {
		t.Errorf("job 1: %+v %+v", byJob[1][0], byJob[1][1])
	}
	if len(byJob[2]) != 1 || byJob[2][0].end != 0 {
		t.Errorf("job 2: %+v", byJob[2])
	}
}

// TestLedgerHandler runs this binary as a handler, as a worker would.
func TestLedgerHandler(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ledger := filepath.Join(t.TempDir(), "ledger")
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), envHandler+"=ledger", envLedger+"="+ledger, "BACKLOG_JOB_ID=7", "BACKLOG_JOB_ATTEMPT=2", envWorker+"=t-w0-1", "GORACE=atexit_sleep_ms=0")
	cmd.Stdin = strings.NewReader(`{"ms": 30}` + "\n")
	out, err := cmd.Output()
	if err != nil || string(out) != "ok\n" {
		t.Fatalf("handler: %q %v", out, err)
	}
	byJob, problems, err := parseLedger(ledger)
	if err != nil || len(problems) > 0 {
		t.Fatal(err, problems)
	}
	e := byJob[7]
	if len(e) != 1 || e[0].attempt != 2 || e[0].wpid != os.Getpid() || e[0].worker != "t-w0-1" || e[0].status != "ok" || time.Duration(e[0].end-e[0].start) < 30*time.Millisecond {
		t.Fatalf("ledger: %+v", e)
	}
}
