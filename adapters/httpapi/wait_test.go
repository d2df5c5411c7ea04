package httpapi

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/internal/teststores"
)

// TestWaitLongPoll: GET /v1/jobs/{id}?wait=… answers 200 as soon as the
// job is final (a remote worker's completion, seen by the waiter loop's
// poll; a cancel through the same server, at once), and 202 with the job
// as it is when the wait passes first.
func TestWaitLongPoll(t *testing.T) {
	runAll(t, core.Config{}, Config{}, func(t *testing.T, h *harness) {
		a := h.submit(map[string]any{"kind": "email", "args": map[string]any{"to": "a@b"}})
		b := h.submit(map[string]any{"kind": "email", "args": map[string]any{"to": "c@d"}})

		waitA := h.sendAsync(req{method: "GET", path: "/v1/jobs/" + itoa(a.ID) + "?wait=30s"})
		waitB := h.sendAsync(req{method: "GET", path: "/v1/jobs/" + itoa(b.ID) + "?wait=30"})
		eventually(t, "both long-polls wait", func() bool { return h.srv.waiting.Load() == 2 })

		h.register("w1", map[string]any{"queues": []string{"default"}})
		jobs := h.claim("w1", map[string]any{"limit": 1})
		if len(jobs) != 1 || jobs[0].ID != a.ID {
			t.Fatalf("claim %+v", jobs)
		}
		start := time.Now()
		h.must(http.StatusOK, "POST", "/v1/jobs/"+itoa(a.ID)+"/complete", map[string]any{"lease_token": jobs[0].LeaseToken, "result": "ok"}, nil)
		r := <-waitA
		if r.status != http.StatusOK {
			t.Fatalf("long-poll of a completed job: %d %s", r.status, r.body)
		}
		var got JobResponse
		r.decode(t, &got)
		if got.Job.ID != a.ID || got.Job.State != core.StateCompleted || string(got.Job.Result) != `"ok"` {
			t.Fatalf("long-poll answered %+v", got.Job)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("the completion took %s to reach the long-poll", d)
		}

		h.must(http.StatusOK, "POST", "/v1/jobs/"+itoa(b.ID)+"/cancel", nil, nil)
		r = <-waitB
		r.decode(t, &got)
		if r.status != http.StatusOK || got.Job.State != core.StateCancelled {
			t.Fatalf("long-poll of a cancelled job: %d %s", r.status, r.body)
		}

		// The wait passes first: 202 with the job as it is.
		c := h.submit(map[string]any{"kind": "email", "args": map[string]any{}})
		start = time.Now()
		r = h.do("GET", "/v1/jobs/"+itoa(c.ID)+"?wait=200ms", nil)
		r.decode(t, &got)
		if r.status != http.StatusAccepted || got.Job.ID != c.ID || got.Job.State != core.StateAvailable {
			t.Fatalf("long-poll past its wait: %d %s", r.status, r.body)
		}
		if d := time.Since(start); d < 200*time.Millisecond {
			t.Fatalf("answered after %s, before the wait of 200ms", d)
		}
		// wait=0 answers at once: 202 for a pending job, 200 for a final one.
		h.must(http.StatusAccepted, "GET", "/v1/jobs/"+itoa(c.ID)+"?wait=0", nil, nil)
		h.must(http.StatusOK, "GET", "/v1/jobs/"+itoa(a.ID)+"?wait=0s", nil, nil)
		// Already final: at once.
		h.must(http.StatusOK, "GET", "/v1/jobs/"+itoa(a.ID)+"?wait=60s", nil, nil)

		wantProblem(t, h.do("GET", "/v1/jobs/"+itoa(c.ID+1000)+"?wait=1s", nil), SlugJobNotFound)
		eventually(t, "no long-poll waits", func() bool { return h.srv.waiting.Load() == 0 })
	})
}

// TestWaitBadValues: a wait that is malformed, negative, over MaxJobWait
// or given twice is a 400 invalid-request that names the bounds.
func TestWaitBadValues(t *testing.T) {
	h := newHarness(t, teststores.Memory(t), core.Config{}, Config{})
	j := h.submit(map[string]any{"kind": "k", "args": map[string]any{}})
	for _, v := range []string{"", "abc", "-1s", "61s", "61", "2m", "1.5", "01", "+5", "5 s", "1h"} {
		r := h.do("GET", "/v1/jobs/"+itoa(j.ID)+"?wait="+url.QueryEscape(v), nil)
		p := wantProblem(t, r, SlugInvalidRequest)
		if p.Detail == "" {
			t.Fatalf("wait=%q: no detail", v)
		}
	}
	wantProblem(t, h.do("GET", "/v1/jobs/"+itoa(j.ID)+"?wait=1s&wait=2s", nil), SlugInvalidRequest)
	// Good values (short ones, waited out); unknown parameters are ignored.
	for _, v := range []string{"0", "0.2s", "200ms", "1"} {
		if r := h.do("GET", "/v1/jobs/"+itoa(j.ID)+"?wait="+url.QueryEscape(v)+"&x=1", nil); r.status != http.StatusAccepted {
			t.Fatalf("wait=%q: %d %s", v, r.status, r.body)
		}
	}
}

// TestWaitHoldsNoHeavySlotWhileWaiting: long-polls wait without a
// heavy-request slot, so a list page (one slot in all) is answered while
// they wait; a long-poll answers once a slot is free.
func TestWaitHoldsNoHeavySlotWhileWaiting(t *testing.T) {
	h := newHarness(t, teststores.Memory(t), core.Config{}, Config{MaxHeavyRequests: 1})
	j := h.submit(map[string]any{"kind": "k", "args": map[string]any{}})
	var waits []<-chan reply
	for range 3 {
		waits = append(waits, h.sendAsync(req{method: "GET", path: "/v1/jobs/" + itoa(j.ID) + "?wait=30s"}))
	}
	eventually(t, "the long-polls wait", func() bool { return h.srv.waiting.Load() == 3 })
	start := time.Now()
	h.must(http.StatusOK, "GET", "/v1/jobs", nil, nil)
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("a list page waited %s for a slot held by long-polls", d)
	}
	h.must(http.StatusOK, "POST", "/v1/jobs/"+itoa(j.ID)+"/cancel", nil, nil)
	for _, ch := range waits {
		if r := <-ch; r.status != http.StatusOK {
			t.Fatalf("long-poll: %d %s", r.status, r.body)
		}
	}
}

// TestWaitEndsOnClose: closing the server answers a waiting long-poll
// at once with 202 and the job as it is.
func TestWaitEndsOnClose(t *testing.T) {
	h := newHarness(t, teststores.Memory(t), core.Config{}, Config{})
	j := h.submit(map[string]any{"kind": "k", "args": map[string]any{}})
	ch := h.sendAsync(req{method: "GET", path: "/v1/jobs/" + itoa(j.ID) + "?wait=60s"})
	eventually(t, "the long-poll waits", func() bool { return h.srv.waiting.Load() == 1 })
	start := time.Now()
	_ = h.srv.Close()
	r := <-ch
	if r.status != http.StatusAccepted || time.Since(start) > 5*time.Second {
		t.Fatalf("long-poll at Close: %d %s after %s", r.status, r.body, time.Since(start))
	}
}
