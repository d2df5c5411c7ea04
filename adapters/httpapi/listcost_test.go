package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backlogq/backlog/adapters/httpapi/client"
	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/memory"
	"github.com/backlogq/backlog/store/sqlite"
)

// listCountingStore counts the list reads that reach st and the jobs they
// return. With block set, every list read after the first `fast` ones
// waits for its context to end and returns its error (a store too slow
// for the request's time).
type listCountingStore struct {
	contract.Store
	calls, rows atomic.Int64
	block       bool
	fast        int64
}

func (c *listCountingStore) wait(ctx context.Context) error {
	if c.block && c.calls.Add(1) > c.fast {
		<-ctx.Done()
		return ctx.Err()
	}
	if !c.block {
		c.calls.Add(1)
	}
	return nil
}

func (c *listCountingStore) List(ctx context.Context, p core.ListParams) ([]*core.Job, error) {
	if err := c.wait(ctx); err != nil {
		return nil, err
	}
	jobs, err := c.Store.List(ctx, p)
	c.rows.Add(int64(len(jobs)))
	return jobs, err
}

func (c *listCountingStore) ListPage(ctx context.Context, p core.ListParams, maxBytes int) ([]*core.Job, error) {
	if err := c.wait(ctx); err != nil {
		return nil, err
	}
	jobs, err := c.Store.(contract.PageLister).ListPage(ctx, p, maxBytes)
	c.rows.Add(int64(len(jobs)))
	return jobs, err
}

// fillSQLite inserts n jobs of queue "q" into st, run_at spread over n
// seconds out of id order, every 50th with args of 64 KiB.
func fillSQLite(t *testing.T, st contract.Store, n int) {
	t.Helper()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	big := json.RawMessage(fmt.Sprintf(`{"pad":%q}`, strings.Repeat("x", 64<<10)))
	var batch []core.InsertParams
	for i := range n {
		args := json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))
		if i%50 == 0 {
			args = big
		}
		batch = append(batch, core.InsertParams{
			Queue: "q", Kind: "k", Args: args, Priority: 5, MaxAttempts: 3,
			RunAt: now.Add(time.Duration((i*7919)%n) * time.Second),
		})
		if len(batch) == 500 || i == n-1 {
			if _, err := st.Insert(context.Background(), now, batch); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
}

// TestListPageIsOneStoreRead: on 20,000 SQLite jobs, some with 64 KiB
// args, a page of GET /v1/jobs, by run_at or by id, either way, is one
// store read that returns the page's jobs and no more: its cost does not
// grow with the largest job the server accepts (the page used to be read
// in chunks sized for 1 MiB args, about 7 jobs a read, each read sorting
// every matching job). With a byte budget the read stops at the job that
// reaches it. That the read is an index range, not a sort, is checked on
// each store (TestListUsesAnIndex in store/sqlite, store/postgres and
// store/mysql).
func TestListPageIsOneStoreRead(t *testing.T) {
	sq, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "list.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sq.Close() })
	fillSQLite(t, sq, 20000)
	st := &listCountingStore{Store: sq}
	h := newHarness(t, st, core.Config{}, Config{})
	small := newHarness(t, st, core.Config{}, Config{MaxPageBytes: 200 << 10})

	for _, path := range []string{
		"/v1/jobs?sort=run_at&order=desc&limit=1000",
		"/v1/jobs?sort=run_at&limit=1000",
		"/v1/jobs?order=desc&limit=1000",
		"/v1/jobs?queue=q&state=scheduled,available&sort=run_at&limit=1000",
	} {
		st.calls.Store(0)
		st.rows.Store(0)
		var page ListResponse
		h.must(http.StatusOK, http.MethodGet, path, nil, &page)
		if len(page.Jobs) != 1000 || page.NextAfter == nil {
			t.Fatalf("GET %s: %d jobs, next_after %v; want 1000 and a next page", path, len(page.Jobs), page.NextAfter)
		}
		if c, r := st.calls.Load(), st.rows.Load(); c != 1 || r != 1000 {
			t.Errorf("GET %s made %d store reads returning %d jobs; want 1 read of the page's 1000 jobs", path, c, r)
		}
	}

	// A budget of 200 KiB ends the page at the fourth job of 64 KiB, and
	// the read returns nothing after it.
	st.calls.Store(0)
	st.rows.Store(0)
	var page ListResponse
	small.must(http.StatusOK, http.MethodGet, "/v1/jobs?limit=1000", nil, &page)
	bigs := 0
	for _, j := range page.Jobs {
		if len(j.Args) > 64<<10 {
			bigs++
		}
	}
	if bigs != 4 || len(page.Jobs[len(page.Jobs)-1].Args) < 64<<10 || page.NextAfter == nil {
		t.Fatalf("a page with a budget of 200 KiB: %d jobs, %d of 64 KiB, next_after %v; want it to end at the fourth job of 64 KiB, with a next page", len(page.Jobs), bigs, page.NextAfter)
	}
	if c, r := st.calls.Load(), st.rows.Load(); c != 1 || r != int64(len(page.Jobs)) {
		t.Errorf("the page within 200 KiB made %d store reads returning %d jobs; want 1 read of its %d jobs", c, r, len(page.Jobs))
	}
}

