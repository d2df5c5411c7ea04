package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

// --log-format json writes every log line as one JSON object with time,
// level and msg; BACKLOG_LOG_FORMAT sets the default; other values are a
// usage error.
func TestLogFormatJSON(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	w := startWorker(t, db, "--log-level", "debug", "--log-format", "json", "--handler", "k=true")
	if code := w.stop(t); code != 0 {
		t.Fatalf("work exited %d\n%s", code, w.stderr)
	}
	lines := strings.Split(strings.TrimSpace(w.stderr.String()), "\n")
	if len(lines) == 0 || lines[0] == "" {
		t.Fatal("no log lines at debug level")
	}
	for _, line := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line is not JSON: %q (%v)", line, err)
		}
		if rec["level"] == nil || rec["msg"] == nil || rec["time"] == nil {
			t.Fatalf("log line lacks time, level or msg: %q", line)
		}
	}

	e, _, _ := testEnv("")
	e.getenv = func(k string) string {
		if k == "BACKLOG_LOG_FORMAT" {
			return "json"
		}
		return ""
	}
	if f := newRootCmd(e).PersistentFlags().Lookup("log-format"); f == nil || f.DefValue != "json" {
		t.Fatalf("BACKLOG_LOG_FORMAT=json: the flag's default is %v", f)
	}
	if r := cli(t, db, "--log-format", "xml", "queues"); r.code != exitUsage || !strings.Contains(r.stderr, "--log-format must be text or json") {
		t.Fatalf("--log-format xml: %s", r)
	}
}
