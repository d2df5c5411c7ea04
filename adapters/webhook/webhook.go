// Package webhook runs jobs by POSTing them to HTTP endpoints. A Sender
// holds what every request shares (the signing secret, the allow-list of
// destinations, the HTTP client); Sender.Handler returns the handler of
// one URL, whose Handle method is a core.HandlerFunc:
//
//	s, err := webhook.NewSender(webhook.Config{Secret: secret, AllowHosts: []string{"hooks.example.com"}})
//	h, err := s.Handler("https://hooks.example.com/email")
//	handlers.HandleRaw("email", h.Handle)
//
// Each request carries the job as JSON (Payload), signed (Sign,
// HeaderSignature, HeaderTimestamp) and with the attempt's trace context.
// The response's status becomes the handler's error, which the engine
// turns into the job's outcome as for any handler (core.Classify,
// core.Decide): see Handler.Handle. The backlog CLI runs it for
// --handler KIND=https://…; docs/webhooks.md describes the contract and
// docs/security.md the allow-list and how a receiver verifies requests.
package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
)

// Defaults of Config.
const (
	DefaultTimeout          = 30 * time.Second
	DefaultMaxResponseBytes = 64 << 10
	DefaultMaxSnooze        = time.Hour
	DefaultUserAgent        = "backlog-webhook/1"
)

// maxRedirects is how many redirects (each to an allowed host) a request
// follows.
const maxRedirects = 3

// Config configures a Sender.
type Config struct {
	// Secret keys the signature of every request (Sign); at least
	// MinSecretLen bytes. Required.
	Secret []byte
	// AllowHosts are the destinations requests may reach: a host name
	// ("hooks.example.com"), an IP address ("10.1.2.3", "::1"), either
	// with a port ("hooks.example.com:8443", "[::1]:8080"; without one,
	// any port), or an IP prefix ("10.0.0.0/8"). A handler's URL, every
	// redirect and every dialed address (after DNS) are checked against
	// it; a host name resolving to an internal address (loopback,
	// private, link-local…) is refused unless that address is allowed
	// too. Required: an empty list allows nothing.
	AllowHosts []string
	// Timeout bounds one request, from dialing to the end of the
	// response body; 0 means DefaultTimeout (30 s). The attempt's context
	// (the kind's timeout, the job's deadline, a cancellation) bounds it
	// too.
	Timeout time.Duration
	// MaxResponseBytes is how much of a response body is read, at most;
	// the rest is not read and the connection is closed. 0 means
	// DefaultMaxResponseBytes (64 KiB).
	MaxResponseBytes int
	// MaxSnooze caps the Retry-After of a 429 or 503 response; 0 means
	// DefaultMaxSnooze (1 h).
	MaxSnooze time.Duration
	// InjectTrace writes the trace context of the attempt's ctx into a
	// request's headers (W3C traceparent and tracestate), such as
	// core.Client.Tracing().Inject with a propagation.HeaderCarrier: the
	// receiver's spans are then children of the attempt's process span.
	// When it is nil or sets no traceparent, the job's own trace context
	// is forwarded: the metadata keys traceparent and tracestate the
	// engine stores at enqueue when tracing is on.
	InjectTrace func(ctx context.Context, h http.Header, job *core.Job)
	// UserAgent is the requests' User-Agent; "" means DefaultUserAgent.
	UserAgent string
	// Now is the clock of HeaderTimestamp; nil means time.Now.
	Now func() time.Time
}

// Sender sends jobs to webhook URLs. It is safe for concurrent use; its
// connections are pooled across its handlers.
type Sender struct {
	cfg    Config
	allow  *allowList
	client *http.Client
}

