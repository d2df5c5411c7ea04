package httpapi

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
)

func TestSubmitOptionsRoundTrip(t *testing.T) {
	runAll(t, core.Config{}, Config{}, func(t *testing.T, h *harness) {
		runAt := time.Now().UTC().Add(time.Hour).Truncate(time.Microsecond)
		deadline := runAt.Add(24 * time.Hour)
		body := map[string]any{
			"kind": "report", "args": []int{1, 2, 3}, "queue": "q1", "priority": 3,
			"run_at": runAt.Format(time.RFC3339Nano), "max_attempts": 7, "unique_key": "u-1",
			"tags": []string{"gpu", "big"}, "deadline": deadline.Format(time.RFC3339Nano),
			"metadata": map[string]string{"k": "v"},
		}
		r := h.send(req{method: "POST", path: "/v1/jobs", body: body, header: map[string]string{"X-Correlation-Id": "corr-123"}})
		if r.status != http.StatusCreated || r.header.Get("X-Correlation-Id") != "corr-123" {
			t.Fatalf("submit: %d %v %s", r.status, r.header, r.body)
		}
		var out SubmitResponse
		r.decode(t, &out)
		j := out.Job
		if out.Duplicate || j.Queue != "q1" || j.Kind != "report" || j.Priority != 3 || j.MaxAttempts != 7 ||
			j.UniqueKey != "u-1" || !slices.Equal(j.Tags, []string{"gpu", "big"}) || j.State != core.StateScheduled ||
			!j.RunAt.Equal(runAt) || !j.Deadline.Equal(deadline) || j.Metadata["k"] != "v" || j.Metadata["correlation_id"] != "corr-123" ||
			strings.ReplaceAll(string(j.Args), " ", "") != "[1,2,3]" || j.CreatedAt.IsZero() || j.Attempt != 0 {
			t.Fatalf("round trip: %+v args %s", j, j.Args)
		}
		if got := h.get(j.ID); !got.RunAt.Equal(runAt) || got.Metadata["correlation_id"] != "corr-123" || got.UniqueKey != "u-1" {
			t.Fatalf("get after submit: %+v", got)
		}
		// The same unique key while the job lives: the existing job, 200.
		var dup SubmitResponse
		h.must(http.StatusOK, "POST", "/v1/jobs", map[string]any{"kind": "report", "unique_key": "u-1"}, &dup)
		if !dup.Duplicate || dup.Job.ID != j.ID {
			t.Fatalf("duplicate: %+v", dup)
		}

		// delay_seconds; a generated correlation id; metadata's own
		// correlation_id wins.
		before := time.Now().UTC()
		r = h.do("POST", "/v1/jobs", map[string]any{"kind": "later", "delay_seconds": 90.5, "metadata": map[string]string{"correlation_id": "mine"}})
		r.decode(t, &out)
		if r.status != http.StatusCreated || out.Job.State != core.StateScheduled || out.Job.Metadata["correlation_id"] != "mine" {
			t.Fatalf("delayed: %d %s", r.status, r.body)
		}
		if d := out.Job.RunAt.Sub(before); d < 90*time.Second || d > 120*time.Second {
			t.Fatalf("delay_seconds 90.5 gave run_at %s after %s", out.Job.RunAt, before)
		}
		if id := r.header.Get("X-Correlation-Id"); len(id) != 32 {
			t.Fatalf("generated correlation id %q", id)
		}
		r = h.do("POST", "/v1/jobs", map[string]any{"kind": "plain"})
		r.decode(t, &out)
		if cid := r.header.Get("X-Correlation-Id"); out.Job.Metadata["correlation_id"] != cid || string(out.Job.Args) != "{}" {
			t.Fatalf("stamped %v, header %q, args %s", out.Job.Metadata, cid, out.Job.Args)
		}
		// An invalid header value is replaced.
		r = h.send(req{method: "GET", path: "/v1/queues", header: map[string]string{"X-Correlation-Id": strings.Repeat("x", 129)}})
		if id := r.header.Get("X-Correlation-Id"); len(id) != 32 {
			t.Fatalf("overlong correlation id kept: %q", id)
		}
	})
}

