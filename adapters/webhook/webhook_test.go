package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
)

var testSecret = []byte("0123456789abcdef-test-secret")

// hostOf returns the host:port of a test server's URL.
func hostOf(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

func newSender(t *testing.T, cfg Config) *Sender {
	t.Helper()
	if cfg.Secret == nil {
		cfg.Secret = testSecret
	}
	s, err := NewSender(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// serve starts a receiver and a handler allowed to reach it.
func serve(t *testing.T, cfg Config, fn http.HandlerFunc) (*Handler, *httptest.Server) {
	t.Helper()
	hs := httptest.NewServer(fn)
	t.Cleanup(hs.Close)
	cfg.AllowHosts = append(cfg.AllowHosts, hostOf(t, hs.URL))
	h, err := newSender(t, cfg).Handler(hs.URL + "/hook")
	if err != nil {
		t.Fatal(err)
	}
	return h, hs
}

func testJob() *core.Job {
	at := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	return &core.Job{
		ID: 42, Queue: "mail", Kind: "email", Args: json.RawMessage(`{"to":"a@example.com"}`),
		Priority: 3, Attempt: 2, MaxAttempts: 5, RunAt: at, CreatedAt: at.Add(-time.Minute),
		Metadata: map[string]string{"tenant": "t1"}, Tags: []string{"smtp"},
	}
}

// verdict is what the engine reads from the handler's error.
func verdict(err error) core.Verdict { return core.Classify(context.Background(), err) }

func TestSignatureVerifies(t *testing.T) {
	type got struct {
		header http.Header
		body   []byte
	}
	ch := make(chan got, 1)
	h, _ := serve(t, Config{}, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		ch <- got{r.Header.Clone(), b}
	})
	job := testJob()
	if err := h.Handle(context.Background(), job); err != nil {
		t.Fatalf("2xx: %v", err)
	}
	g := <-ch
	if err := Verify(testSecret, g.header, g.body, time.Now(), 0); err != nil {
		t.Fatalf("the request does not verify: %v", err)
	}
	if g.header.Get(HeaderSignature) != Sign(testSecret, g.header.Get(HeaderTimestamp), g.body) {
		t.Fatal("signature is not the HMAC of timestamp.body")
	}
	if g.header.Get("Content-Type") != "application/json" || g.header.Get(HeaderJobID) != "42" || g.header.Get(HeaderAttempt) != "2" {
		t.Fatalf("headers %v", g.header)
	}
	var p Payload
	if err := json.Unmarshal(g.body, &p); err != nil {
		t.Fatal(err)
	}
	if p.ID != 42 || p.Kind != "email" || p.Queue != "mail" || string(p.Args) != `{"to":"a@example.com"}` ||
		p.Attempt != 2 || p.MaxAttempts != 5 || p.Metadata["tenant"] != "t1" || !p.RunAt.Equal(job.RunAt) {
		t.Fatalf("payload %+v", p)
	}

	// What a receiver must refuse.
	tampered := append([]byte(nil), g.body...)
	tampered[len(tampered)-2] = ' '
	if err := Verify(testSecret, g.header, tampered, time.Now(), 0); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("tampered body: %v", err)
	}
	if err := Verify([]byte("another-secret-of-16+"), g.header, g.body, time.Now(), 0); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("other secret: %v", err)
	}
	if err := Verify(testSecret, g.header, g.body, time.Now().Add(10*time.Minute), 0); !errors.Is(err, ErrStale) {
		t.Fatalf("replayed after the window: %v", err)
	}
	noSig := g.header.Clone()
	noSig.Del(HeaderSignature)
	if err := Verify(testSecret, noSig, g.body, time.Now(), 0); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("no signature: %v", err)
	}
}

