package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/internal/teststores"
)

// harness is a real API server on loopback over a client on one store.
type harness struct {
	t      *testing.T
	st     contract.Store
	c      *core.Client
	srv    *Server
	hs     *httptest.Server
	token  string // sent by do unless a request sets its own
	events *eventLog
}

// eventLog records observed events.
type eventLog struct {
	ch chan core.Event
}

func (l *eventLog) Observe(e core.Event) {
	select {
	case l.ch <- e:
	default:
	}
}

// kinds drains the log and returns the kinds seen so far.
func (l *eventLog) drain() []core.Event {
	var out []core.Event
	for {
		select {
		case e := <-l.ch:
			out = append(out, e)
		default:
			return out
		}
	}
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// newHarness starts a server over st. ccfg gets MaintenanceInterval -1 and
// a quiet logger unless set.
func newHarness(t *testing.T, st contract.Store, ccfg core.Config, cfg Config) *harness {
	t.Helper()
	if ccfg.MaintenanceInterval == 0 {
		ccfg.MaintenanceInterval = -1
	}
	if ccfg.Logger == nil {
		ccfg.Logger = quietLogger()
	}
	ev := &eventLog{ch: make(chan core.Event, 10000)}
	ccfg.Observers = append(ccfg.Observers, ev)
	c, err := core.NewClient(st, ccfg)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := validatedServer(t, srv)
	t.Cleanup(func() {
		hs.Close()
		_ = srv.Close()
	})
	return &harness{t: t, st: st, c: c, srv: srv, hs: hs, events: ev}
}

// sub returns the harness reporting to t (a subtest).
func (h *harness) sub(t *testing.T) *harness {
	c := *h
	c.t = t
	return &c
}

// run starts the harness on every backend.
func runAll(t *testing.T, ccfg core.Config, cfg Config, fn func(t *testing.T, h *harness)) {
	teststores.Run(t, func(t *testing.T, st contract.Store) {
		fn(t, newHarness(t, st, ccfg, cfg))
	})
}

// reply is one response.
type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) decode(t *testing.T, v any) {
	t.Helper()
	reflect.ValueOf(v).Elem().SetZero()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

// req describes one request; body is marshalled unless it is a string or
// []byte (sent as is).
type req struct {
	method, path string
	body         any
	token        *string
	contentType  *string
	header       map[string]string
}

func (h *harness) send(q req) reply {
	h.t.Helper()
	r, err := h.trySend(q)
	if err != nil {
		h.t.Fatalf("%s %s: %v", q.method, q.path, err)
	}
	return r
}

// sendAsync sends q from another goroutine (which must not call
// t.Fatal); a transport error comes back as status 0 with the error text.
func (h *harness) sendAsync(q req) <-chan reply {
	ch := make(chan reply, 1)
	go func() {
		r, err := h.trySend(q)
		if err != nil {
			r = reply{body: []byte(err.Error())}
		}
		ch <- r
	}()
	return ch
}

func (h *harness) trySend(q req) (reply, error) {
	var rd io.Reader
	switch b := q.body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			return reply{}, err
		}
		rd = bytes.NewReader(raw)
	}
	r, err := http.NewRequestWithContext(h.t.Context(), q.method, h.hs.URL+q.path, rd)
	if err != nil {
		return reply{}, err
	}
	if q.body != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	if q.contentType != nil {
		r.Header.Set("Content-Type", *q.contentType)
	}
	tok := h.token
	if q.token != nil {
		tok = *q.token
	}
	if tok != "" {
		r.Header.Set("Authorization", "Bearer "+tok)
	}
	for k, v := range q.header {
		r.Header.Set(k, v)
	}
	resp, err := h.hs.Client().Do(r)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, err
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

func (h *harness) do(method, path string, body any) reply {
	h.t.Helper()
	return h.send(req{method: method, path: path, body: body})
}

// must sends and asserts the status, decoding the body into out (if set).
func (h *harness) must(status int, method, path string, body any, out any) reply {
	h.t.Helper()
	r := h.do(method, path, body)
	if r.status != status {
		h.t.Fatalf("%s %s: status %d, want %d: %s", method, path, r.status, status, r.body)
	}
	if out != nil {
		r.decode(h.t, out)
	}
	return r
}

// wantProblem asserts r is a problem of slug with its status.
func wantProblem(t *testing.T, r reply, slug string) problemBody {
	t.Helper()
	info := problems[slug]
	if r.status != info.status {
		t.Fatalf("status %d, want %d (%s): %s", r.status, info.status, slug, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("content type %q, want application/problem+json", ct)
	}
	var p problemBody
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatalf("problem body %s: %v", r.body, err)
	}
	if p.Type != ProblemTypeBase+slug || p.Status != info.status || p.Title == "" || p.CorrelationID == "" || p.Instance == "" {
		t.Fatalf("problem %+v, want type %s", p, slug)
	}
	if p.CorrelationID != r.header.Get("X-Correlation-Id") {
		t.Fatalf("problem correlation id %q, header %q", p.CorrelationID, r.header.Get("X-Correlation-Id"))
	}
	return p
}

// submit submits one job and returns it.
func (h *harness) submit(body map[string]any) *Job {
	h.t.Helper()
	var out SubmitResponse
	h.must(http.StatusCreated, "POST", "/v1/jobs", body, &out)
	return out.Job
}

// get reads a job through the API.
func (h *harness) get(id int64) *Job {
	h.t.Helper()
	var out JobResponse
	h.must(http.StatusOK, "GET", "/v1/jobs/"+itoa(id), nil, &out)
	return out.Job
}

// register registers a worker.
func (h *harness) register(id string, body map[string]any) RegisterResponse {
	h.t.Helper()
	var out RegisterResponse
	h.must(http.StatusOK, "PUT", "/v1/workers/"+id, body, &out)
	return out
}

// claim claims for a worker.
func (h *harness) claim(id string, body any) []*Job {
	h.t.Helper()
	var out ClaimResponse
	h.must(http.StatusOK, "POST", "/v1/workers/"+id+"/claim", body, &out)
	return out.Jobs
}

// snapshot lists every job in the store, by id.
func (h *harness) snapshot() []*core.Job {
	h.t.Helper()
	var all []*core.Job
	var after int64
	for {
		js, err := h.st.List(h.t.Context(), core.ListParams{AfterID: after, Limit: 1000})
		if err != nil {
			h.t.Fatal(err)
		}
		all = append(all, js...)
		if len(js) < 1000 {
			return all
		}
		after = js[len(js)-1].ID
	}
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// eventually polls cond every few ms for up to 30 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func ptr[T any](v T) *T { return &v }

// fakeClock is a settable core.Clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: contract.UTC(time.Now())} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// decideRescue is the engine's rescue decision for a Store.Rescue or
// RescueWorkers call made at now.
func decideRescue(cause string, now time.Time) contract.RescueFunc {
	return func(j *core.Job, lastSeen time.Time) contract.Outcome {
		return core.DecideRescue(j, cause, lastSeen, now)
	}
}

// noLeases is the body of a heartbeat of a worker that holds no job.
var noLeases = map[string]any{"leases": []string{}}