func TestSubmitBatch(t *testing.T) {
	runAll(t, core.Config{}, Config{}, func(t *testing.T, h *harness) {
		var out BatchResponse
		h.must(http.StatusOK, "POST", "/v1/jobs/batch", map[string]any{"jobs": []map[string]any{
			{"kind": "a", "unique_key": "k"},
			{"kind": "b", "queue": "other", "priority": 1},
			{"kind": "c", "unique_key": "k"},
		}}, &out)
		if len(out.Results) != 3 || out.Results[0].Job.Kind != "a" || out.Results[1].Job.Queue != "other" ||
			!out.Results[2].Duplicate || out.Results[2].Job.ID != out.Results[0].Job.ID || out.Results[0].Duplicate {
			t.Fatalf("batch: %+v", out.Results)
		}
		if out.Results[0].Job.Metadata["correlation_id"] == "" {
			t.Fatal("batch jobs carry no correlation id")
		}
		n := len(h.snapshot())
		r := h.do("POST", "/v1/jobs/batch", map[string]any{"jobs": []map[string]any{{"kind": "ok"}, {"kind": "ok"}, {"kind": "bad", "queue": "no spaces"}}})
		p := wantProblem(t, r, SlugInvalidJob)
		if !strings.HasPrefix(p.Detail, "jobs[2]: ") {
			t.Fatalf("detail %q does not name the index", p.Detail)
		}
		r = h.do("POST", "/v1/jobs/batch", map[string]any{"jobs": []map[string]any{{"kind": "ok"}, {"kind": ""}}})
		if p := wantProblem(t, r, SlugInvalidJob); !strings.Contains(p.Detail, "jobs[1]") {
			t.Fatalf("detail %q", p.Detail)
		}
		wantProblem(t, h.do("POST", "/v1/jobs/batch", map[string]any{"jobs": []any{}}), SlugInvalidRequest)
		big := make([]map[string]any, MaxBatch+1)
		for i := range big {
			big[i] = map[string]any{"kind": "x"}
		}
		wantProblem(t, h.do("POST", "/v1/jobs/batch", map[string]any{"jobs": big}), SlugInvalidRequest)
		if got := len(h.snapshot()); got != n {
			t.Fatalf("rejected batches inserted jobs: %d → %d", n, got)
		}
	})
}

