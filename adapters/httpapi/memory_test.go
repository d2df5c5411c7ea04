package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/internal/teststores"
)

// memoryCeiling is the documented bound (docs/guarantees.md, "Memory") on
// how far the heap of a server with the default MaxPageBytes and
// MaxHeavyRequests grows above its idle size while it answers list pages
// and claims, whatever their limits and however large the jobs.
const memoryCeiling = 256 << 20

// TestMemoryCeilingUnderLargeListsAndClaims stores 96 jobs of 1 MiB args
// on SQLite, then has 8 clients ask for GET /v1/jobs?limit=1000 and 2
// workers claim 1000 at a time, over and over for two seconds, while it
// samples the heap. Answers built whole held every job of a page several
// times over (four such lists took a server to 3.6 GB); pages and claims
// bounded by MaxPageBytes, read in chunks and written as they are encoded,
// in at most MaxHeavyRequests requests at once, keep the heap's growth
// under memoryCeiling. Each list page must still be valid JSON whose
// next_after leads on, and every job must be reachable through the pages.
func TestMemoryCeilingUnderLargeListsAndClaims(t *testing.T) {
	if testing.Short() {
		t.Skip("stores 96 MiB of jobs")
	}
	const jobs = 96
	st := teststores.SQLite(t)
	h := newHarness(t, st, core.Config{}, Config{})
	ctx := context.Background()
	args := []byte(`"` + strings.Repeat("x", core.DefaultMaxArgsBytes-2) + `"`)
	now := time.Now()
	for range jobs / 8 {
		ps := make([]core.InsertParams, 8)
		for i := range ps {
			ps[i] = core.InsertParams{Queue: "big", Kind: "blob", Args: args, Priority: 5, MaxAttempts: 3, RunAt: now}
		}
		if _, err := st.Insert(ctx, now, ps); err != nil {
			t.Fatal(err)
		}
	}
	args = nil

	// Every job is reachable through the pages, each page within budget.
	seen := 0
	after := int64(0)
	for pages := 0; ; pages++ {
		var page ListResponse
		h.must(http.StatusOK, "GET", fmt.Sprintf("/v1/jobs?limit=1000&after=%d", after), nil, &page)
		seen += len(page.Jobs)
		// A page can end at the budget with the store's last job, then
		// the next one is empty and the last.
		if n := len(page.Jobs); (n == 0 && page.NextAfter != nil) || n > DefaultMaxPageBytes/core.DefaultMaxArgsBytes+1 {
			t.Fatalf("page %d holds %d jobs of 1 MiB; the budget is %d bytes", pages, n, DefaultMaxPageBytes)
		}
		if page.NextAfter == nil {
			break
		}
		after = *page.NextAfter
	}
	if seen != jobs {
		t.Fatalf("the pages held %d jobs; want %d", seen, jobs)
	}

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var peak atomic.Uint64
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		var ms runtime.MemStats
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
		}
	}()

	var (
		wg                       sync.WaitGroup
		lists, claims, busy, bad atomic.Int64
		failure                  atomic.Value
	)
	end := time.Now().Add(2 * time.Second)
	get := func(method, path, body string) (int, error) {
		r, err := http.NewRequestWithContext(ctx, method, h.hs.URL+path, strings.NewReader(body))
		if err != nil {
			return 0, err
		}
		if body != "" {
			r.Header.Set("Content-Type", "application/json")
		}
		resp, err := h.hs.Client().Do(r)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		// Read the answer without keeping it: the client shares the heap.
		dec := json.NewDecoder(resp.Body)
		tok, err := dec.Token()
		if err != nil || tok != json.Delim('{') {
			return resp.StatusCode, fmt.Errorf("answer does not start an object: %v %v", tok, err)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
			return resp.StatusCode, fmt.Errorf("429 without Retry-After")
		}
		return resp.StatusCode, err
	}
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				var (
					status int
					err    error
				)
				if i < 8 {
					status, err = get("GET", "/v1/jobs?limit=1000", "")
					lists.Add(1)
				} else {
					worker := fmt.Sprintf("w%d", i)
					status, err = get("PUT", "/v1/workers/"+worker, `{"queues":["big"]}`)
					if err == nil && status == http.StatusOK {
						status, err = get("POST", "/v1/workers/"+worker+"/claim", `{"limit":1000}`)
					}
					claims.Add(1)
				}
				switch {
				case err != nil:
					failure.CompareAndSwap(nil, err)
					bad.Add(1)
				case status == http.StatusTooManyRequests:
					busy.Add(1)
				case status != http.StatusOK:
					failure.CompareAndSwap(nil, fmt.Errorf("status %d", status))
					bad.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	sampler.Wait()
	grew := int64(peak.Load()) - int64(base)
	t.Logf("%d list pages and %d claims (%d answered 429) over %d jobs of 1 MiB: heap grew by at most %.1f MiB above %.1f MiB (ceiling %d MiB)",
		lists.Load(), claims.Load(), busy.Load(), jobs, float64(grew)/(1<<20), float64(base)/(1<<20), memoryCeiling>>20)
	if bad.Load() > 0 {
		t.Fatalf("%d requests failed; first: %v", bad.Load(), failure.Load())
	}
	if grew > memoryCeiling {
		t.Fatalf("the heap grew by %d MiB; the documented ceiling is %d MiB", grew>>20, memoryCeiling>>20)
	}
}

