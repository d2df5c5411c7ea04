package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// spec is openapi.json loaded for validation: the document, a router
// matching requests to its operations, and the Problem schema that answers
// requests to paths the document does not describe.
type spec struct {
	doc     *openapi3.T
	router  routers.Router
	problem *openapi3.Schema
}

// loadSpec parses and validates openapi.json once per test binary.
var loadSpec = sync.OnceValues(func() (*spec, error) {
	ctx := context.Background()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(openapiDoc)
	if err != nil {
		return nil, fmt.Errorf("load openapi.json: %w", err)
	}
	if err := doc.Validate(ctx); err != nil {
		return nil, fmt.Errorf("openapi.json is not a valid OpenAPI document: %w", err)
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("route openapi.json: %w", err)
	}
	ref := doc.Components.Schemas["Problem"]
	if ref == nil || ref.Value == nil {
		return nil, errors.New("openapi.json has no components.schemas.Problem")
	}
	return &spec{doc: doc, router: router, problem: ref.Value}, nil
})

// TestOpenAPIDocumentLoads proves openapi.json is a valid OpenAPI 3.1
// document that the validator of every other test can route.
func TestOpenAPIDocumentLoads(t *testing.T) {
	if _, err := loadSpec(); err != nil {
		t.Fatal(err)
	}
}

// validated wraps next so that every request and its response are checked
// against openapi.json; a mismatch fails t with the method, path, status and
// the schema error. Requests the document rejects (a malformed body, a
// missing parameter) must be refused by the server with a 4xx status; the
// response is checked in every case, problems included. A request to a path
// or method the document does not describe must be answered 404 not-found
// or 405 method-not-allowed with a Problem body: a route the server serves
// without documenting it fails the test.
func validated(t testing.TB, next http.Handler) http.Handler {
	s, err := loadSpec()
	if err != nil {
		t.Fatal(err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := &recordingBody{rc: r.Body}
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = body
		}
		rec := &recordingWriter{ResponseWriter: w, status: http.StatusOK}
		// The request as it arrived: the server may rewrite r's context or
		// header, never its method, URL or query.
		orig := r.Clone(context.WithoutCancel(r.Context()))
		next.ServeHTTP(rec, r)
		if !rec.wroteHeader && r.Context().Err() != nil {
			return // the client left before an answer: there is none to check
		}
		if msg := s.check(orig, body, rec); msg != "" {
			t.Errorf("openapi: %s %s -> %d: %s", orig.Method, orig.URL.RequestURI(), rec.status, msg)
		}
	})
}

// check returns why the exchange does not match the document, or "".
func (s *spec) check(r *http.Request, body *recordingBody, rec *recordingWriter) string {
	ctx := context.Background()
	status := rec.status
	route, params, err := s.router.FindRoute(r)
	if err != nil {
		// Not in the document: only the server's own 404/405 answers are
		// acceptable, and they are problems.
		if status != http.StatusNotFound && status != http.StatusMethodNotAllowed {
			return fmt.Sprintf("route not described by openapi.json (%v) but the server answered it", err)
		}
		return s.checkProblemBody(rec)
	}
	// The server decides authentication from its configuration (an open
	// server takes no token); the document only names the scheme.
	opts := &openapi3filter.Options{
		AuthenticationFunc:    openapi3filter.NoopAuthenticationFunc,
		IncludeResponseStatus: true,
		MultiError:            true,
	}
	opts.WithCustomSchemaErrorFunc(schemaError)
	in := &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route, Options: opts}
	if body.complete() {
		r.Body = io.NopCloser(bytes.NewReader(body.buf.Bytes()))
	} else {
		// The server refused the request before reading its body (401,
		// 413, a body deadline): there is nothing to check it against.
		opts.ExcludeRequestBody = true
		r.Body = http.NoBody
		if status < 400 {
			return "the server answered without reading the whole request body"
		}
	}
	if reqErr := openapi3filter.ValidateRequest(ctx, in); reqErr != nil {
		switch {
		case status < 400:
			return fmt.Sprintf("the server accepted a request openapi.json rejects: %v", reqErr)
		case status >= 500:
			return fmt.Sprintf("the server failed on a request openapi.json rejects, instead of refusing it with a 4xx: %v", reqErr)
		}
	}
	if rec.overflow {
		opts.ExcludeResponseBody = true
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 status,
		Header:                 rec.Header(),
		Body:                   io.NopCloser(bytes.NewReader(rec.buf.Bytes())),
		Options:                opts,
	}
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		return fmt.Sprintf("response does not match openapi.json: %v (body %s)", err, truncate(rec.buf.Bytes()))
	}
	return ""
}

