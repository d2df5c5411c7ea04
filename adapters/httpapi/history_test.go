package httpapi

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/memory"
)

// GET /v1/queues/{name}/history returns the queue's buckets from the
// store's history, oldest first, with a null gauge for minutes nobody
// sampled, over the window since or minutes ask for.
func TestQueueHistoryEndpoint(t *testing.T) {
	runAll(t, core.Config{}, Config{}, func(t *testing.T, h *harness) {
		qh, ok := h.st.(contract.QueueHistory)
		if !ok {
			t.Fatalf("%T is no contract.QueueHistory", h.st)
		}
		now := contract.UTC(time.Now())
		if err := qh.AddQueueHistory(t.Context(), []contract.QueueSample{
			{Queue: "mail", At: now.Add(-5 * time.Minute), Completed: 3, Failed: 1},
			{Queue: "mail", At: now.Add(-time.Minute), Gauge: true, Depth: 2, OldestAge: 1500 * time.Millisecond},
			{Queue: "other", At: now, Completed: 9},
		}); err != nil {
			t.Fatal(err)
		}
		var got QueueHistoryResponse
		h.must(http.StatusOK, "GET", "/v1/queues/mail/history", nil, &got)
		if got.Queue != "mail" || got.BucketSeconds != 60 || len(got.Buckets) != 2 || !got.Since.Equal(contract.HistoryMinute(now.Add(-59*time.Minute))) {
			t.Fatalf("history of the last hour: %+v", got)
		}
		first, second := got.Buckets[0], got.Buckets[1]
		if !first.Minute.Equal(contract.HistoryMinute(now.Add(-5*time.Minute))) || first.Completed != 3 || first.Failed != 1 ||
			first.Depth != nil || first.OldestAgeSeconds != nil || first.SampledAt != nil {
			t.Fatalf("first bucket: %+v; want 3 completed, 1 failed, no gauge", first)
		}
		if second.Depth == nil || *second.Depth != 2 || second.OldestAgeSeconds == nil || *second.OldestAgeSeconds != 1.5 ||
			second.SampledAt == nil || !second.SampledAt.Equal(now.Add(-time.Minute)) {
			t.Fatalf("second bucket: %+v; want the gauge of 2 due jobs, the oldest 1.5 s", second)
		}
		h.must(http.StatusOK, "GET", "/v1/queues/mail/history?minutes=2", nil, &got)
		if len(got.Buckets) != 1 || got.Buckets[0].Depth == nil {
			t.Fatalf("history of the last 2 minutes: %+v; want the sampled minute only", got.Buckets)
		}
		h.must(http.StatusOK, "GET", "/v1/queues/mail/history?since="+url.QueryEscape(now.Add(-10*time.Minute).Format(time.RFC3339Nano)), nil, &got)
		if len(got.Buckets) != 2 {
			t.Fatalf("history since 10 minutes ago: %d buckets; want 2", len(got.Buckets))
		}
		h.must(http.StatusOK, "GET", "/v1/queues/nothing/history", nil, &got)
		if got.Buckets == nil || len(got.Buckets) != 0 {
			t.Fatalf("history of a queue without any: %+v; want an empty list", got)
		}
		for _, bad := range []string{"?minutes=0", "?minutes=1441", "?minutes=x", "?since=yesterday", "?since=2030-01-01T00:00:00Z&minutes=5"} {
			wantProblem(t, h.do("GET", "/v1/queues/mail/history"+bad, nil), SlugInvalidRequest)
		}
		wantProblem(t, h.do("GET", "/v1/queues/bad%20name/history", nil), SlugInvalidRequest)
	})
}

// The completions reported by a remote worker reach the store's history
// at the server's next maintenance round, like the engine's own.
func TestQueueHistoryCountsRemoteWorkers(t *testing.T) {
	h := newHarness(t, memory.New(), core.Config{MaintenanceInterval: time.Hour}, Config{})
	j := h.submit(map[string]any{"kind": "k", "queue": "remote"})
	h.register("w1", map[string]any{"queues": []string{"remote"}})
	jobs := h.claim("w1", map[string]any{"limit": 1})
	if len(jobs) != 1 || jobs[0].ID != j.ID {
		t.Fatalf("claimed %+v", jobs)
	}
	h.must(http.StatusOK, "POST", outcomePath(jobs[0], "complete"), map[string]any{"lease_token": jobs[0].LeaseToken}, nil)
	h.c.Maintain(t.Context())
	var got QueueHistoryResponse
	h.must(http.StatusOK, "GET", "/v1/queues/remote/history?minutes=5", nil, &got)
	var completed int64
	for _, b := range got.Buckets {
		completed += b.Completed
	}
	if completed != 1 {
		t.Fatalf("history after a remote completion and a maintenance round: %+v; want 1 completed", got.Buckets)
	}
}
