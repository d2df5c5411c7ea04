package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/internal/teststores"
)

func TestRegisterHeartbeatDeregister(t *testing.T) {
	teststores.Run(t, func(t *testing.T, st contract.Store) {
		clock := newFakeClock()
		h := newHarness(t, st, core.Config{Clock: clock}, Config{})
		t0 := clock.Now()
		first := h.register("host-1-ab", map[string]any{"name": "host-1", "queues": []string{"default", "mail"}, "metadata": map[string]string{"v": "1"}})
		if !first.Worker.StartedAt.Equal(t0) || !first.Worker.HeartbeatAt.Equal(t0) || !slices.Equal(first.Worker.Queues, []string{"default", "mail"}) || first.Worker.Metadata["v"] != "1" {
			t.Fatalf("first registration: %+v", first.Worker)
		}
		clock.Advance(5 * time.Second)
		again := h.register("host-1-ab", map[string]any{"name": "host-1b", "queues": []string{"mail"}, "tags": []string{"gpu"}})
		if !again.Worker.StartedAt.Equal(t0) || !again.Worker.HeartbeatAt.Equal(t0.Add(5*time.Second)) || again.Worker.Name != "host-1b" ||
			!slices.Equal(again.Worker.Tags, []string{"gpu"}) || !slices.Equal(again.Worker.Queues, []string{"mail"}) {
			t.Fatalf("re-registration: %+v", again.Worker)
		}
		registered := 0
		for _, e := range h.events.drain() {
			if e.Kind == core.EventWorkerRegistered && e.Reason == "host-1-ab" {
				registered++
			}
		}
		if registered != 1 {
			t.Fatalf("%d worker.registered events, want 1", registered)
		}
		var list struct {
			Workers []Worker `json:"workers"`
		}
		h.must(http.StatusOK, "GET", "/v1/workers", nil, &list)
		if len(list.Workers) != 1 || list.Workers[0].ID != "host-1-ab" || list.Workers[0].Liveness != core.LivenessActive || !list.Workers[0].StartedAt.Equal(t0) {
			t.Fatalf("workers: %+v", list.Workers)
		}

		// Heartbeat extends the leases of every held job.
		for range 3 {
			h.submit(map[string]any{"kind": "k", "queue": "mail"})
		}
		jobs := h.claim("host-1-ab", map[string]any{"limit": 2})
		if len(jobs) != 2 || !jobs[0].LeaseUntil.Equal(clock.Now().Add(30*time.Second)) {
			t.Fatalf("claim: %+v", jobs)
		}
		clock.Advance(10 * time.Second)
		var hb HeartbeatResponse
		h.must(http.StatusOK, "POST", "/v1/workers/host-1-ab/heartbeat", map[string]any{"leases": []string{jobs[0].LeaseToken, jobs[1].LeaseToken}}, &hb)
		if hb.LeasesExtended != 2 || hb.HandedBack != 0 || !hb.Worker.HeartbeatAt.Equal(clock.Now()) || !hb.Worker.StartedAt.Equal(t0) {
			t.Fatalf("heartbeat: %+v", hb)
		}
		for _, j := range jobs {
			if got := h.get(j.ID); !got.LeaseUntil.Equal(clock.Now().Add(30 * time.Second)) {
				t.Fatalf("lease after heartbeat %s, want %s", got.LeaseUntil, clock.Now().Add(30*time.Second))
			}
		}
		h.must(http.StatusOK, "POST", "/v1/workers/host-1-ab/heartbeat", `{"leases":["`+jobs[0].LeaseToken+`","`+jobs[1].LeaseToken+`"]}`, &hb)
		if hb.LeasesExtended != 2 || hb.HandedBack != 0 {
			t.Fatalf("second heartbeat: %+v", hb)
		}

		// Stale shows in the list; dead is not registered any more.
		clock.Advance(40 * time.Second)
		h.must(http.StatusOK, "GET", "/v1/workers", nil, &list)
		if list.Workers[0].Liveness != core.LivenessStale {
			t.Fatalf("liveness after 40 s: %s", list.Workers[0].Liveness)
		}
		clock.Advance(2 * time.Minute)
		wantProblem(t, h.do("POST", "/v1/workers/host-1-ab/heartbeat", noLeases), SlugWorkerNotRegistered)
		wantProblem(t, h.do("POST", "/v1/workers/host-1-ab/claim", nil), SlugWorkerNotRegistered)
		h.register("host-1-ab", map[string]any{"queues": []string{"mail"}})
		h.must(http.StatusOK, "POST", "/v1/workers/host-1-ab/heartbeat", noLeases, &hb)

		r := h.do("DELETE", "/v1/workers/host-1-ab", nil)
		if r.status != http.StatusNoContent {
			t.Fatalf("deregister: %d %s", r.status, r.body)
		}
		wantProblem(t, h.do("POST", "/v1/workers/host-1-ab/heartbeat", noLeases), SlugWorkerNotRegistered)
		wantProblem(t, h.do("POST", "/v1/workers/nobody/claim", map[string]any{}), SlugWorkerNotRegistered)
		h.must(http.StatusOK, "GET", "/v1/workers", nil, &list)
		if len(list.Workers) != 0 {
			t.Fatalf("workers after deregister: %+v", list.Workers)
		}
	})
}

