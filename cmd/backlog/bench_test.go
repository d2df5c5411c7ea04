package main

import (
	"encoding/json"
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
