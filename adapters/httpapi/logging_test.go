package httpapi

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/internal/syncbuf"
	"github.com/backlogq/backlog/internal/teststores"
)

// logLines decodes the JSON log lines written to b so far.
func logLines(b *syncbuf.Buffer) []map[string]any {
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

func TestLogLinesCarryTheCorrelationID(t *testing.T) {
	st := teststores.Memory(t)
	var buf syncbuf.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h := newHarness(t, st, core.Config{}, Config{Logger: log})
	h.send(req{method: "PUT", path: "/v1/workers/w", body: map[string]any{"queues": []string{"default"}}, header: map[string]string{"X-Correlation-Id": "trace-1"}})
	_ = st.Close()
	r := h.send(req{method: "GET", path: "/v1/jobs", header: map[string]string{"X-Correlation-Id": "trace-2"}})
	wantProblem(t, r, SlugUnavailable)

	seen := map[string]int{}
	var failed bool
	for _, l := range logLines(&buf) {
		if msg, _ := l["msg"].(string); strings.HasPrefix(msg, "backlog http: listening for notifications") {
			// The server's own listener, not a request: it may notice the
			// closed store before the request does.
			continue
		}
		id, _ := l["correlation_id"].(string)
		if id == "" {
			t.Fatalf("request log line without correlation_id: %v", l)
		}
		seen[id]++
		if id == "trace-2" && l["level"] == "ERROR" && l["err"] != nil {
			failed = true
		}
	}
	if seen["trace-1"] < 2 || seen["trace-2"] < 2 || !failed {
		t.Fatalf("log lines per correlation id %v (error logged: %v)\n%v", seen, failed, logLines(&buf))
	}
}
