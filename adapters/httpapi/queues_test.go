package httpapi

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/internal/teststores"
)

// insertQueues stores one job in each of n queues named p0000, p0001, …
func insertQueues(t *testing.T, st core.Store, n int) {
	t.Helper()
	now := core.UTC(time.Now())
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