func TestStatusOutcomes(t *testing.T) {
	cases := []struct {
		status     int
		retryAfter string
		want       contract.OutcomeKind
		delay      time.Duration // for snoozes
	}{
		{200, "", contract.OutcomeComplete, 0},
		{204, "", contract.OutcomeComplete, 0},
		{429, "7", contract.OutcomeSnooze, 7 * time.Second},
		{503, "0", contract.OutcomeSnooze, 0},
		{429, "86400", contract.OutcomeSnooze, time.Minute}, // capped by MaxSnooze
		{429, "", contract.OutcomeRetry, 0},
		{503, "soon", contract.OutcomeRetry, 0},
		{500, "", contract.OutcomeRetry, 0},
		{502, "3", contract.OutcomeRetry, 0}, // Retry-After counts on 429 and 503 only
		{408, "", contract.OutcomeRetry, 0},
		{401, "", contract.OutcomeRetry, 0},
		{409, "", contract.OutcomeRetry, 0},
		{400, "", contract.OutcomeDiscard, 0},
		{404, "", contract.OutcomeDiscard, 0},
		{422, "", contract.OutcomeDiscard, 0},
		{304, "", contract.OutcomeRetry, 0},
	}
	for _, tc := range cases {
		t.Run(strconv.Itoa(tc.status)+"/"+tc.retryAfter, func(t *testing.T) {
			h, _ := serve(t, Config{MaxSnooze: time.Minute}, func(w http.ResponseWriter, r *http.Request) {
				if tc.retryAfter != "" {
					w.Header().Set("Retry-After", tc.retryAfter)
				}
				w.WriteHeader(tc.status)
				io.WriteString(w, "receiver says no")
			})
			v := verdict(h.Handle(context.Background(), testJob()))
			if v.Kind != tc.want {
				t.Fatalf("outcome %s (%v), want %s", v.Kind, v.Err, tc.want)
			}
			if tc.want == contract.OutcomeSnooze && v.Delay != tc.delay {
				t.Fatalf("snooze %s, want %s", v.Delay, tc.delay)
			}
			if tc.want == contract.OutcomeRetry || tc.want == contract.OutcomeDiscard {
				var se *StatusError
				if !errors.As(v.Err, &se) || se.StatusCode != tc.status {
					t.Fatalf("error %v, want a *StatusError of %d", v.Err, tc.status)
				}
			}
		})
	}
}

// A Retry-After given as an HTTP date snoozes until then.
func TestRetryAfterDate(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	h, _ := serve(t, Config{Now: func() time.Time { return now }}, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", now.Add(90*time.Second).Format(http.TimeFormat))
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	v := verdict(h.Handle(context.Background(), testJob()))
	if v.Kind != contract.OutcomeSnooze || v.Delay != 90*time.Second {
		t.Fatalf("verdict %+v", v)
	}
}

// A 500 fails the attempt with the response's first bytes as its message,
// and the engine's decision retries it by the job's policy.
func TestServerErrorRetriesWithMessage(t *testing.T) {
	h, _ := serve(t, Config{}, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, "database is down\x00\n")
	})
	job := testJob()
	job.WorkerID, job.ClaimSeq = "w", 1
	v := verdict(h.Handle(context.Background(), job))
	d := core.Decide(job, v, core.DecidePolicy{Retry: core.DelayList{time.Minute}})
	if d.Event != core.EventJobRetried || d.Outcome.Kind != contract.OutcomeRetry {
		t.Fatalf("decision %+v", d)
	}
	msg := d.Outcome.Error.Error
	if !strings.Contains(msg, "500 Internal Server Error: database is down") || strings.ContainsRune(msg, 0) {
		t.Fatalf("error entry %q", msg)
	}
	if !strings.Contains(msg, h.URL()) {
		t.Fatalf("error entry %q does not name the URL", msg)
	}
	// The last attempt is discarded (exhausted) by the same decision.
	job.Attempt = job.MaxAttempts
	if d := core.Decide(job, v, core.DecidePolicy{}); d.Reason != core.ReasonExhausted {
		t.Fatalf("last attempt: %+v", d)
	}
}