// TestHeavyRequestsOverTheLimitAre429: with every slot taken, a list page
// waits for one and is then answered 429 too-many-requests with
// Retry-After.
func TestHeavyRequestsOverTheLimitAre429(t *testing.T) {
	st := teststores.Memory(t)
	h := newHarness(t, st, core.Config{}, Config{MaxHeavyRequests: 1})
	h.submit(map[string]any{"kind": "k"})
	if err := h.srv.heavy.acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.register("w", map[string]any{"queues": []string{"default"}})
	start := time.Now()
	claim := h.sendAsync(req{method: "POST", path: "/v1/workers/w/claim"})
	r := h.do("GET", "/v1/jobs", nil)
	wantProblem(t, r, SlugTooManyRequests)
	if r.header.Get("Retry-After") == "" || time.Since(start) < heavyWait {
		t.Fatalf("429 after %s with Retry-After %q", time.Since(start), r.header.Get("Retry-After"))
	}
	wantProblem(t, <-claim, SlugTooManyRequests)
	if j := h.snapshot()[0]; j.State != core.StateAvailable {
		t.Fatalf("a claim answered 429 left its job %s", j.State)
	}
	h.srv.heavy.release()
	var page ListResponse
	h.must(http.StatusOK, "GET", "/v1/jobs", nil, &page)
	if len(page.Jobs) != 1 {
		t.Fatalf("%d jobs", len(page.Jobs))
	}
	if jobs := h.claim("w", nil); len(jobs) != 1 {
		t.Fatalf("claimed %d", len(jobs))
	}
}

// TestClaimStopsAtTheByteBudget: a claim of many large jobs claims them
// in chunks of as many as still fit MaxPageBytes at the largest size, stops
// claiming once the budget is reached, and leaves the rest for the next
// claim; a list page ends at the job that reaches the budget and carries
// the cursor.
func TestClaimStopsAtTheByteBudget(t *testing.T) {
	// Chunks of 2 (450,000 / (100,000 + 100,000 + 1)); jobs of 100,000
	// bytes of args.
	ccfg := core.Config{MaxArgsBytes: 100_000, MaxResultBytes: 100_000}
	runAll(t, ccfg, Config{MaxPageBytes: 450_000}, func(t *testing.T, h *harness) {
		big := strings.Repeat("y", 100_000-2)
		for range 10 {
			h.submit(map[string]any{"kind": "k", "args": big})
		}
		h.register("w", map[string]any{"queues": []string{"default"}})
		first := h.claim("w", map[string]any{"limit": 10})
		// Chunks of 2, then of 1 (250,000 bytes left fit one more at the
		// largest size), until 500,000 bytes reach the budget.
		if len(first) != 5 {
			t.Fatalf("first claim: %d jobs; want 5", len(first))
		}
		running := 0
		for _, j := range h.snapshot() {
			if j.State == core.StateRunning {
				running++
			}
		}
		if running != len(first) {
			t.Fatalf("%d jobs running; the claim answered %d", running, len(first))
		}
		if rest := h.claim("w", map[string]any{"limit": 10}); len(rest) != 5 {
			t.Fatalf("second claim: %d jobs; want the other 5", len(rest))
		}
		// Pages end at the job that reaches the budget: 5 jobs each. The
		// store's last job may end a page with a cursor; the page after
		// it is then empty and has none.
		var (
			page   ListResponse
			ids    []int64
			counts []int
		)
		for {
			path := "/v1/jobs?limit=10"
			if len(ids) > 0 {
				path += "&after=" + itoa(ids[len(ids)-1])
			}
			h.must(http.StatusOK, "GET", path, nil, &page)
			counts = append(counts, len(page.Jobs))
			for _, j := range page.Jobs {
				ids = append(ids, j.ID)
			}
			if page.NextAfter == nil {
				break
			}
			if *page.NextAfter != ids[len(ids)-1] || len(counts) > 3 {
				t.Fatalf("next_after %d after pages of %v", *page.NextAfter, counts)
			}
		}
		if len(ids) != 10 || counts[0] != 5 || counts[1] != 5 {
			t.Fatalf("pages of %v jobs; want 5, 5 (and maybe an empty last one)", counts)
		}
	})
}
