package httpapi

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/internal/teststores"
)

// insertQueues stores one job in each of n queues named p0000, p0001, …
func insertQueues(t *testing.T, st contract.Store, n int) {
	t.Helper()
	now := contract.UTC(time.Now())
	var ps []core.InsertParams
	for i := range n {
		ps = append(ps, core.InsertParams{Queue: fmt.Sprintf("p%04d", i), Kind: "k", Args: []byte(`{}`), Priority: 5, MaxAttempts: 1, RunAt: now})
	}
	if _, err := st.Insert(t.Context(), now, ps); err != nil {
		t.Fatal(err)
	}
}

// TestQueuesArePaged: GET /v1/queues answers at most DefaultQueuePage
// queues unless asked for up to MaxQueuePage, with next_after to read on;
// reading page after page gives every queue once, in order.
func TestQueuesArePaged(t *testing.T) {
	st := teststores.Memory(t)
	insertQueues(t, st, 250)
	h := newHarness(t, st, core.Config{}, Config{StatsCacheTTL: -1})

	var page QueuesResponse
	h.must(http.StatusOK, "GET", "/v1/queues", nil, &page)
	if len(page.Queues) != DefaultQueuePage || page.NextAfter != "p0099" {
		t.Fatalf("first page: %d queues, next_after %q; want %d and p0099", len(page.Queues), page.NextAfter, DefaultQueuePage)
	}
	var names []string
	after := ""
	for i := 0; ; i++ {
		path := "/v1/queues?limit=70"
		if after != "" {
			path += "&after=" + after
		}
		h.must(http.StatusOK, "GET", path, nil, &page)
		for _, q := range page.Queues {
			names = append(names, q.Queue)
		}
		if page.NextAfter == "" {
			break
		}
		after = page.NextAfter
		if i > 10 {
			t.Fatal("paging does not end")
		}
	}
	if len(names) != 250 || names[0] != "p0000" || names[249] != "p0249" {
		t.Fatalf("paged through %d queues (%v … %v)", len(names), names[:1], names[len(names)-1:])
	}
	h.must(http.StatusOK, "GET", "/v1/queues?limit=1000", nil, &page)
	if len(page.Queues) != 250 || page.NextAfter != "" {
		t.Fatalf("limit=1000: %d queues, next_after %q", len(page.Queues), page.NextAfter)
	}
	// An exact last page says nothing follows.
	h.must(http.StatusOK, "GET", "/v1/queues?limit=50&after=p0199", nil, &page)
	if len(page.Queues) != 50 || page.NextAfter != "" {
		t.Fatalf("exact last page: %d queues, next_after %q", len(page.Queues), page.NextAfter)
	}
	for _, bad := range []string{"0", "1001", "+1", "01", "-1", "1.0", "x", " 1"} {
		wantProblem(t, h.do("GET", "/v1/queues?limit="+url.QueryEscape(bad), nil), SlugInvalidRequest)
	}
}

// TestSubmissionsCreateQueuesUpToMaxQueues: once the store holds
// MaxQueues queues, a submission naming a new queue is refused whole with
// 422 too-many-queues (a burst within one stats read included), while the
// existing queues take jobs as before.
func TestSubmissionsCreateQueuesUpToMaxQueues(t *testing.T) {
	st := teststores.Memory(t)
	insertQueues(t, st, 8)
	h := newHarness(t, st, core.Config{}, Config{MaxQueues: 10, StatsCacheTTL: time.Hour})
	// Two new queues fit, one by one (the stats read is an hour old by
	// then: the server counts what it admitted itself).
	h.submit(map[string]any{"kind": "k", "queue": "new1"})
	h.submit(map[string]any{"kind": "k", "queue": "new2"})
	p := wantProblem(t, h.do("POST", "/v1/jobs", map[string]any{"kind": "k", "queue": "new3"}), SlugTooManyQueues)
	if !strings.Contains(p.Detail, `"new3"`) {
		t.Fatalf("detail %q", p.Detail)
	}
	r := h.do("POST", "/v1/jobs/batch", map[string]any{"jobs": []map[string]any{{"kind": "k", "queue": "p0001"}, {"kind": "k", "queue": "new4"}}})
	p = wantProblem(t, r, SlugTooManyQueues)
	if !strings.HasPrefix(p.Detail, "jobs[1]: ") {
		t.Fatalf("batch detail %q", p.Detail)
	}
	if n := len(h.snapshot()); n != 10 {
		t.Fatalf("%d jobs stored, want 10 (refused submissions insert nothing)", n)
	}
	// Existing queues, new ones just admitted included, still take jobs.
	h.submit(map[string]any{"kind": "k", "queue": "p0007"})
	h.submit(map[string]any{"kind": "k", "queue": "new1"})

	// A batch creating many queues at once is refused whole.
	h2 := newHarness(t, teststores.Memory(t), core.Config{}, Config{MaxQueues: 5})
	var jobs []map[string]any
	for i := range 6 {
		jobs = append(jobs, map[string]any{"kind": "k", "queue": fmt.Sprintf("b%d", i)})
	}
	wantProblem(t, h2.do("POST", "/v1/jobs/batch", map[string]any{"jobs": jobs}), SlugTooManyQueues)
	var out BatchResponse
	h2.must(http.StatusOK, "POST", "/v1/jobs/batch", map[string]any{"jobs": jobs[:5]}, &out)
}

