package cli

import (
	"strings"
	"testing"
)

// work's start line names the periodic schedules it runs, by name with
// their schedule; without any it says nothing of them.
func TestStartLineListsPeriodicSchedules(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	cfg := writeFile(t, t.TempDir(), "c.json", `{"periodic": {
		"nightly": {"schedule": "0 3 * * *", "kind": "report"},
		"beat": {"schedule": "@every 1h", "kind": "report"}}}`)
	w := startWorker(t, db, "--config", cfg, "--handler", "report=true")
	line := firstLine(w.stdout.String(), "serving")
	if !strings.HasSuffix(line, "; periodic beat (@every 1h), nightly (0 3 * * *)") {
		t.Errorf("start line %q does not end with the schedules", line)
	}
	w.stop(t)

	w = startWorker(t, tempDB(t), "--handler", "report=true")
	if line := firstLine(w.stdout.String(), "serving"); strings.Contains(line, "periodic") {
		t.Errorf("start line without schedules: %q", line)
	}
}

// firstLine returns the first line of out that contains s.
func firstLine(out, s string) string {
	for line := range strings.SplitSeq(out, "\n") {
		if strings.Contains(line, s) {
			return line
		}
	}
	return ""
}