// Only MaxResponseBytes of a body are read, however much the receiver
// sends.
func TestOversizedBodyCapped(t *testing.T) {
	const limit = 1024
	h, _ := serve(t, Config{MaxResponseBytes: limit}, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
		chunk := []byte(strings.Repeat("x", 64<<10))
		for range 160 { // 10 MiB, unless the client stops reading
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	start := time.Now()
	err := h.Handle(context.Background(), testJob())
	var se *StatusError
	if !errors.As(err, &se) {
		t.Fatalf("error %v", err)
	}
	if len(se.Body) != limit || !se.Truncated || !strings.HasSuffix(err.Error(), "…") {
		t.Fatalf("body of %d bytes (truncated %v), want %d", len(se.Body), se.Truncated, limit)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %s", d)
	}
}

// A URL whose host is not on the allow-list is refused when the handler
// is made, before anything is sent.
func TestNotAllowedHostRefused(t *testing.T) {
	var hits atomic.Int64
	hs := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer hs.Close()
	s := newSender(t, Config{AllowHosts: []string{"hooks.example.com", "10.0.0.0/8", "127.0.0.1:1"}})
	for _, target := range []string{hs.URL, "http://localhost/x", "https://evil.example.com/", "http://hooks.example.com.evil.net/"} {
		if _, err := s.Handler(target); !errors.Is(err, ErrNotAllowed) {
			t.Errorf("%s: %v, want ErrNotAllowed", target, err)
		}
	}
	for _, target := range []string{"ftp://hooks.example.com/", "/relative", "hooks.example.com/x"} {
		if _, err := s.Handler(target); err == nil {
			t.Errorf("%s: accepted", target)
		}
	}
	for _, target := range []string{"https://hooks.example.com/x", "http://HOOKS.example.com.:8080/", "http://10.1.2.3:9000/"} {
		if _, err := s.Handler(target); err != nil {
			t.Errorf("%s: %v", target, err)
		}
	}
	if hits.Load() != 0 {
		t.Fatal("a refused URL was requested")
	}
}

// An allowed name that resolves to an address that is not allowed (here
// localhost → 127.0.0.1) is refused at connection time.
func TestNameResolvingToLoopbackRefused(t *testing.T) {
	var hits atomic.Int64
	hs := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer hs.Close()
	port := hostOf(t, hs.URL)
	port = port[strings.LastIndexByte(port, ':')+1:]
	s := newSender(t, Config{AllowHosts: []string{"localhost:" + port, "192.0.2.10"}})
	h, err := s.Handler("http://localhost:" + port + "/hook")
	if err != nil {
		t.Fatal(err)
	}
	err = h.Handle(context.Background(), testJob())
	if !errors.Is(err, ErrNotAllowed) {
		t.Fatalf("error %v, want ErrNotAllowed", err)
	}
	if v := verdict(err); v.Kind != contract.OutcomeRetry {
		t.Fatalf("verdict %s", v.Kind)
	}
	if hits.Load() != 0 {
		t.Fatal("the receiver was reached")
	}
	// Allowing the address itself lets it through.
	s = newSender(t, Config{AllowHosts: []string{"localhost:" + port, "127.0.0.1", "::1"}})
	if h, err = s.Handler("http://localhost:" + port + "/hook"); err != nil {
		t.Fatal(err)
	}
	if err := h.Handle(context.Background(), testJob()); err != nil {
		t.Fatal(err)
	}
}

// A redirect is followed to an allowed host only.
func TestRedirects(t *testing.T) {
	var bodies atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if Verify(testSecret, r.Header, b, time.Now(), 0) == nil {
			bodies.Add(1)
		}
	}))
	defer target.Close()
	front := httptest.NewServer(http.RedirectHandler(target.URL+"/moved", http.StatusTemporaryRedirect))
	defer front.Close()

	only := newSender(t, Config{AllowHosts: []string{hostOf(t, front.URL)}})
	h, err := only.Handler(front.URL)
	if err != nil {
		t.Fatal(err)
	}
	err = h.Handle(context.Background(), testJob())
	if !errors.Is(err, ErrNotAllowed) || !strings.Contains(err.Error(), "redirect") {
		t.Fatalf("redirect to a host not allowed: %v", err)
	}
	if bodies.Load() != 0 {
		t.Fatal("the redirect was followed")
	}

	both := newSender(t, Config{AllowHosts: []string{hostOf(t, front.URL), hostOf(t, target.URL)}})
	if h, err = both.Handler(front.URL); err != nil {
		t.Fatal(err)
	}
	if err := h.Handle(context.Background(), testJob()); err != nil {
		t.Fatalf("redirect to an allowed host: %v", err)
	}
	if bodies.Load() != 1 {
		t.Fatal("the signed body did not arrive through the redirect")
	}
}

