package httpapi

import (
	"net/http"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
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

// The claim policy travels the same way: rates (per_seconds), fair,
// aging; the rate's wait shows in the GET answer once a burst is used.
func TestQueuePolicyEndpoint(t *testing.T) {
	runAll(t, core.Config{}, Config{}, func(t *testing.T, h *harness) {
		var got QueueLimitsResponse
		body := map[string]any{
			"rate":               map[string]any{"starts": 2, "per_seconds": 3600},
			"rate_per_kind":      map[string]any{"bulk": map[string]any{"starts": 1, "per_seconds": 0.5}},
			"rate_per_partition": map[string]any{"starts": 5, "per_seconds": 60},
			"fair":               true,
			"aging":              map[string]any{"every_seconds": 30, "max_steps": 2},
		}
		h.must(http.StatusOK, "PUT", "/v1/queues/pol/limits", body, &got)
		l := got.Limits
		if l.Rate != (core.RateLimit{Starts: 2, Per: time.Hour}) || l.RatePerKind["bulk"] != (core.RateLimit{Starts: 1, Per: 500 * time.Millisecond}) ||
			l.RatePerPartition.Starts != 5 || !l.Fair || l.Aging != (core.PriorityAging{Every: 30 * time.Second, MaxSteps: 2}) || len(got.RateWaits) != 0 {
			t.Fatalf("after PUT: %+v", got)
		}
		wantProblem(t, h.do("PUT", "/v1/queues/pol/limits", map[string]any{"rate": map[string]any{"starts": 1}}), SlugInvalidRequest)
		wantProblem(t, h.do("PUT", "/v1/queues/pol/limits", map[string]any{"aging": map[string]any{"every_seconds": 0.1}}), SlugInvalidRequest)
		wantProblem(t, h.do("PUT", "/v1/queues/pol/limits", map[string]any{"rate": map[string]any{"starts": 1, "per_seconds": 1e308}}), SlugInvalidRequest)

		var sub SubmitResponse
		for range 3 {
			h.must(http.StatusCreated, "POST", "/v1/jobs", map[string]any{"kind": "k", "queue": "pol", "partition_key": "acme"}, &sub)
		}
		h.register("w1", map[string]any{"queues": []string{"pol"}})
		if got := h.claim("w1", map[string]any{"limit": 10}); len(got) != 2 {
			t.Fatalf("claimed %d jobs under a rate of 2 an hour", len(got))
		}
		h.must(http.StatusOK, "GET", "/v1/queues/pol/limits", nil, &got)
		if len(got.RateWaits) != 1 || got.RateWaits[0].Group != contract.RateGroupQueue || !got.RateWaits[0].NextStart.After(time.Now()) {
			t.Fatalf("rate waits after the burst: %+v", got.RateWaits)
		}
	})
}
