package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// The bench subcommands run end to end on a SQLite file and print their
// figures; -o json gives machine-readable fields.
func TestBenchCommands(t *testing.T) {
	db := tempDB(t)
	r := mustCLI(t, db, "-o", "json", "bench", "burndown", "--jobs", "300", "--workers", "20")
	var burn struct {
		Jobs       int     `json:"jobs"`
		JobsPerSec float64 `json:"jobs_per_sec"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &burn); err != nil || burn.Jobs != 300 || burn.JobsPerSec <= 0 {
		t.Fatalf("burndown output %q: %+v (%v)", r.stdout, burn, err)
	}
	r = mustCLI(t, db, "-o", "json", "bench", "latency", "--jobs", "10", "--interval", "5ms")
	var lat struct {
		Jobs int   `json:"jobs"`
		P50  int64 `json:"p50_ns"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &lat); err != nil || lat.Jobs != 10 || lat.P50 <= 0 {
		t.Fatalf("latency output %q: %+v (%v)", r.stdout, lat, err)
	}
	mustCLI(t, db, "bench", "steady", "--duration", "200ms", "--workers", "10")
	if r := cli(t, db, "bench", "nope"); r.code != 2 {
		t.Fatalf("unknown bench subcommand: %s", r)
	}
	// Each subcommand keeps its own --jobs default.
	for sub, want := range map[string]string{"burndown": "(default 100000)", "latency": "(default 200)", "growth": "(default 100000)"} {
		help := mustCLI(t, db, "bench", sub, "--help").stdout
		if i := strings.Index(help, "--jobs int"); i < 0 || !strings.Contains(help[i:i+strings.Index(help[i:], "\n")], want) {
			t.Errorf("bench %s --help: --jobs should say %s:\n%s", sub, want, help)
		}
	}
	r = mustCLI(t, db, "-o", "json", "bench", "growth", "--jobs", "50", "--rounds", "2", "--workers", "10", "--pause", "0s")
	if !strings.Contains(r.stdout, "jobs_per_sec") {
		t.Fatalf("growth output %q", r.stdout)
	}
}

// bench floor runs the minimal-table floor on the store's database, prints
// the same fields as burndown plus the CPU split (burndown has it too).
func TestBenchFloor(t *testing.T) {
	db := tempDB(t)
	r := mustCLI(t, db, "-o", "json", "bench", "floor", "--jobs", "2300")
	var res struct {
		Dialect    string          `json:"dialect"`
		Jobs       int             `json:"jobs"`
		Insert     int64           `json:"insert_ns"`
		Work       int64           `json:"burndown_ns"`
		JobsPerSec float64         `json:"jobs_per_sec"`
		Claimers   int             `json:"claimers"`
		Client     *float64        `json:"client_core_seconds"`
		Server     *float64        `json:"server_core_seconds"`
		PerK       json.RawMessage `json:"core_ms_per_1000_jobs"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.Dialect != "sqlite" || res.Jobs != 2300 ||
		res.Insert <= 0 || res.Work <= 0 || res.JobsPerSec <= 0 || res.Claimers != 1 {
		t.Fatalf("floor output %q: %+v (%v)", r.stdout, res, err)
	}
	if runtime.GOOS == "linux" && (res.Client == nil || res.Server == nil || *res.Server != 0 || len(res.PerK) == 0) {
		t.Fatalf("floor output %q: no CPU split, or server CPU for SQLite", r.stdout)
	}
	if r := mustCLI(t, db, "bench", "floor", "--jobs", "10"); !strings.Contains(r.stdout, "floor (sqlite") {
		t.Fatalf("floor text output %q", r.stdout)
	}
	for _, args := range [][]string{{"--jobs", "-1"}, {"--claimers", "0"}} {
		if r := cli(t, db, append([]string{"bench", "floor"}, args...)...); r.code != 2 || !strings.Contains(r.stderr, "bench floor:") {
			t.Errorf("bench floor %v: %s", args, r)
		}
	}
	if r := mustCLI(t, db, "-o", "json", "bench", "burndown", "--jobs", "100", "--workers", "10"); runtime.GOOS == "linux" && !strings.Contains(r.stdout, `"server_core_seconds": 0`) {
		t.Fatalf("burndown output %q: no CPU split", r.stdout)
	}
}

// TestBenchCPUProfile: --cpuprofile writes a CPU profile of the run that
// pprof reads (gzip-compressed protocol buffers), and a path that cannot
// be created is an error before anything runs.
func TestBenchCPUProfile(t *testing.T) {
	db := tempDB(t)
	path := filepath.Join(t.TempDir(), "cpu.prof")
	mustCLI(t, db, "bench", "burndown", "--jobs", "300", "--workers", "20", "--cpuprofile", path)
	b, err := os.ReadFile(path)
	if err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("profile %s: %d bytes, %v; want a gzip-compressed pprof profile", path, len(b), err)
	}
	r := cli(t, db, "bench", "burndown", "--jobs", "10", "--cpuprofile", filepath.Join(t.TempDir(), "no", "such", "dir", "cpu.prof"))
	if r.code == 0 || !strings.Contains(r.stderr, "--cpuprofile") {
		t.Fatalf("an unwritable --cpuprofile: %s; want an error naming the flag", r)
	}
}