// TestDefaultMaxQueues: without configuration a server lets submissions
// create DefaultMaxQueues queues, not more.
func TestDefaultMaxQueues(t *testing.T) {
	st := teststores.Memory(t)
	insertQueues(t, st, DefaultMaxQueues)
	h := newHarness(t, st, core.Config{}, Config{})
	wantProblem(t, h.do("POST", "/v1/jobs", map[string]any{"kind": "k", "queue": "one-more"}), SlugTooManyQueues)
	h.submit(map[string]any{"kind": "k", "queue": "p0000"})
	h = newHarness(t, st, core.Config{}, Config{MaxQueues: -1})
	h.submit(map[string]any{"kind": "k", "queue": "one-more"})
}

// TestAllowedQueues: with AllowedQueues set, a submission naming any other
// queue is refused whole with 422 queue-not-allowed.
func TestAllowedQueues(t *testing.T) {
	h := newHarness(t, teststores.Memory(t), core.Config{}, Config{AllowedQueues: []string{"default", "mail"}})
	h.submit(map[string]any{"kind": "k"})
	h.submit(map[string]any{"kind": "k", "queue": "mail"})
	p := wantProblem(t, h.do("POST", "/v1/jobs", map[string]any{"kind": "k", "queue": "other"}), SlugQueueNotAllowed)
	if !strings.Contains(p.Detail, `"other"`) {
		t.Fatalf("detail %q", p.Detail)
	}
	wantProblem(t, h.do("POST", "/v1/jobs/batch", map[string]any{"jobs": []map[string]any{{"kind": "k"}, {"kind": "k", "queue": "x"}}}), SlugQueueNotAllowed)
	if n := len(h.snapshot()); n != 2 {
		t.Fatalf("%d jobs stored, want 2", n)
	}
}

// TestQueueCapReadsAreItsOwn: the queue cap reads the store's queues
// before the job is inserted; that read must not become the answer of
// GET /v1/queues, which must show the job just submitted.
func TestQueueCapReadsAreItsOwn(t *testing.T) {
	h := newHarness(t, teststores.Memory(t), core.Config{}, Config{StatsCacheTTL: time.Hour})
	h.submit(map[string]any{"kind": "k", "queue": "fresh"})
	var page QueuesResponse
	h.must(http.StatusOK, "GET", "/v1/queues", nil, &page)
	if len(page.Queues) != 1 || page.Queues[0].Queue != "fresh" || page.Queues[0].Counts[core.StateAvailable] != 1 {
		t.Fatalf("queues after a submission: %+v", page.Queues)
	}
}

// TestQueueCapHoldsUnderConcurrentSubmissions: submissions creating
// queues at the same moment never take the store past MaxQueues.
func TestQueueCapHoldsUnderConcurrentSubmissions(t *testing.T) {
	st := teststores.Memory(t)
	h := newHarness(t, st, core.Config{}, Config{MaxQueues: 10})
	var replies []<-chan reply
	for i := range 40 {
		replies = append(replies, h.sendAsync(req{method: "POST", path: "/v1/jobs", body: map[string]any{"kind": "k", "queue": fmt.Sprintf("c%02d", i)}}))
	}
	created := 0
	for _, ch := range replies {
		switch r := <-ch; r.status {
		case http.StatusCreated:
			created++
		case http.StatusUnprocessableEntity:
		default:
			t.Fatalf("status %d: %s", r.status, r.body)
		}
	}
	stats, err := st.Stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if created != 10 || len(stats) != 10 {
		t.Fatalf("%d submissions created queues, the store holds %d; want 10 and 10", created, len(stats))
	}
}