// NewSender checks cfg and returns its Sender. It returns an error when
// the secret is shorter than MinSecretLen, an allowed host cannot be
// read, or a limit is negative.
func NewSender(cfg Config) (*Sender, error) {
	if len(cfg.Secret) < MinSecretLen {
		return nil, fmt.Errorf("webhook: the secret is %d bytes; it must have at least %d", len(cfg.Secret), MinSecretLen)
	}
	if cfg.Timeout < 0 || cfg.MaxResponseBytes < 0 || cfg.MaxSnooze < 0 {
		return nil, errors.New("webhook: timeout, max response bytes and max snooze must not be negative")
	}
	allow, err := parseAllowList(cfg.AllowHosts)
	if err != nil {
		return nil, err
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxResponseBytes == 0 {
		cfg.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if cfg.MaxSnooze == 0 {
		cfg.MaxSnooze = DefaultMaxSnooze
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = DefaultUserAgent
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.Secret = append([]byte(nil), cfg.Secret...)
	s := &Sender{cfg: cfg, allow: allow}
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: allow.control}
	s.client = &http.Client{
		Transport: &http.Transport{
			// No proxy: the allow-list applies to the address dialed,
			// which must be the destination's.
			Proxy:                 nil,
			DialContext:           dialer.DialContext,
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          100,
			MaxIdleConnsPerHost:   16,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   10 * time.Second,
			ExpectContinueTimeout: time.Second,
		},
		CheckRedirect: s.checkRedirect,
	}
	return s, nil
}

// checkRedirect follows at most maxRedirects redirects, each to an
// allowed host.
func (s *Sender) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > maxRedirects {
		return fmt.Errorf("webhook: stopped after %d redirects", maxRedirects)
	}
	if err := s.allow.checkURL(req.URL); err != nil {
		return fmt.Errorf("redirect refused: %w", err)
	}
	return nil
}

// Handler returns the handler that POSTs jobs to target, an http or
// https URL. It returns an error wrapping ErrNotAllowed when target's
// host and port are not on the allow-list, and another error when target
// is not an absolute http(s) URL.
func (s *Sender) Handler(target string) (*Handler, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("webhook: URL %q: %v", target, err)
	}
	if !u.IsAbs() || u.Opaque != "" {
		return nil, fmt.Errorf("webhook: URL %q must be absolute: http://host/path or https://host/path", target)
	}
	if err := s.allow.checkURL(u); err != nil {
		return nil, err
	}
	u.Fragment, u.RawFragment = "", ""
	return &Handler{s: s, target: u.String(), shown: u.Redacted()}, nil
}

// Handler POSTs the jobs of one URL. Its Handle method is a
// core.HandlerFunc.
type Handler struct {
	s      *Sender
	target string
	shown  string // the URL without its password, for error messages
}

// URL returns the handler's URL with its password, if any, redacted.
func (h *Handler) URL() string { return h.shown }

// Payload is the body of a webhook request: the job as the handler got it.
// Args is the job's JSON args as enqueued (opened, when encrypted at
// rest); times are RFC 3339 in UTC; Attempt counts from 1.
type Payload struct {
	ID           int64             `json:"id"`
	Kind         string            `json:"kind"`
	Queue        string            `json:"queue"`
	Args         json.RawMessage   `json:"args"`
	Attempt      int               `json:"attempt"`
	MaxAttempts  int               `json:"max_attempts"`
	Priority     int               `json:"priority"`
	Metadata     map[string]string `json:"metadata,omitempty"`
	Tags         []string          `json:"tags,omitempty"`
	UniqueKey    string            `json:"unique_key,omitempty"`
	PartitionKey string            `json:"partition_key,omitempty"`
	CreatedAt    time.Time         `json:"created_at"`
	RunAt        time.Time         `json:"run_at"`
	Deadline     time.Time         `json:"deadline,omitzero"`
}

// NewPayload returns job's payload.
func NewPayload(job *core.Job) Payload {
	args := job.Args
	if len(args) == 0 || !json.Valid(args) {
		args, _ = json.Marshal(string(job.Args))
		if len(job.Args) == 0 {
			args = json.RawMessage(`{}`)
		}
	}
	return Payload{
		ID: job.ID, Kind: job.Kind, Queue: job.Queue, Args: args, Attempt: job.Attempt,
		MaxAttempts: job.MaxAttempts, Priority: job.Priority, Metadata: job.Metadata, Tags: job.Tags,
		UniqueKey: job.UniqueKey, PartitionKey: job.PartitionKey,
		CreatedAt: contract.UTC(job.CreatedAt), RunAt: contract.UTC(job.RunAt), Deadline: contract.UTC(job.Deadline),
	}
}

// StatusError is a response whose status did not complete the job. Its
// message holds the status and the first bytes of the body (at most
// Config.MaxResponseBytes, made valid UTF-8 without control characters);
// the engine keeps the head of it in the attempt's error entry.
type StatusError struct {
	URL        string // redacted
	StatusCode int
	Body       string
	Truncated  bool // the body was longer than what was read
}

func (e *StatusError) Error() string {
	msg := fmt.Sprintf("webhook %s answered %d %s", e.URL, e.StatusCode, http.StatusText(e.StatusCode))
	if e.Body != "" {
		msg += ": " + e.Body
		if e.Truncated {
			msg += "…"
		}
	}
	return msg
}

