package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/store/memory"
)

// fuzzServer is an open API server over a memory store, called directly
// (no network) so an iteration costs microseconds.
func fuzzServer(f *testing.F) (*Server, *memory.Store) {
	st := memory.New()
	c, err := core.NewClient(st, core.Config{Logger: quietLogger(), MaintenanceInterval: -1})
	if err != nil {
		f.Fatal(err)
	}
	srv, err := New(c, Config{Logger: quietLogger(), MaxPageBytes: 16 << 10})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = srv.Close(); _ = st.Close() })
	return srv, st
}

// serve answers one request and checks what every answer must be: never
// a 5xx, always a JSON body in UTF-8 (a problem or a document).
func serve(t *testing.T, srv *Server, r *http.Request) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, r)
	body := rec.Body.Bytes()
	if rec.Code >= 500 {
		t.Fatalf("%s %s: status %d: %s", r.Method, r.URL, rec.Code, body)
	}
	if rec.Code != http.StatusNoContent && (!json.Valid(body) || !utf8.Valid(body)) {
		t.Fatalf("%s %s: status %d with a body that is not JSON in UTF-8: %q", r.Method, r.URL, rec.Code, body)
	}
	return rec
}

// FuzzSubmitBody: any body of POST /v1/jobs or POST /v1/jobs/batch is
// answered without a 5xx and with valid JSON; every job it accepts has
// its times within core's range, can be read back with GET, and encodes
// as valid JSON there too.
func FuzzSubmitBody(f *testing.F) {
	for _, s := range []string{
		`{"kind":"y10k","run_at":"9999-12-31T23:59:59-14:00"}`,
		`{"kind":"y10k","deadline":"9999-12-31T23:59:59-14:00"}`,
		`{"kind":"edge","run_at":"9999-12-31T23:59:59.999999Z","deadline":"9999-12-31T23:59:59.999999Z"}`,
		`{"kind":"old","run_at":"0000-01-01T00:00:00+01:00"}`,
		`{"kind":"k","args":{"a":[1,2,{"b":null}]},"queue":"q","priority":3,"max_attempts":2,"tags":["t"],"metadata":{"m":"v"},"unique_key":"u"}`,
		`{"kind":"k","delay_seconds":1e300}`,
		`{"kind":"k","delay_seconds":3153600000}`,
		"{\"kind\":\"k\",\"args\":\"\xff\"}",
		`{"kind":"k","run_at":"2030-01-01T00:00:00Z","delay_seconds":1}`,
		`{"jobs":[{"kind":"a"},{"kind":"y10k","run_at":"9999-12-31T23:59:59-14:00"}]}`,
		`{"jobs":[{"kind":"a","unique_key":"x"},{"kind":"b","unique_key":"x"}]}`,
		`{"jobs":[]}`,
		`{"kind":`,
	} {
		f.Add([]byte(s), bytes.HasPrefix([]byte(s), []byte(`{"jobs"`)))
	}
	srv, st := fuzzServer(f)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, body []byte, batch bool) {
		path := "/v1/jobs"
		if batch {
			path = "/v1/jobs/batch"
		}
		r := httptest.NewRequest("POST", path, bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		rec := serve(t, srv, r)
		if rec.Code != http.StatusOK && rec.Code != http.StatusCreated {
			return
		}
		var results []SubmitResponse
		if batch {
			var out BatchResponse
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
				t.Fatal(err)
			}
			results = out.Results
		} else {
			var out SubmitResponse
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
				t.Fatal(err)
			}
			results = []SubmitResponse{out}
		}
		for _, res := range results {
			j := res.Job
			if j == nil || !core.InTimeRange(j.RunAt) || (!j.Deadline.IsZero() && !core.InTimeRange(j.Deadline)) {
				t.Fatalf("accepted %+v", j)
			}
			g := serve(t, srv, httptest.NewRequest("GET", "/v1/jobs/"+itoa(j.ID), nil))
			if g.Code != http.StatusOK {
				t.Fatalf("GET of accepted job %d: %d %s", j.ID, g.Code, g.Body)
			}
		}
		// Keep the store small: only what the next iteration may collide with.
		for _, res := range results {
			if !res.Duplicate {
				_ = st.Delete(ctx, res.Job.ID)
			}
		}
	})
}

// FuzzListQuery: any query of GET /v1/jobs is a 200 page or a 400
// problem, never a 5xx, always valid JSON; a page holds at most its limit
// and its cursor is its last job.
func FuzzListQuery(f *testing.F) {
	for _, s := range []string{
		"", "limit=1000", "limit=0", "limit=1001", "limit=-1", "limit=1e3", "after=-1", "after=9223372036854775807",
		"after=99999999999999999999", "state=running,discarded", "state=bogus", "state=,,", "queue=a&queue=b",
		"kind=%ff", "order=desc&limit=2", "order=sideways", "queue=q&kind=k&state=scheduled&after=1&limit=3&order=desc",
		"limit=%zz", ";;&&==",
	} {
		f.Add(s)
	}
	srv, st := fuzzServer(f)
	ctx := context.Background()
	now := time.Now()
	big := []byte(`"` + string(bytes.Repeat([]byte("x"), 6<<10)) + `"`)
	var ps []core.InsertParams
	for i, q := range []string{"q", "default", "q", "other", "q"} {
		p := core.InsertParams{Queue: q, Kind: "k", Args: []byte(`{}`), Priority: 5, MaxAttempts: 3, RunAt: now.Add(time.Duration(i-2) * time.Hour)}
		if i%2 == 0 {
			p.Args = big
		}
		ps = append(ps, p)
	}
	// Bytes stored before UTF-8 was checked.
	ps = append(ps, core.InsertParams{Queue: "q", Kind: "k", Args: []byte("\"\xff\""), Priority: 5, MaxAttempts: 3, RunAt: now})
	if _, err := st.Insert(ctx, now, ps); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, query string) {
		r := httptest.NewRequest("GET", "/v1/jobs", nil)
		r.URL.RawQuery = query
		rec := serve(t, srv, r)
		if rec.Code == http.StatusBadRequest {
			return
		}
		if rec.Code != http.StatusOK {
			t.Fatalf("query %q: status %d", query, rec.Code)
		}
		p, err := listParams(r.URL.Query())
		if err != nil {
			t.Fatalf("query %q answered 200 but does not parse: %v", query, err)
		}
		var page ListResponse
		if err := json.Unmarshal(rec.Body.Bytes(), &page); err != nil {
			t.Fatal(err)
		}
		if len(page.Jobs) > p.Limit || (page.NextAfter != nil && (len(page.Jobs) == 0 || *page.NextAfter != page.Jobs[len(page.Jobs)-1].ID)) {
			t.Fatalf("query %q: %d jobs (limit %d), next_after %v", query, len(page.Jobs), p.Limit, page.NextAfter)
		}
	})
}
