package bench

import (
	"context"
	"encoding/json"
	"io"
	"runtime"
	"testing"
)

// TestMeasuredAddsTheChildsCPU: a command's JSON comes back with the CPU
// split added, the client's being the child's own CPU time, per the jobs
// its output counts.
func TestMeasuredAddsTheChildsCPU(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("CPU from /proc: Linux only")
	}
	// A child that burns CPU for a moment, then prints its result.
	script := `i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; echo '{"completed": 1000, "jobs_per_sec": 5}'`
	out, err := Measured(context.Background(), Server{InProcess: true}, []string{"sh", "-c", script}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Completed int      `json:"completed"`
		Client    float64  `json:"client_core_seconds"`
		Server    *float64 `json:"server_core_seconds"`
		Per       struct {
			Client float64  `json:"client"`
			Total  *float64 `json:"total"`
		} `json:"core_ms_per_1000_jobs"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if got.Completed != 1000 || got.Client <= 0 || got.Server == nil || *got.Server != 0 || got.Per.Client != got.Client*1000 || got.Per.Total == nil {
		t.Fatalf("measured output %s", out)
	}
	if _, err := Measured(context.Background(), Server{}, []string{"sh", "-c", "echo not json"}, io.Discard); err == nil {
		t.Fatal("a command that printed no JSON object was measured without error")
	}
}
