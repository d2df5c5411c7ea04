package httpapi

import (
	"net/http"
	"testing"

	"github.com/backlogq/backlog/core"
)

// TestBasicFlow walks the main path: submit, get, list, register, claim,
// complete, fail.
func TestBasicFlow(t *testing.T) {
	runAll(t, core.Config{}, Config{}, func(t *testing.T, h *harness) {
		a := h.submit(map[string]any{"kind": "email", "args": map[string]any{"to": "a@b"}})
		b := h.submit(map[string]any{"kind": "email", "args": map[string]any{"to": "c@d"}, "max_attempts": 3})
		if a.ID == 0 || a.State != core.StateAvailable || a.Queue != "default" || a.Priority != 5 || a.MaxAttempts != 20 {
			t.Fatalf("submitted job %+v", a)
		}
		if got := h.get(a.ID); got.ID != a.ID || string(got.Args) != `{"to":"a@b"}` && string(got.Args) != `{"to": "a@b"}` {
			t.Fatalf("get %+v", got)
		}
		var list ListResponse
		h.must(http.StatusOK, "GET", "/v1/jobs", nil, &list)
		if len(list.Jobs) != 2 || list.NextAfter != nil {
			t.Fatalf("list %+v", list)
		}

		reg := h.register("w1", map[string]any{"name": "host1", "queues": []string{"default"}})
		if reg.Worker.ID != "w1" || reg.Worker.Name != "host1" || reg.Worker.Liveness != core.LivenessActive || reg.LeaseSeconds != 30 || reg.HeartbeatIntervalSeconds != 10 {
			t.Fatalf("register %+v", reg)
		}
		jobs := h.claim("w1", map[string]any{"limit": 10})
		if len(jobs) != 2 || jobs[0].LeaseToken == "" || jobs[0].State != core.StateRunning || jobs[0].WorkerID != "w1" {
			t.Fatalf("claim %+v", jobs)
		}
		var done JobResponse
		h.must(http.StatusOK, "POST", "/v1/jobs/"+itoa(jobs[0].ID)+"/complete", map[string]any{"lease_token": jobs[0].LeaseToken, "result": map[string]int{"n": 1}}, &done)
		if done.Job.State != core.StateCompleted || string(done.Job.Result) != `{"n":1}` && string(done.Job.Result) != `{"n": 1}` {
			t.Fatalf("completed %+v (%s)", done.Job, done.Job.Result)
		}
		var failed JobResponse
		h.must(http.StatusOK, "POST", "/v1/jobs/"+itoa(jobs[1].ID)+"/fail", map[string]any{"lease_token": jobs[1].LeaseToken, "error": "boom"}, &failed)
		if failed.Job.State != core.StateRetryable || len(failed.Job.Errors) != 1 || failed.Job.Errors[0].Error != "boom" || failed.Job.ID != b.ID {
			t.Fatalf("failed %+v", failed.Job)
		}
	})
}