// A receiver that does not answer within the timeout fails the attempt
// (retried by policy).
func TestTimeoutRetries(t *testing.T) {
	release := make(chan struct{})
	h, _ := serve(t, Config{Timeout: 200 * time.Millisecond}, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	start := time.Now()
	err := h.Handle(context.Background(), testJob())
	if v := verdict(err); v.Kind != contract.OutcomeRetry || !strings.Contains(err.Error(), "no complete response within 200ms") {
		t.Fatalf("verdict %s: %v", v.Kind, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %s", d)
	}
	// The attempt's own context (a kind timeout, the job's deadline) ends
	// the request too, and is what the error reports.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	h2, _ := serve(t, Config{Timeout: time.Minute}, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // then the server notices the client leave
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	if err := h2.Handle(ctx, testJob()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("context deadline: %v", err)
	}
}

// The job's trace context goes out as W3C headers; InjectTrace replaces
// that.
func TestTraceHeaders(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ch := make(chan http.Header, 2)
	recv := func(w http.ResponseWriter, r *http.Request) { ch <- r.Header.Clone() }
	job := testJob()
	job.Metadata = map[string]string{"traceparent": tp, "tracestate": "k=v"}
	h, _ := serve(t, Config{}, recv)
	if err := h.Handle(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	if got := <-ch; got.Get("traceparent") != tp || got.Get("tracestate") != "k=v" {
		t.Fatalf("trace headers %v", got)
	}
	h, _ = serve(t, Config{InjectTrace: func(ctx context.Context, hd http.Header, j *core.Job) { hd.Set("traceparent", "from-ctx") }}, recv)
	if err := h.Handle(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	if got := <-ch; got.Get("traceparent") != "from-ctx" {
		t.Fatalf("injected %v", got)
	}
}

func TestConfigErrors(t *testing.T) {
	bad := []Config{
		{Secret: []byte("short"), AllowHosts: []string{"a.example"}},
		{Secret: testSecret, AllowHosts: []string{""}},
		{Secret: testSecret, AllowHosts: []string{"a.example:99999"}},
		{Secret: testSecret, AllowHosts: []string{"10.0.0.0/99"}},
		{Secret: testSecret, AllowHosts: []string{"http://a.example"}},
		{Secret: testSecret, Timeout: -1},
	}
	for _, cfg := range bad {
		if _, err := NewSender(cfg); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
}

func TestIsPublic(t *testing.T) {
	for s, want := range map[string]bool{
		"93.184.216.34": true, "2606:2800:220:1::1": true,
		"127.0.0.1": false, "10.1.2.3": false, "172.16.0.1": false, "192.168.1.1": false,
		"169.254.169.254": false, "100.64.0.1": false, "0.0.0.0": false, "::1": false,
		"fe80::1": false, "fd00::1": false, "::ffff:127.0.0.1": false, "64:ff9b::7f00:1": false,
	} {
		ip, err := netip.ParseAddr(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := isPublic(ip); got != want {
			t.Errorf("isPublic(%s) = %v, want %v", s, got, want)
		}
	}
}

// The signature is the plain HMAC-SHA256 of "timestamp.body" any language
// computes (this value comes from Python's hmac module).
func TestSignKnownAnswer(t *testing.T) {
	got := Sign([]byte("webhook-secret-for-tests-0123456789"), "1764000000", []byte(`{"id":42,"kind":"email"}`))
	if want := "a6ff1361aa918517019cd6f198dac6dfec91a5d0e8331d7a0ff3dde825473fbf"; got != want {
		t.Fatalf("Sign = %s, want %s", got, want)
	}
}

// BenchmarkHandle sends jobs to a loopback receiver that answers 204:
// the cost of one request (sign, send, read the answer) on a kept-alive
// connection.
func BenchmarkHandle(b *testing.B) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer hs.Close()
	s, err := NewSender(Config{Secret: testSecret, AllowHosts: []string{strings.TrimPrefix(hs.URL, "http://")}})
	if err != nil {
		b.Fatal(err)
	}
	h, err := s.Handler(hs.URL)
	if err != nil {
		b.Fatal(err)
	}
	job := testJob()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := h.Handle(ctx, job); err != nil {
			b.Fatal(err)
		}
	}
}
