package httpapi

import (
	"net/http"
	"testing"

	"github.com/backlogq/backlog/core"
)

// GET and PUT /v1/queues/{name}/limits read and replace the queue's
// stored limits, which the claims then obey; submissions carry a
// partition key.
func TestQueueLimitsEndpoint(t *testing.T) {
	runAll(t, core.Config{}, Config{}, func(t *testing.T, h *harness) {
		var got QueueLimitsResponse
		h.must(http.StatusOK, "GET", "/v1/queues/mail/limits", nil, &got)
		if got.Queue != "mail" || !got.Limits.IsZero() {
			t.Fatalf("before: %+v", got)
		}
		h.must(http.StatusOK, "PUT", "/v1/queues/mail/limits", map[string]any{"max_running": 1, "max_running_per_kind": map[string]int{"bulk": 1}, "max_running_per_partition": 1}, &got)
		if got.Limits.MaxRunning != 1 || got.Limits.MaxRunningPerKind["bulk"] != 1 || got.Limits.MaxRunningPerPartition != 1 {
			t.Fatalf("after PUT: %+v", got)
		}
		wantProblem(t, h.do("PUT", "/v1/queues/mail/limits", map[string]any{"max_running": -1}), SlugInvalidRequest)
		wantProblem(t, h.do("PUT", "/v1/queues/mail/limits", map[string]any{"max_runing": 1}), SlugInvalidRequest)

		// Two jobs of one partition: a claim takes one.
		var sub SubmitResponse
		for range 2 {
			h.must(http.StatusCreated, "POST", "/v1/jobs", map[string]any{"kind": "k", "queue": "mail", "partition_key": "acme"}, &sub)
			if sub.Job.PartitionKey != "acme" {
				t.Fatalf("submitted: %+v", sub.Job)
			}
		}
		h.register("w1", map[string]any{"queues": []string{"mail"}})
		if got := h.claim("w1", map[string]any{"limit": 10}); len(got) != 1 {
			t.Fatalf("claimed %d jobs under a per-partition limit of 1", len(got))
		}
		h.must(http.StatusOK, "PUT", "/v1/queues/mail/limits", map[string]any{}, &got)
		if !got.Limits.IsZero() {
			t.Fatalf("after lifting: %+v", got)
		}
	})
}
