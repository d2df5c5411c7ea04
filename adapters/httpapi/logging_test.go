package httpapi

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/internal/teststores"
)

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lines() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

func TestLogLinesCarryTheCorrelationID(t *testing.T) {
	st := teststores.Memory(t)
	var buf syncBuffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h := newHarness(t, st, core.Config{}, Config{Logger: log})
	h.send(req{method: "PUT", path: "/v1/workers/w", body: map[string]any{"queues": []string{"default"}}, header: map[string]string{"X-Correlation-Id": "trace-1"}})
	_ = st.Close()
	r := h.send(req{method: "GET", path: "/v1/jobs", header: map[string]string{"X-Correlation-Id": "trace-2"}})
	wantProblem(t, r, SlugUnavailable)

	seen := map[string]int{}
	var failed bool
	for _, l := range buf.lines() {
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
		t.Fatalf("log lines per correlation id %v (error logged: %v)\n%v", seen, failed, buf.lines())
	}
}