// TestListReadOutOfTimeIs503: a list page whose store read outlasts its
// share of the write timeout is answered 503 unavailable with
// Retry-After, while the client can still read it, not left to the write
// deadline (which used to close the connection without an answer).
func TestListReadOutOfTimeIs503(t *testing.T) {
	st := &listCountingStore{Store: memory.New(), block: true}
	h := newHarness(t, st, core.Config{}, Config{WriteTimeout: 400 * time.Millisecond})
	r, err := h.trySend(req{method: http.MethodGet, path: "/v1/jobs?sort=run_at&order=desc"})
	if err != nil {
		t.Fatalf("GET /v1/jobs with a store slower than the write timeout: %v; want a 503 answer", err)
	}
	if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" || !strings.Contains(string(r.body), "could not be read within 300ms") {
		t.Fatalf("GET /v1/jobs with a store slower than the write timeout: %d %s (Retry-After %q); want 503 saying the page could not be read in time, with Retry-After", r.status, r.body, r.header.Get("Retry-After"))
	}
}

// TestListPageIsNeverSentInPart: a store that answers the first read of
// a page and then hangs until the request's time is up never yields a
// 200 whose body stops part-way (the page used to be written chunk by
// chunk as it was read, so the client got the start of a page, then the
// connection closed): the client gets the whole page, or an error
// answer.
func TestListPageIsNeverSentInPart(t *testing.T) {
	mem := memory.New()
	st := &listCountingStore{Store: mem, block: true, fast: 1}
	big := json.RawMessage(fmt.Sprintf(`{"pad":%q}`, strings.Repeat("x", 20<<10)))
	var ps []core.InsertParams
	for range 40 {
		ps = append(ps, core.InsertParams{Queue: "q", Kind: "k", Args: big, Priority: 5, MaxAttempts: 3, RunAt: time.Now()})
	}
	if _, err := mem.Insert(context.Background(), time.Now(), ps); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, st, core.Config{}, Config{WriteTimeout: 2 * time.Second})
	r, err := h.trySend(req{method: http.MethodGet, path: "/v1/jobs?limit=40"})
	if err != nil {
		t.Fatalf("GET /v1/jobs: %v; want the whole page or an error answer, not an answer cut off", err)
	}
	if r.status == http.StatusOK {
		var page ListResponse
		if err := json.Unmarshal(r.body, &page); err != nil || len(page.Jobs) != 40 {
			t.Fatalf("GET /v1/jobs: 200 with %d bytes (%v); want the whole page of 40 jobs", len(r.body), err)
		}
	}

	// The Go client: an answer cut off is a TransportError (the call may
	// be repeated: a list is idempotent), never a short page.
	cl, err := client.New(h.hs.URL, client.WithRetry(client.RetryPolicy{MaxAttempts: 1}))
	if err != nil {
		t.Fatal(err)
	}
	st.calls.Store(0)
	page, err := cl.ListJobs(context.Background(), client.ListParams{Limit: 40})
	if err != nil {
		var te *client.TransportError
		if !errors.As(err, &te) && !errors.Is(err, client.ErrUnavailable) {
			t.Fatalf("client ListJobs: %v; want a page or a transport or unavailable error", err)
		}
	} else if len(page.Jobs) != 40 {
		t.Fatalf("client ListJobs: %d jobs; want the whole page of 40", len(page.Jobs))
	}
}