func TestClaimLimitQueuesAndTags(t *testing.T) {
	runAll(t, core.Config{}, Config{}, func(t *testing.T, h *harness) {
		var ids []int64
		for i := range 5 {
			q := "a"
			if i >= 3 {
				q = "b"
			}
			ids = append(ids, h.submit(map[string]any{"kind": "k", "queue": q}).ID)
		}
		gpu := h.submit(map[string]any{"kind": "render", "queue": "a", "tags": []string{"gpu"}})
		h.register("cpu", map[string]any{"queues": []string{"b", "a"}})
		h.register("gpu", map[string]any{"queues": []string{"a"}, "tags": []string{"gpu", "cuda"}})

		// Only the registered queues, and a subset of them.
		wantProblem(t, h.do("POST", "/v1/workers/cpu/claim", map[string]any{"queues": []string{"c"}}), SlugInvalidRequest)
		got := h.claim("cpu", map[string]any{"queues": []string{"a"}, "limit": 2})
		if len(got) != 2 || got[0].ID != ids[0] || got[1].ID != ids[1] {
			t.Fatalf("claim a limit 2: %+v", got)
		}
		// The registered queues in order: b first, then a; the gpu job is
		// skipped by the worker without the tag.
		got = h.claim("cpu", map[string]any{"limit": 10})
		var gotIDs []int64
		for _, j := range got {
			gotIDs = append(gotIDs, j.ID)
			if j.Tags != nil {
				t.Fatalf("untagged worker got tagged job %+v", j)
			}
		}
		if !slices.Equal(gotIDs, []int64{ids[3], ids[4], ids[2]}) {
			t.Fatalf("claim all: %v, want %v", gotIDs, []int64{ids[3], ids[4], ids[2]})
		}
		if got := h.claim("cpu", nil); len(got) != 0 {
			t.Fatalf("cpu claimed %+v", got)
		}
		got = h.claim("gpu", map[string]any{"limit": 5})
		if len(got) != 1 || got[0].ID != gpu.ID || got[0].WorkerID != "gpu" {
			t.Fatalf("gpu claim: %+v", got)
		}
		claimed := 0
		for _, e := range h.events.drain() {
			if e.Kind == core.EventJobClaimed {
				claimed++
				if e.Job == nil || e.Queue == "" || e.QueueWait < 0 {
					t.Fatalf("claimed event %+v", e)
				}
			}
		}
		if claimed != 6 {
			t.Fatalf("%d claimed events, want 6", claimed)
		}
	})
}

func TestLongPoll(t *testing.T) {
	// No poll ticks during the test: wake-ups come from submissions
	// through the server (or the store's notifications).
	runAll(t, core.Config{}, Config{ClaimPollInterval: time.Hour}, func(t *testing.T, h *harness) {
		h.register("w", map[string]any{"queues": []string{"default"}})

		// A short wait with nothing due answers empty.
		if got := h.claim("w", map[string]any{"wait_seconds": 0.2}); len(got) != 0 {
			t.Fatalf("empty wait returned %+v", got)
		}

		done := h.sendAsync(req{method: "POST", path: "/v1/workers/w/claim", body: map[string]any{"wait_seconds": 60, "limit": 5}})
		eventually(t, "the claim to wait", func() bool { return h.srv.waiting.Load() == 1 })
		j := h.submit(map[string]any{"kind": "wake"})
		r := <-done
		var out ClaimResponse
		_ = json.Unmarshal(r.body, &out)
		if r.status != http.StatusOK || len(out.Jobs) != 1 || out.Jobs[0].ID != j.ID || out.Jobs[0].LeaseToken == "" {
			t.Fatalf("long-poll: %d %s", r.status, r.body)
		}
	})
}