func TestListFiltersAndPaging(t *testing.T) {
	runAll(t, core.Config{}, Config{}, func(t *testing.T, h *harness) {
		var ids []int64
		for i := range 7 {
			q, kind := "qa", "even"
			if i%2 == 1 {
				q, kind = "qb", "odd"
			}
			body := map[string]any{"kind": kind, "queue": q}
			if i == 6 {
				body["delay_seconds"] = 3600
			}
			ids = append(ids, h.submit(body).ID)
		}
		var cancelled JobResponse
		h.must(http.StatusOK, "POST", "/v1/jobs/"+itoa(ids[0])+"/cancel", nil, &cancelled)

		list := func(query string) ListResponse {
			t.Helper()
			var out ListResponse
			h.must(http.StatusOK, "GET", "/v1/jobs"+query, nil, &out)
			return out
		}
		idsOf := func(l ListResponse) []int64 {
			var out []int64
			for _, j := range l.Jobs {
				out = append(out, j.ID)
			}
			return out
		}
		if got := idsOf(list("?queue=qb")); !slices.Equal(got, []int64{ids[1], ids[3], ids[5]}) {
			t.Fatalf("queue filter: %v", got)
		}
		if got := idsOf(list("?kind=even")); !slices.Equal(got, []int64{ids[0], ids[2], ids[4], ids[6]}) {
			t.Fatalf("kind filter: %v", got)
		}
		if got := idsOf(list("?state=cancelled,scheduled")); !slices.Equal(got, []int64{ids[0], ids[6]}) {
			t.Fatalf("comma states: %v", got)
		}
		if got := idsOf(list("?state=cancelled&state=scheduled&kind=even&queue=qa")); !slices.Equal(got, []int64{ids[0], ids[6]}) {
			t.Fatalf("repeated states: %v", got)
		}
		if got := idsOf(list("?state=available")); len(got) != 5 {
			t.Fatalf("available: %v", got)
		}
		// Keyset paging, ascending and descending.
		for _, order := range []string{"asc", "desc"} {
			var seen []int64
			after := ""
			pages := 0
			for {
				l := list("?limit=3&order=" + order + after)
				pages++
				seen = append(seen, idsOf(l)...)
				if l.NextAfter == nil {
					if len(l.Jobs) >= 3 {
						t.Fatalf("full page without next_after")
					}
					break
				}
				if *l.NextAfter != l.Jobs[len(l.Jobs)-1].ID {
					t.Fatalf("next_after %d, last id %d", *l.NextAfter, l.Jobs[len(l.Jobs)-1].ID)
				}
				after = fmt.Sprintf("&after=%d", *l.NextAfter)
			}
			want := slices.Clone(ids)
			if order == "desc" {
				slices.Reverse(want)
			}
			if !slices.Equal(seen, want) || pages != 3 {
				t.Fatalf("%s paging: %v in %d pages, want %v", order, seen, pages, want)
			}
		}
		// Exactly limit jobs on the last page: one more, empty page.
		l := list("?limit=7")
		if len(l.Jobs) != 7 || l.NextAfter == nil {
			t.Fatalf("limit 7: %d jobs, next %v", len(l.Jobs), l.NextAfter)
		}
		if l2 := list(fmt.Sprintf("?limit=7&after=%d", *l.NextAfter)); len(l2.Jobs) != 0 || l2.NextAfter != nil {
			t.Fatalf("after the last page: %+v", l2)
		}
	})
}

func TestCancelRetryDelete(t *testing.T) {
	runAll(t, core.Config{}, Config{}, func(t *testing.T, h *harness) {
		a := h.submit(map[string]any{"kind": "a"})
		var out JobResponse
		h.must(http.StatusOK, "POST", "/v1/jobs/"+itoa(a.ID)+"/cancel", nil, &out)
		if out.Job.State != core.StateCancelled || out.Job.FinishedAt.IsZero() {
			t.Fatalf("cancel: %+v", out.Job)
		}
		wantProblem(t, h.do("POST", "/v1/jobs/"+itoa(a.ID)+"/cancel", nil), SlugInvalidState)
		wantProblem(t, h.do("POST", "/v1/jobs/99999999/cancel", nil), SlugJobNotFound)

		out = JobResponse{}
		h.must(http.StatusOK, "POST", "/v1/jobs/"+itoa(a.ID)+"/retry", nil, &out)
		if out.Job.State != core.StateAvailable || !out.Job.FinishedAt.IsZero() {
			t.Fatalf("retry: %+v", out.Job)
		}
		wantProblem(t, h.do("POST", "/v1/jobs/99999999/retry", nil), SlugJobNotFound)

		h.register("w", map[string]any{"queues": []string{"default"}})
		claimed := h.claim("w", nil)
		if len(claimed) != 1 || claimed[0].ID != a.ID {
			t.Fatalf("claim: %+v", claimed)
		}
		wantProblem(t, h.do("POST", "/v1/jobs/"+itoa(a.ID)+"/retry", nil), SlugInvalidState)
		wantProblem(t, h.do("DELETE", "/v1/jobs/"+itoa(a.ID), nil), SlugInvalidState)
		if got := h.get(a.ID); got.State != core.StateRunning {
			t.Fatalf("refused changes changed the job: %+v", got)
		}
		// Cancelling a running job; its holder then gets lease-lost.
		out = JobResponse{}
		h.must(http.StatusOK, "POST", "/v1/jobs/"+itoa(a.ID)+"/cancel", nil, &out)
		if out.Job.State != core.StateCancelled {
			t.Fatalf("cancel running: %+v", out.Job)
		}
		r := h.send(req{method: "DELETE", path: "/v1/jobs/" + itoa(a.ID)})
		if r.status != http.StatusNoContent || len(r.body) != 0 {
			t.Fatalf("delete: %d %s", r.status, r.body)
		}
		wantProblem(t, h.do("GET", "/v1/jobs/"+itoa(a.ID), nil), SlugJobNotFound)
		wantProblem(t, h.do("DELETE", "/v1/jobs/"+itoa(a.ID), nil), SlugJobNotFound)
	})
}

