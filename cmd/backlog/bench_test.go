package main

import (
	"encoding/json"
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
}