func TestLongPollSeesOtherNodesInserts(t *testing.T) {
	// A job inserted straight into the store (another node) is found by
	// the poll ticks or the store's notifications.
	runAll(t, core.Config{}, Config{ClaimPollInterval: 50 * time.Millisecond}, func(t *testing.T, h *harness) {
		h.register("w", map[string]any{"queues": []string{"default"}})
		done := h.sendAsync(req{method: "POST", path: "/v1/workers/w/claim", body: map[string]any{"wait_seconds": 60}})
		eventually(t, "the claim to wait", func() bool { return h.srv.waiting.Load() == 1 })
		other, err := core.NewClient(h.st, core.Config{MaintenanceInterval: -1, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		res, err := other.EnqueueRaw(t.Context(), "elsewhere", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		r := <-done
		var out ClaimResponse
		_ = json.Unmarshal(r.body, &out)
		if r.status != http.StatusOK || len(out.Jobs) != 1 || out.Jobs[0].ID != res.Job.ID {
			t.Fatalf("long-poll: %d %s", r.status, r.body)
		}
	})
}

func TestCloseEndsLongPolls(t *testing.T) {
	h := newHarness(t, teststores.Memory(t), core.Config{}, Config{})
	h.register("w", map[string]any{"queues": []string{"default"}})
	done := h.sendAsync(req{method: "POST", path: "/v1/workers/w/claim", body: map[string]any{"wait_seconds": 60}})
	eventually(t, "the claim to wait", func() bool { return h.srv.waiting.Load() == 1 })
	if err := h.srv.Close(); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.status != http.StatusOK || string(r.body) != "{\"jobs\":[]}\n" {
		t.Fatalf("claim after Close: %d %s", r.status, r.body)
	}
}

// gatedStore delegates to a real store but holds Claim until released,
// so a test can end the request while the claim is in flight.
type gatedStore struct {
	contract.Store
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (g *gatedStore) Claim(ctx context.Context, p contract.ClaimParams) ([]*core.Job, error) {
	first := false
	g.once.Do(func() { first = true })
	if first {
		close(g.entered)
		<-g.release
	}
	return g.Store.Claim(ctx, p)
}

func TestAbandonedClaimHandsJobsBack(t *testing.T) {
	teststores.Run(t, func(t *testing.T, st contract.Store) {
		g := &gatedStore{Store: st, entered: make(chan struct{}), release: make(chan struct{})}
		h := newHarness(t, g, core.Config{}, Config{})
		h.register("w", map[string]any{"queues": []string{"default"}})
		j := h.submit(map[string]any{"kind": "k"})

		// A front that reports when the server sees the request end.
		ended := make(chan struct{})
		front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v1/workers/w/claim" {
				context.AfterFunc(r.Context(), func() { close(ended) })
			}
			h.srv.ServeHTTP(w, r)
		}))
		defer front.Close()

		ctx, cancel := context.WithCancel(t.Context())
		r, err := http.NewRequestWithContext(ctx, "POST", front.URL+"/v1/workers/w/claim", strings.NewReader(`{"limit": 1}`))
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("Content-Type", "application/json")
		errc := make(chan error, 1)
		go func() {
			resp, err := front.Client().Do(r)
			if err == nil {
				resp.Body.Close()
			}
			errc <- err
		}()
		<-g.entered
		cancel()
		if err := <-errc; err == nil {
			t.Fatal("the cancelled request succeeded")
		}
		// Once the server has seen the client go, let the claim go on: it
		// takes the job and must hand it back.
		<-ended
		close(g.release)
		eventually(t, "the job to be handed back", func() bool {
			got, err := st.Get(t.Context(), j.ID)
			return err == nil && got.State == core.StateAvailable && got.Attempt == 0 && got.WorkerID == "w"
		})
	})
}