func TestQueuesPauseResume(t *testing.T) {
	runAll(t, core.Config{}, Config{}, func(t *testing.T, h *harness) {
		for range 3 {
			h.submit(map[string]any{"kind": "k", "queue": "mail"})
		}
		h.submit(map[string]any{"kind": "k", "queue": "other", "delay_seconds": 60})
		var qs struct {
			Queues []QueueInfo `json:"queues"`
		}
		h.must(http.StatusOK, "GET", "/v1/queues", nil, &qs)
		if len(qs.Queues) != 2 || qs.Queues[0].Queue != "mail" || qs.Queues[0].Counts[core.StateAvailable] != 3 ||
			qs.Queues[1].Counts[core.StateScheduled] != 1 || qs.Queues[0].Paused {
			t.Fatalf("queues: %+v", qs.Queues)
		}
		if _, ok := qs.Queues[0].Counts[core.StateDiscarded]; !ok {
			t.Fatalf("counts lack zero states: %v", qs.Queues[0].Counts)
		}
		var one struct {
			Queue QueueInfo `json:"queue"`
		}
		h.must(http.StatusOK, "POST", "/v1/queues/mail/pause", nil, &one)
		if !one.Queue.Paused || one.Queue.Queue != "mail" || one.Queue.Counts[core.StateAvailable] != 3 {
			t.Fatalf("pause: %+v", one.Queue)
		}
		h.register("w", map[string]any{"queues": []string{"mail"}})
		if jobs := h.claim("w", map[string]any{"limit": 10}); len(jobs) != 0 {
			t.Fatalf("claimed %d jobs from a paused queue", len(jobs))
		}
		h.must(http.StatusOK, "POST", "/v1/queues/mail/resume", nil, &one)
		if one.Queue.Paused {
			t.Fatalf("resume: %+v", one.Queue)
		}
		if jobs := h.claim("w", map[string]any{"limit": 10}); len(jobs) != 3 {
			t.Fatalf("claimed %d jobs after resume, want 3", len(jobs))
		}
		// A queue with no jobs and no record is refused as a likely typo,
		// and nothing is stored; with create=true it is paused and resumed.
		for _, action := range []string{"pause", "resume"} {
			wantProblem(t, h.do("POST", "/v1/queues/empty/"+action, nil), SlugNotFound)
		}
		var all QueuesResponse
		h.must(http.StatusOK, "GET", "/v1/queues", nil, &all)
		for _, q := range all.Queues {
			if q.Queue == "empty" {
				t.Fatalf("a refused pause stored the queue: %+v", all.Queues)
			}
		}
		wantProblem(t, h.do("POST", "/v1/queues/empty/pause?create=maybe", nil), SlugInvalidRequest)
		h.must(http.StatusOK, "POST", "/v1/queues/empty/pause?create=true", nil, &one)
		if one.Queue.Queue != "empty" || !one.Queue.Paused {
			t.Fatalf("pause with create=true: %+v", one.Queue)
		}
		h.must(http.StatusOK, "POST", "/v1/queues/empty/resume", nil, &one) // known now: it has a pause
		if one.Queue.Queue != "empty" || one.Queue.Paused {
			t.Fatalf("resume: %+v", one.Queue)
		}
		wantProblem(t, h.do("POST", "/v1/queues/bad%20name/pause", nil), SlugInvalidRequest)
	})
}