// failingWriter accepts `room` bytes of body and fails every write after.
type failingWriter struct {
	header http.Header
	room   int
	status int
}

func (w *failingWriter) Header() http.Header { return w.header }
func (w *failingWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}
func (w *failingWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if len(b) > w.room {
		n := w.room
		w.room = 0
		return n, errors.New("write tcp: i/o timeout")
	}
	w.room -= len(b)
	return len(b), nil
}

// TestListAbortsAPageThatCannotBeWritten: when writing a page fails
// part-way (the write deadline passed, the client went away), the
// handler aborts the answer (http.ErrAbortHandler: net/http closes the
// connection, or resets the HTTP/2 stream) instead of returning as if the
// page were complete, which HTTP/2 would end cleanly after a body cut
// off; a client then sees an unexpected EOF.
func TestListAbortsAPageThatCannotBeWritten(t *testing.T) {
	mem := memory.New()
	var ps []core.InsertParams
	for i := range 200 {
		ps = append(ps, core.InsertParams{Queue: "q", Kind: "k", Args: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)), Priority: 5, MaxAttempts: 3, RunAt: time.Now()})
	}
	if _, err := mem.Insert(context.Background(), time.Now(), ps); err != nil {
		t.Fatal(err)
	}
	c, err := core.NewClient(mem, core.Config{MaintenanceInterval: -1, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(c, Config{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	w := &failingWriter{header: http.Header{}, room: 5000}
	r := httptest.NewRequest(http.MethodGet, "/v1/jobs?limit=200", nil)
	panicked := func() (v any) {
		defer func() { v = recover() }()
		srv.ServeHTTP(w, r)
		return nil
	}()
	if panicked != http.ErrAbortHandler {
		t.Fatalf("a list page whose writing failed after 5000 bytes: the handler returned (panic %v); want it to abort with http.ErrAbortHandler", panicked)
	}

	// Over a real connection, what the client sees of an aborted page.
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		srv.ServeHTTP(&cutWriter{ResponseWriter: w, room: 5000}, r)
	}))
	t.Cleanup(hs.Close)
	resp, err := http.Get(hs.URL + "/v1/jobs?limit=200")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, err = io.ReadAll(resp.Body)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("reading an aborted page: %v; want io.ErrUnexpectedEOF", err)
	}
	cl, err := client.New(hs.URL, client.WithRetry(client.RetryPolicy{MaxAttempts: 1}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = cl.ListJobs(context.Background(), client.ListParams{Limit: 200})
	var te *client.TransportError
	if !errors.As(err, &te) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("client ListJobs of an aborted page: %v; want a TransportError wrapping io.ErrUnexpectedEOF", err)
	}
}

// cutWriter passes `room` bytes of body through and fails every write
// after, as a connection past its write deadline does.
type cutWriter struct {
	http.ResponseWriter
	room int
}

func (w *cutWriter) Write(b []byte) (int, error) {
	if len(b) > w.room {
		n, _ := w.ResponseWriter.Write(b[:w.room])
		w.room = 0
		return n, errors.New("write tcp: i/o timeout")
	}
	w.room -= len(b)
	return w.ResponseWriter.Write(b)
}