// TestWorkerCacheForgetsDeadWorkers: records of workers that never
// deregister do not accumulate for the life of the server.
func TestWorkerCacheForgetsDeadWorkers(t *testing.T) {
	c := newWorkerCache()
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 10 * minCacheSweep {
		at := start.Add(time.Duration(i) * time.Second) // one new worker a second, none deregisters
		c.put(core.WorkerInfo{ID: "w-" + itoa(int64(i)), HeartbeatAt: at}, 2*time.Minute)
	}
	if n := len(c.m); n >= 2*minCacheSweep {
		t.Fatalf("the cache holds %d records after %d workers came and went; want fewer than %d", n, 10*minCacheSweep, 2*minCacheSweep)
	}
	last := "w-" + itoa(int64(10*minCacheSweep-1))
	if _, ok := c.get(last); !ok {
		t.Fatalf("the live worker %s was dropped", last)
	}
}

// TestClaimPollIntervalDefault: waiting claims poll every 250 ms on a store
// without notifications, and at the client's PollInterval on one with them.
func TestClaimPollIntervalDefault(t *testing.T) {
	notifying := newHarness(t, teststores.Memory(t), core.Config{}, Config{})
	if got := notifying.srv.cfg.ClaimPollInterval; got != time.Second {
		t.Errorf("with a notifying store: %s; want the client's PollInterval, 1s", got)
	}
	silent := newHarness(t, &countingStore{Store: teststores.Memory(t)}, core.Config{}, Config{})
	if got := silent.srv.cfg.ClaimPollInterval; got != DefaultClaimPollInterval {
		t.Errorf("with a store without notifications: %s; want %s", got, DefaultClaimPollInterval)
	}
}

// recordCountingStore counts the worker records the server reads.
type recordCountingStore struct {
	contract.Store
	records atomic.Int64
}

func (s *recordCountingStore) Workers(ctx context.Context) ([]core.WorkerInfo, error) {
	ws, err := s.Store.Workers(ctx)
	s.records.Add(int64(len(ws)))
	return ws, err
}

func (s *recordCountingStore) Worker(ctx context.Context, id string) (core.WorkerInfo, error) {
	w, err := s.Store.Worker(ctx, id)
	s.records.Add(1)
	return w, err
}

// TestRegistrationReadsDoNotGrowWithWorkers: registering a new worker, and
// claiming or heartbeating under an id this server has not seen, read that
// worker's record only, however many workers the registry holds.
func TestRegistrationReadsDoNotGrowWithWorkers(t *testing.T) {
	teststores.Run(t, func(t *testing.T, inner contract.Store) {
		st := &recordCountingStore{Store: inner}
		h := newHarness(t, st, core.Config{}, Config{})
		other := newHarness(t, st, core.Config{}, Config{}) // a second server on the same store
		now := time.Now().UTC()
		perRegistration := func(existing int) (register, claim float64) {
			for i := range existing {
				w := core.WorkerInfo{ID: fmt.Sprintf("bulk-%d-%d", existing, i), Queues: []string{"default"}, StartedAt: now, HeartbeatAt: now}
				if err := inner.RegisterWorker(t.Context(), w); err != nil {
					t.Fatal(err)
				}
			}
			const n = 5
			before := st.records.Load()
			for i := range n {
				h.register(fmt.Sprintf("new-%d-%d", existing, i), map[string]any{"queues": []string{"default"}})
			}
			register = float64(st.records.Load()-before) / n
			before = st.records.Load()
			for i := range n {
				// Registered through h: the other server has never seen it.
				other.claim(fmt.Sprintf("new-%d-%d", existing, i), nil)
			}
			claim = float64(st.records.Load()-before) / n
			return register, claim
		}
		r10, c10 := perRegistration(10)
		r1000, c1000 := perRegistration(1000)
		t.Logf("records read per registration: %.1f at 10 workers, %.1f at 1,010; per first claim on another server: %.1f, %.1f", r10, r1000, c10, c1000)
		if r1000 > r10 || r1000 > 1 || c1000 > c10 || c1000 > 1 {
			t.Fatalf("worker records read per registration: %.1f with 10 workers registered, %.1f with 1,010; per first claim on another server: %.1f, %.1f; want at most 1 each, whatever the number of workers",
				r10, r1000, c10, c1000)
		}
	})
}