// checkProblemBody checks a response of a route outside the document
// against the Problem schema.
func (s *spec) checkProblemBody(rec *recordingWriter) string {
	if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
		return fmt.Sprintf("content type %q, want application/problem+json", ct)
	}
	var v any
	if err := json.Unmarshal(rec.buf.Bytes(), &v); err != nil {
		return fmt.Sprintf("problem body %s: %v", truncate(rec.buf.Bytes()), err)
	}
	if err := s.problem.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
		return fmt.Sprintf("problem body does not match the Problem schema: %v (body %s)", err, truncate(rec.buf.Bytes()))
	}
	return ""
}

// schemaError is a schema error in one line: where in the value, and why
// (the JSON Schema 2020-12 validator's own message when it has one).
func schemaError(err *openapi3.SchemaError) string {
	if err.Origin != nil {
		return ""
	}
	return fmt.Sprintf("at /%s: %s", strings.Join(err.JSONPointer(), "/"), err.Reason)
}

func truncate(b []byte) string {
	const n = 512
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

// recordingBody keeps what the server reads of a request body and whether
// it read it to the end.
type recordingBody struct {
	rc  io.ReadCloser
	mu  sync.Mutex
	buf bytes.Buffer
	eof bool
}

func (b *recordingBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.mu.Lock()
	b.buf.Write(p[:n])
	if errors.Is(err, io.EOF) {
		b.eof = true
	}
	b.mu.Unlock()
	return n, err
}

func (b *recordingBody) Close() error { return b.rc.Close() }

// complete reports whether the body was read to its end (or there was
// none).
func (b *recordingBody) complete() bool {
	if b.rc == nil || b.rc == http.NoBody {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.eof
}

// recordingWriter passes a response through while keeping its status and
// body.
type recordingWriter struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
	buf         bytes.Buffer
	overflow    bool // the body passed maxCheckedBody and was not kept
}

// maxCheckedBody is the largest response body checked against its schema:
// larger ones (list pages of megabyte jobs in the memory ceiling test) are
// checked for status and headers only, so that the check does not hold
// them on the heap.
const maxCheckedBody = 1 << 20

func (w *recordingWriter) WriteHeader(code int) {
	if !w.wroteHeader {
		w.status = code
		w.wroteHeader = true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *recordingWriter) Write(p []byte) (int, error) {
	w.wroteHeader = true
	if !w.overflow {
		if w.buf.Len()+len(p) > maxCheckedBody {
			w.overflow = true
			w.buf = bytes.Buffer{}
		} else {
			w.buf.Write(p)
		}
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap gives http.ResponseController the underlying writer (read
// deadlines, flushing).
func (w *recordingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// validatedServer starts a loopback server over h whose every exchange is
// checked against openapi.json.
func validatedServer(t testing.TB, h http.Handler) *httptest.Server {
	return httptest.NewServer(validated(t, h))
}

// failures records what validated reports instead of failing the test.
type failures struct {
	testing.TB
	mu   sync.Mutex
	msgs []string
}

func (f *failures) Errorf(format string, args ...any) {
	f.mu.Lock()
	f.msgs = append(f.msgs, fmt.Sprintf(format, args...))
	f.mu.Unlock()
}

func (f *failures) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.msgs
	f.msgs = nil
	return out
}

// The validator itself: each exchange that breaks the document is reported
// with its method, path, status and why; conforming ones are not.
func TestOpenAPIValidatorReports(t *testing.T) {
	problem := func(w http.ResponseWriter, status int, slug string) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"type":%q,"title":"t","status":%d}`, ProblemTypeBase+slug, status)
	}
	cases := []struct {
		name         string
		method, path string
		body         string
		serve        http.HandlerFunc
		want         string // in the report; "" means no report
	}{
		{"conforming", "GET", "/healthz", "", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"status":"ok"}`)
		}, ""},
		{"undocumented route", "GET", "/v1/nowhere", "", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{}`)
		}, "GET /v1/nowhere -> 200: route not described by openapi.json"},
		{"unknown route answered not-found", "GET", "/v1/nowhere", "", func(w http.ResponseWriter, r *http.Request) {
			problem(w, http.StatusNotFound, SlugNotFound)
		}, ""},
		{"undocumented status", "GET", "/healthz", "", func(w http.ResponseWriter, r *http.Request) {
			problem(w, http.StatusTeapot, SlugInternal)
		}, "GET /healthz -> 418: response does not match openapi.json"},
		{"body breaks its schema", "GET", "/v1/jobs/1", "", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"job":{"id":"one"}}`)
		}, "GET /v1/jobs/1 -> 200: response does not match openapi.json"},
		{"problem of an unknown type", "GET", "/v1/jobs/1", "", func(w http.ResponseWriter, r *http.Request) {
			problem(w, http.StatusNotFound, "no-such-problem")
		}, "GET /v1/jobs/1 -> 404: response does not match openapi.json"},
		{"invalid request accepted", "POST", "/v1/jobs", `{"kind":7}`, func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, `{"job":{"id":1,"queue":"default","kind":"k","args":{},"priority":5,"state":"available","attempt":0,"max_attempts":20,"run_at":"2026-01-01T00:00:00Z","created_at":"2026-01-01T00:00:00Z"},"duplicate":false}`)
		}, "POST /v1/jobs -> 201: the server accepted a request openapi.json rejects"},
		{"invalid request failed on", "POST", "/v1/jobs", `{"kind":7}`, func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			problem(w, http.StatusInternalServerError, SlugInternal)
		}, "POST /v1/jobs -> 500: the server failed on a request openapi.json rejects"},
		{"invalid request refused", "POST", "/v1/jobs", `{"kind":7}`, func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			problem(w, http.StatusBadRequest, SlugInvalidRequest)
		}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &failures{TB: t}
			hs := httptest.NewServer(validated(f, tc.serve))
			defer hs.Close()
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			r, err := http.NewRequest(tc.method, hs.URL+tc.path, body)
			if err != nil {
				t.Fatal(err)
			}
			if tc.body != "" {
				r.Header.Set("Content-Type", "application/json")
			}
			resp, err := hs.Client().Do(r)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			hs.Close() // the handler has returned
			got := f.take()
			for _, m := range got {
				t.Log(m)
			}
			switch {
			case tc.want == "" && len(got) > 0:
				t.Fatalf("reported a conforming exchange: %q", got)
			case tc.want != "" && (len(got) != 1 || !strings.Contains(got[0], tc.want)):
				t.Fatalf("report %q, want one containing %q", got, tc.want)
			}
		})
	}
}

// Every problem the server can answer with is one of the Problem schema's
// types.
func TestOpenAPIProblemTypes(t *testing.T) {
	s, err := loadSpec()
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, v := range s.problem.Properties["type"].Value.Enum {
		known[fmt.Sprint(v)] = true
	}
	for slug := range problems {
		if !known[ProblemTypeBase+slug] {
			t.Errorf("problem %s is missing from the type enum of components.schemas.Problem", slug)
		}
	}
}