// Handle POSTs job to the handler's URL and returns what its response
// asks for, which the engine turns into the job's outcome like any
// handler's error (core.Classify, then core.Decide with the kind's retry
// policy):
//
//	2xx                                   nil: completed
//	429 or 503 with a valid Retry-After   core.Snooze for that long, at most Config.MaxSnooze (no attempt used)
//	400–499 but 401, 403, 407, 408, 409,  core.Permanent(*StatusError): discarded at once (dead letter);
//	  423, 425 and 429                      the request itself is refused, repeating it cannot help
//	any other status                      *StatusError: a failed attempt, retried by the job's policy
//	no response (refused destination,     an error: a failed attempt, retried by the job's policy
//	  connection error, timeout)
//
// The split of 4xx follows Amazon EventBridge's API destinations, which
// retry 401, 407, 409 and 429 and drop other client errors; 403 (a
// receiver refusing a signature during a rotation of the secret), 408,
// 423 and 425 are retried here too. A redirect is followed (at most 3)
// only to an allowed host.
func (h *Handler) Handle(ctx context.Context, job *core.Job) error {
	body, err := json.Marshal(NewPayload(job))
	if err != nil {
		return fmt.Errorf("webhook: encode job %d: %w", job.ID, err)
	}
	s := h.s
	rctx, cancel := context.WithTimeoutCause(ctx, s.cfg.Timeout, errTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, h.target, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("webhook %s: %w", h.shown, err)
	}
	ts := strconv.FormatInt(s.cfg.Now().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", s.cfg.UserAgent)
	req.Header.Set(HeaderTimestamp, ts)
	req.Header.Set(HeaderSignature, Sign(s.cfg.Secret, ts, body))
	req.Header.Set(HeaderJobID, strconv.FormatInt(job.ID, 10))
	req.Header.Set(HeaderAttempt, strconv.Itoa(job.Attempt))
	if s.cfg.InjectTrace != nil {
		s.cfg.InjectTrace(ctx, req.Header, job)
	}
	if req.Header.Get(traceParent) == "" {
		forwardTrace(req.Header, job)
	}

	resp, err := s.client.Do(req)
	if err != nil {
		if ctx.Err() == nil && errors.Is(context.Cause(rctx), errTimeout) {
			return fmt.Errorf("webhook %s: no complete response within %s", h.shown, s.cfg.Timeout)
		}
		return fmt.Errorf("webhook %s: %w", h.shown, unwrapURLError(err))
	}
	defer resp.Body.Close()
	head, truncated, readErr := readHead(resp.Body, s.cfg.MaxResponseBytes)
	if code := resp.StatusCode; code >= 200 && code <= 299 {
		return nil
	}
	if readErr != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return h.failure(resp, head, truncated)
}

// errTimeout is the cause of a request's own timeout (Config.Timeout).
var errTimeout = errors.New("webhook: request timed out")

// failure maps a non-2xx response to the handler's error.
func (h *Handler) failure(resp *http.Response, head []byte, truncated bool) error {
	code := resp.StatusCode
	se := &StatusError{URL: h.shown, StatusCode: code, Body: cleanText(head), Truncated: truncated}
	if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
		if d, ok := retryAfter(resp.Header.Get("Retry-After"), h.s.cfg.Now()); ok {
			return core.Snooze(min(d, h.s.cfg.MaxSnooze))
		}
		return se
	}
	if code >= 400 && code <= 499 && !retried4xx[code] {
		return core.Permanent(se)
	}
	return se
}

// retried4xx are the client errors that fail the attempt (retried by the
// job's policy) instead of discarding the job.
var retried4xx = map[int]bool{
	http.StatusUnauthorized:      true,
	http.StatusForbidden:         true,
	http.StatusProxyAuthRequired: true,
	http.StatusRequestTimeout:    true,
	http.StatusConflict:          true,
	http.StatusLocked:            true,
	http.StatusTooEarly:          true,
	http.StatusTooManyRequests:   true,
}

// retryAfter reads a Retry-After header: delay-seconds or an HTTP-date
// (RFC 9110 §10.2.3). A date in the past is 0.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0, false
		}
		if n > int64(24*365*time.Hour/time.Second) {
			n = int64(24 * 365 * time.Hour / time.Second)
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}

// readHead reads at most limit bytes of r, reporting whether more
// followed.
func readHead(r io.Reader, limit int) ([]byte, bool, error) {
	b, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if len(b) > limit {
		return b[:limit], true, err
	}
	return b, false, err
}

// cleanText makes b printable text for an error message: valid UTF-8,
// with control characters other than newline and tab as spaces, and the
// surrounding space trimmed.
func cleanText(b []byte) string {
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' || !unicode.IsControl(r) {
			return r
		}
		return ' '
	}, s)
	return strings.TrimSpace(s)
}

// The W3C Trace Context keys, in job metadata and in HTTP headers.
const (
	traceParent = "traceparent"
	traceState  = "tracestate"
)

// forwardTrace copies the trace context the engine stored in the job's
// metadata at enqueue (W3C Trace Context) into the request's headers.
func forwardTrace(h http.Header, job *core.Job) {
	if v := job.Metadata[traceParent]; v != "" {
		h.Set(traceParent, v)
		if st := job.Metadata[traceState]; st != "" {
			h.Set(traceState, st)
		}
	}
}

// unwrapURLError drops the *url.Error layer (its message repeats the
// method and the URL, with any password in it).
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
