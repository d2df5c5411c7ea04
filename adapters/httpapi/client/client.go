// Package client is the Go client of backlog's HTTP API (v1): producers
// submit and inspect jobs, administrators cancel, retry and pause, and
// remote workers register, claim jobs with long polls and report outcomes
// under lease tokens. Worker (NewWorker) is a complete remote worker built
// on it: heartbeats that name every job it holds, bounded concurrency,
// batched outcome delivery that survives a flaky network, handlers stopped
// before a lease it cannot renew runs out, and graceful shutdown. It needs
// a server that takes heartbeats naming their leases; it treats lease
// tokens as opaque, so it works with signed (v3) tokens as with the v2
// tokens of older servers.
//
// Errors of the API arrive as *Problem, which errors.Is maps to the core
// sentinels (core.ErrNotFound, core.ErrLeaseLost, core.ErrInvalidJob,
// core.ErrInvalidState) and to this package's (ErrUnauthorized,
// ErrWorkerNotRegistered, ErrUnavailable, …). Requests that got no response
// fail with a *TransportError (errors.Is ErrUnavailable too).
//
// Retries: a call the server cannot have applied (the connection was
// refused, or the server answered 503 unavailable or 429 too many
// requests, which promise nothing was done) is retried for every method, with jittered exponential
// backoff. Other transient failures (a reset connection, a timeout, a
// proxy's 502/504) are retried only for calls that are safe to repeat:
// reads, registration, heartbeats, deregistration, pause and resume (of
// queues and periodic jobs),
// submissions whose every job has a unique key, and outcomes, single or
// batched (an outcome replayed after the server applied it yields
// lease-lost, which the client then reports as success of unknown result,
// and logs).
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/store"
)

// Defaults of a Client.
const (
	// DefaultTimeout bounds one HTTP request (a long-poll claim gets its
	// wait on top).
	DefaultTimeout = 30 * time.Second
	// DefaultUserAgent is sent unless WithUserAgent says otherwise.
	DefaultUserAgent = "backlog-client/1"
	// CorrelationHeader carries a request's correlation id both ways.
	CorrelationHeader = "X-Correlation-Id"
)

// RetryPolicy says how a Client repeats a failed call that is safe to
// repeat (see the package doc). The wait before retry n (1-based) is
// BaseDelay·2^(n−1), capped at MaxDelay, spread by ±25 %; a Retry-After
// header of a 503 or 429 lengthens it.
type RetryPolicy struct {
	// MaxAttempts is the number of tries in all, including the first.
	// 1 disables retries; 0 means 4.
	MaxAttempts int
	// BaseDelay is the first wait; 0 means 100 ms.
	BaseDelay time.Duration
	// MaxDelay caps a wait; 0 means 2 s.
	MaxDelay time.Duration
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = 4
	}
	if p.BaseDelay <= 0 {
		p.BaseDelay = 100 * time.Millisecond
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = 2 * time.Second
	}
	return p
}

// backoff returns the jittered wait before retry n (1-based) of base
// doubling up to maxD.
func backoff(n int, base, maxD time.Duration) time.Duration {
	d := base
	for i := 1; i < n && d < maxD; i++ {
		d *= 2
	}
	d = min(d, maxD)
	return time.Duration(float64(d) * (0.75 + rand.Float64()/2))
}

// Client calls one backlog server. It is safe for concurrent use.
type Client struct {
	base          string // scheme://host[/prefix], without trailing slash
	token         string
	hc            *http.Client
	userAgent     string
	correlationID string
	timeout       time.Duration
	retry         RetryPolicy
	log           *slog.Logger
}

// Option configures a Client.
type Option func(*Client)

// WithToken sends "Authorization: Bearer <token>" with every request.
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithHTTPClient uses hc for every request (its Transport, TLS settings,
// proxies). A Timeout of hc shorter than a long-poll claim's wait is
// lengthened for that claim.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc != nil {
			c.hc = hc
		}
	}
}

// WithCorrelationID sends id as X-Correlation-Id with every request (1..128
// printable ASCII characters; the server generates one otherwise). A
// per-call id from WithCallCorrelationID takes precedence.
func WithCorrelationID(id string) Option { return func(c *Client) { c.correlationID = id } }

// WithUserAgent sets the User-Agent header.
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// WithTimeout bounds each HTTP request (a long-poll claim gets its wait on
// top); 0 or less means DefaultTimeout. The call's context may end it
// sooner.
func WithTimeout(d time.Duration) Option {
	return func(c *Client) {
		if d > 0 {
			c.timeout = d
		}
	}
}

// WithRetry sets the retry policy of calls that are safe to repeat.
func WithRetry(p RetryPolicy) Option { return func(c *Client) { c.retry = p.withDefaults() } }

// WithLogger logs retries and outcomes of unknown result to l (nil means
// slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(c *Client) {
		if l != nil {
			c.log = l
		}
	}
}

type correlationKey struct{}

// WithCallCorrelationID returns a context whose calls send id as
// X-Correlation-Id, overriding WithCorrelationID.
func WithCallCorrelationID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, correlationKey{}, id)
}

// New returns a client of the server at baseURL ("http://host:8080", or
// with a path prefix under which /v1 is mounted). It returns an error for
// a URL that is not absolute http(s).
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimSpace(baseURL))
	if err != nil {
		return nil, fmt.Errorf("backlog client: base URL %q: %w", baseURL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("backlog client: base URL %q must be absolute http:// or https://", baseURL)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("backlog client: base URL %q must not have a query or fragment", baseURL)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	c := &Client{
		base:      u.String(),
		userAgent: DefaultUserAgent,
		timeout:   DefaultTimeout,
		retry:     RetryPolicy{}.withDefaults(),
		log:       slog.Default(),
	}
	for _, o := range opts {
		o(c)
	}
	if c.hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 64
		c.hc = &http.Client{Transport: tr}
	}
	return c, nil
}

// BaseURL returns the server's base URL as given to New, without a
// trailing slash.
func (c *Client) BaseURL() string { return c.base }

// retryMode says when a call may be repeated.
type retryMode int

const (
	// retrySafe: only failures proving the server did nothing.
	retrySafe retryMode = iota
	// retryIdempotent: any transient failure.
	retryIdempotent
)

// call is one API request.
type call struct {
	method string
	path   string // escaped, starting with /
	query  url.Values
	body   any // marshalled as JSON; nil = no body
	out    any // decoded from a 2xx response; nil = ignore
	mode   retryMode
	wait   time.Duration // extra time for a long poll
}

// do performs a call with retries. ambiguous reports whether an earlier
// failed try may have been applied by the server (its answer was lost).
func (c *Client) do(ctx context.Context, cl call) (ambiguous bool, err error) {
	var body []byte
	if cl.body != nil {
		b, err := json.Marshal(cl.body)
		if err != nil {
			return false, fmt.Errorf("backlog client: %s %s: encode request: %w", cl.method, cl.path, err)
		}
		body = b
	}
	for try := 1; ; try++ {
		retryAfter, err := c.once(ctx, cl, body)
		if err == nil {
			return ambiguous, nil
		}
		if try >= c.retry.MaxAttempts || ctx.Err() != nil {
			return ambiguous, err
		}
		safe := notApplied(err)
		if !safe && (cl.mode != retryIdempotent || !IsRetryable(err) || isInternal(err)) {
			return ambiguous, err
		}
		ambiguous = ambiguous || !safe
		d := max(backoff(try, c.retry.BaseDelay, c.retry.MaxDelay), retryAfter)
		c.log.DebugContext(ctx, "backlog client: retrying", "method", cl.method, "path", cl.path, "try", try, "in", d, "err", err)
		if !sleep(ctx, d) {
			return ambiguous, err
		}
	}
}

func isInternal(err error) bool {
	var p *Problem
	return errors.As(err, &p) && p.Status == http.StatusInternalServerError
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// maxRetryAfter caps a server's Retry-After hint.
const maxRetryAfter = 30 * time.Second

// once performs one HTTP request. It returns the server's Retry-After hint
// (0 if none) and the error.
func (c *Client) once(ctx context.Context, cl call, body []byte) (time.Duration, error) {
	u := c.base + "/v1" + cl.path
	if len(cl.query) > 0 {
		u += "?" + cl.query.Encode()
	}
	rctx, cancel := context.WithTimeout(ctx, c.timeout+cl.wait)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(rctx, cl.method, u, rd)
	if err != nil {
		return 0, fmt.Errorf("backlog client: %s %s: %w", cl.method, cl.path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, application/problem+json")
	// The caller's trace, if any: a submission's enqueue continues it.
	core.InjectTraceHeaders(ctx, req.Header)
	if c.userAgent != "" {
		req.Header.Set("User-Agent", c.userAgent)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if id, _ := ctx.Value(correlationKey{}).(string); id != "" {
		req.Header.Set(CorrelationHeader, id)
	} else if c.correlationID != "" {
		req.Header.Set(CorrelationHeader, c.correlationID)
	}
	hc := c.hc
	if cl.wait > 0 && hc.Timeout > 0 && hc.Timeout < c.timeout+cl.wait {
		cp := *hc
		cp.Timeout = c.timeout + cl.wait
		hc = &cp
	}
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			// The caller's context ended: report that, not a transport
			// failure worth retrying.
			return 0, fmt.Errorf("backlog client: %s %s: %w", cl.method, cl.path, context.Cause(ctx))
		}
		return 0, &TransportError{Method: cl.method, URL: store.RedactURL(u), Sent: !dialFailed(err), Err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		p := decodeProblem(resp)
		p.Method = cl.method
		if p.Instance == "" {
			p.Instance = req.URL.Path
		}
		var ra time.Duration
		if resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusTooManyRequests {
			if s, err := strconv.Atoi(strings.TrimSpace(resp.Header.Get("Retry-After"))); err == nil && s > 0 {
				ra = min(time.Duration(s)*time.Second, maxRetryAfter)
			}
		}
		return ra, p
	}
	if cl.out == nil || resp.StatusCode == http.StatusNoContent {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return 0, nil
	}
	if err := json.NewDecoder(resp.Body).Decode(cl.out); err != nil {
		if ctx.Err() != nil {
			return 0, fmt.Errorf("backlog client: %s %s: %w", cl.method, cl.path, context.Cause(ctx))
		}
		// The response was cut or garbled: the call may have applied.
		return 0, &TransportError{Method: cl.method, URL: store.RedactURL(u), Sent: true, Err: fmt.Errorf("decode response (status %d): %w", resp.StatusCode, err)}
	}
	return 0, nil
}

// decodeProblem reads an error response. A body that is not a problem
// becomes a Problem with the status, its text and the start of the body.
func decodeProblem(resp *http.Response) *Problem {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	p := &Problem{}
	ct := resp.Header.Get("Content-Type")
	if strings.Contains(ct, "json") && json.Unmarshal(b, p) == nil && p.Type != "" {
		if p.Status == 0 {
			p.Status = resp.StatusCode
		}
	} else {
		p = &Problem{Status: resp.StatusCode, Title: http.StatusText(resp.StatusCode)}
		if s := strings.TrimSpace(string(b)); s != "" {
			if len(s) > 200 {
				s = s[:200] + "…"
			}
			p.Detail = s
		}
	}
	if p.CorrelationID == "" {
		p.CorrelationID = resp.Header.Get(CorrelationHeader)
	}
	return p
}

func jobPath(id int64, suffix string) string {
	return "/jobs/" + strconv.FormatInt(id, 10) + suffix
}

func workerPath(id, suffix string) string {
	return "/workers/" + url.PathEscape(id) + suffix
}

// Submit submits one job (POST /v1/jobs; producer role). A unique-key
// duplicate returns the live job with Duplicate set and no error. Invalid
// input returns a *Problem matching core.ErrInvalidJob (or
// ErrInvalidRequest) and inserts nothing. It is retried after transient
// failures only when the job has a unique key (a replay then reports the
// first submission's job as a duplicate).
func (c *Client) Submit(ctx context.Context, req SubmitRequest) (*SubmitResult, error) {
	var out SubmitResult
	mode := retrySafe
	if req.UniqueKey != "" {
		mode = retryIdempotent
	}
	if _, err := c.do(ctx, call{method: http.MethodPost, path: "/jobs", body: req, out: &out, mode: mode}); err != nil {
		return nil, err
	}
	return &out, nil
}

// SubmitBatch submits 1..1000 jobs in one request (POST /v1/jobs/batch;
// producer role) and returns one result per input, in order. One invalid
// job rejects the whole batch (a *Problem matching core.ErrInvalidJob whose
// detail names the index, "jobs[3]: …") and nothing is inserted. It is
// retried after transient failures only when every job has a unique key.
func (c *Client) SubmitBatch(ctx context.Context, jobs []SubmitRequest) ([]SubmitResult, error) {
	mode := retryIdempotent
	for _, j := range jobs {
		if j.UniqueKey == "" {
			mode = retrySafe
			break
		}
	}
	var out struct {
		Results []SubmitResult `json:"results"`
	}
	body := struct {
		Jobs []SubmitRequest `json:"jobs"`
	}{jobs}
	if _, err := c.do(ctx, call{method: http.MethodPost, path: "/jobs/batch", body: body, out: &out, mode: mode}); err != nil {
		return nil, err
	}
	if len(out.Results) != len(jobs) {
		return out.Results, fmt.Errorf("backlog client: batch of %d jobs answered with %d results", len(jobs), len(out.Results))
	}
	return out.Results, nil
}

type jobEnvelope struct {
	Job *Job `json:"job"`
}

// GetJob returns one job (GET /v1/jobs/{id}; producer or worker role), or
// a *Problem matching core.ErrNotFound.
func (c *Client) GetJob(ctx context.Context, id int64) (*Job, error) {
	var out jobEnvelope
	if _, err := c.do(ctx, call{method: http.MethodGet, path: jobPath(id, ""), out: &out, mode: retryIdempotent}); err != nil {
		return nil, err
	}
	return out.Job, nil
}

// ListJobs returns one page of jobs ordered by id, or by run_at with
// p.ByRunAt (GET /v1/jobs; producer role). Pass page.NextAfter as p.After
// (and page.NextAfterRunAt as p.AfterRunAt) for the next page; 0 means
// this was the last. See AllJobs for an iterator.
//
// A page the server could not read within its time is a *Problem
// matching ErrUnavailable (503); a page cut off in transit (the server
// aborts a page it cannot write whole) is a *TransportError wrapping
// io.ErrUnexpectedEOF. Both are retried under the client's RetryPolicy
// (a list is read-only), and neither ever yields part of a page.
func (c *Client) ListJobs(ctx context.Context, p ListParams) (*JobPage, error) {
	q := url.Values{}
	if p.Queue != "" {
		q.Set("queue", p.Queue)
	}
	if len(p.States) > 0 {
		ss := make([]string, len(p.States))
		for i, s := range p.States {
			ss[i] = string(s)
		}
		q.Set("state", strings.Join(ss, ","))
	}
	if p.Kind != "" {
		q.Set("kind", p.Kind)
	}
	if len(p.Args) > 0 {
		q.Set("args", string(p.Args))
	}
	if p.After != 0 {
		q.Set("after", strconv.FormatInt(p.After, 10))
	}
	if p.Limit != 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	if p.Desc {
		q.Set("order", "desc")
	}
	if p.Archived {
		q.Set("archived", "true")
	}
	if p.WorkflowID != 0 {
		q.Set("workflow_id", strconv.FormatInt(p.WorkflowID, 10))
	}
	if p.ByRunAt {
		q.Set("sort", "run_at")
		if p.After != 0 {
			q.Set("after_run_at", wireTime(p.AfterRunAt).UTC().Format(time.RFC3339Nano))
		}
	}
	var out JobPage
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/jobs", query: q, out: &out, mode: retryIdempotent}); err != nil {
		return nil, err
	}
	return &out, nil
}

// AllJobs iterates over every job matching p, page by page from p.After
// (p.Limit is the page size). The iteration stops at the first error,
// which it yields with a nil job.
func (c *Client) AllJobs(ctx context.Context, p ListParams) iter.Seq2[*Job, error] {
	return func(yield func(*Job, error) bool) {
		for {
			page, err := c.ListJobs(ctx, p)
			if err != nil {
				yield(nil, err)
				return
			}
			for _, j := range page.Jobs {
				if !yield(j, nil) {
					return
				}
			}
			if page.NextAfter == 0 || len(page.Jobs) == 0 {
				return
			}
			p.After, p.AfterRunAt = page.NextAfter, page.NextAfterRunAt
		}
	}
}

// CancelJob cancels a job not in a final state (POST /v1/jobs/{id}/cancel;
// admin role) and returns it: core.ErrInvalidState for a final job,
// core.ErrNotFound for a missing one. Not retried after an ambiguous
// failure (a replay would report ErrInvalidState).
func (c *Client) CancelJob(ctx context.Context, id int64) (*Job, error) {
	var out jobEnvelope
	if _, err := c.do(ctx, call{method: http.MethodPost, path: jobPath(id, "/cancel"), body: struct{}{}, out: &out}); err != nil {
		return nil, err
	}
	return out.Job, nil
}

// RetryJob makes a job that is not running available now (POST
// /v1/jobs/{id}/retry; admin role): core.ErrInvalidState for a running
// job. Not retried after an ambiguous failure.
func (c *Client) RetryJob(ctx context.Context, id int64) (*Job, error) {
	var out jobEnvelope
	if _, err := c.do(ctx, call{method: http.MethodPost, path: jobPath(id, "/retry"), body: struct{}{}, out: &out}); err != nil {
		return nil, err
	}
	return out.Job, nil
}

// DeleteJob deletes a job that is not running (DELETE /v1/jobs/{id}; admin
// role): core.ErrInvalidState for a running job, core.ErrNotFound for a
// missing one. Not retried after an ambiguous failure.
func (c *Client) DeleteJob(ctx context.Context, id int64) error {
	_, err := c.do(ctx, call{method: http.MethodDelete, path: jobPath(id, "")})
	return err
}

// Queues lists every queue with jobs or a persisted pause, by name (GET
// /v1/queues; producer role), reading the server's pages of up to 1000
// queues one after another.
func (c *Client) Queues(ctx context.Context) ([]QueueInfo, error) {
	all := []QueueInfo{}
	after := ""
	for {
		var out struct {
			Queues    []QueueInfo `json:"queues"`
			NextAfter string      `json:"next_after"`
		}
		q := url.Values{"limit": {"1000"}}
		if after != "" {
			q.Set("after", after)
		}
		if _, err := c.do(ctx, call{method: http.MethodGet, path: "/queues", query: q, out: &out, mode: retryIdempotent}); err != nil {
			return nil, err
		}
		all = append(all, out.Queues...)
		if out.NextAfter == "" || out.NextAfter <= after {
			return all, nil
		}
		after = out.NextAfter
	}
}

// QueueOption changes a PauseQueue or ResumeQueue call.
type QueueOption func(*queueOptions)

type queueOptions struct{ create bool }

// CreateQueue lets PauseQueue and ResumeQueue act on a queue the server's
// store does not hold yet (no jobs, no pause); without it the server
// answers 404 not-found for such a name, as a likely typo.
func CreateQueue() QueueOption { return func(o *queueOptions) { o.create = true } }

// PauseQueue stops every worker from claiming jobs of queue until
// ResumeQueue (POST /v1/queues/{name}/pause; admin role) and returns the
// queue's entry. Idempotent. A queue the store does not hold is refused
// (404 not-found) unless opts hold CreateQueue.
func (c *Client) PauseQueue(ctx context.Context, queue string, opts ...QueueOption) (*QueueInfo, error) {
	return c.queueAction(ctx, queue, "pause", opts)
}

// ResumeQueue lifts a pause (POST /v1/queues/{name}/resume; admin role)
// and returns the queue's entry. Idempotent. A queue the store does not
// hold is refused (404 not-found) unless opts hold CreateQueue.
func (c *Client) ResumeQueue(ctx context.Context, queue string, opts ...QueueOption) (*QueueInfo, error) {
	return c.queueAction(ctx, queue, "resume", opts)
}

func (c *Client) queueAction(ctx context.Context, queue, action string, opts []QueueOption) (*QueueInfo, error) {
	var o queueOptions
	for _, opt := range opts {
		opt(&o)
	}
	var out struct {
		Queue *QueueInfo `json:"queue"`
	}
	path := "/queues/" + url.PathEscape(queue) + "/" + action
	if o.create {
		path += "?create=true"
	}
	if _, err := c.do(ctx, call{method: http.MethodPost, path: path, body: struct{}{}, out: &out, mode: retryIdempotent}); err != nil {
		return nil, err
	}
	return out.Queue, nil
}

// KindPolicies returns the policy of every kind the server's
// configuration knows, by kind (attempts of a job enqueued without its
// own, retry schedule, attempt timeout), and the policy of any other kind
// (GET /v1/kinds; producer role).
func (c *Client) KindPolicies(ctx context.Context) (kinds []core.KindPolicy, unknown core.KindPolicy, err error) {
	var out struct {
		Kinds   []core.KindPolicy `json:"kinds"`
		Unknown core.KindPolicy   `json:"unknown"`
	}
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/kinds", out: &out, mode: retryIdempotent}); err != nil {
		return nil, core.KindPolicy{}, err
	}
	return out.Kinds, out.Unknown, nil
}

// PeriodicJobs lists the periodic jobs the server's configuration holds,
// by name, with their pause flag, last and next run (GET /v1/periodic;
// producer role).
func (c *Client) PeriodicJobs(ctx context.Context) ([]core.PeriodicStatus, error) {
	var out struct {
		Periodic []core.PeriodicStatus `json:"periodic"`
	}
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/periodic", out: &out, mode: retryIdempotent}); err != nil {
		return nil, err
	}
	return out.Periodic, nil
}

// PausePeriodic stops every node from enqueuing the named periodic job's
// occurrences until ResumePeriodic (POST /v1/periodic/{name}/pause; admin
// role) and returns its status. A name the server does not list returns a
// *Problem matching core.ErrUnknownPeriodic. Idempotent.
func (c *Client) PausePeriodic(ctx context.Context, name string) (*core.PeriodicStatus, error) {
	return c.periodicAction(ctx, name, "pause")
}

// ResumePeriodic lifts a periodic job's pause (POST
// /v1/periodic/{name}/resume; admin role) and returns its status:
// occurrences that fell while it was paused are not run. Errors as
// PausePeriodic. Idempotent.
func (c *Client) ResumePeriodic(ctx context.Context, name string) (*core.PeriodicStatus, error) {
	return c.periodicAction(ctx, name, "resume")
}

func (c *Client) periodicAction(ctx context.Context, name, action string) (*core.PeriodicStatus, error) {
	var out struct {
		PeriodicJob *core.PeriodicStatus `json:"periodic_job"`
	}
	path := "/periodic/" + url.PathEscape(name) + "/" + action
	if _, err := c.do(ctx, call{method: http.MethodPost, path: path, body: struct{}{}, out: &out, mode: retryIdempotent}); err != nil {
		return nil, err
	}
	return out.PeriodicJob, nil
}

// RunPeriodicNow enqueues one job of the named periodic job now, outside
// its schedule (POST /v1/periodic/{name}/run; admin role), and returns it;
// its metadata (core.PeriodicMetadataName) names the schedule. A name the
// server does not list returns a *Problem matching
// core.ErrUnknownPeriodic. Each call enqueues a job, so it is not retried
// after an ambiguous failure.
func (c *Client) RunPeriodicNow(ctx context.Context, name string) (*SubmitResult, error) {
	var out SubmitResult
	path := "/periodic/" + url.PathEscape(name) + "/run"
	if _, err := c.do(ctx, call{method: http.MethodPost, path: path, body: struct{}{}, out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// Workers lists the worker registry by id, with liveness judged by the
// server (GET /v1/workers; admin role).
func (c *Client) Workers(ctx context.Context) ([]WorkerInfo, error) {
	var out struct {
		Workers []WorkerInfo `json:"workers"`
	}
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/workers", out: &out, mode: retryIdempotent}); err != nil {
		return nil, err
	}
	return out.Workers, nil
}

// RegisterWorker registers (or re-registers) the remote worker id, 1..255
// bytes (PUT /v1/workers/{id}; worker role). It is idempotent and also a
// heartbeat. The answer says how often to heartbeat and how long each
// claim's lease lasts.
func (c *Client) RegisterWorker(ctx context.Context, id string, req RegisterRequest) (*Registration, error) {
	var out struct {
		Worker            WorkerInfo `json:"worker"`
		HeartbeatInterval float64    `json:"heartbeat_interval_seconds"`
		Lease             float64    `json:"lease_seconds"`
	}
	if _, err := c.do(ctx, call{method: http.MethodPut, path: workerPath(id, ""), body: req, out: &out, mode: retryIdempotent}); err != nil {
		return nil, err
	}
	return &Registration{Worker: out.Worker, HeartbeatInterval: secondsDuration(out.HeartbeatInterval), Lease: secondsDuration(out.Lease)}, nil
}

// Heartbeat records a heartbeat of worker id and renews the leases it
// names (POST /v1/workers/{id}/heartbeat; worker role). leases must be the
// lease tokens of every job the worker holds: claimed and running, or
// finished with the outcome not delivered yet (nil or empty when it holds
// none). Only named leases are renewed; running jobs of the worker that it
// does not name and that were claimed more than a few seconds ago (claims
// whose answer never reached it) are handed back without using an attempt
// and counted in HandedBack. ErrWorkerNotRegistered means the worker has no
// record (it was declared dead, its jobs handed back): register again.
// ErrInvalidLeaseToken means a token is not one of this API's tokens or
// belongs to another worker (nothing was done); tokens the server did not
// sign (from an older server, or under a secret it no longer accepts) are
// not renewed, as if their jobs were no longer held. ErrForbidden means
// the worker id is bound to another credential (see docs/security.md).
func (c *Client) Heartbeat(ctx context.Context, id string, leases []string) (*HeartbeatResult, error) {
	if leases == nil {
		leases = []string{}
	}
	body := struct {
		Leases []string `json:"leases"`
	}{leases}
	var out HeartbeatResult
	if _, err := c.do(ctx, call{method: http.MethodPost, path: workerPath(id, "/heartbeat"), body: body, out: &out, mode: retryIdempotent}); err != nil {
		return nil, err
	}
	return &out, nil
}

// Claim claims up to req.Limit due jobs for worker id (POST
// /v1/workers/{id}/claim; worker role), each with its LeaseToken. With
// req.Wait > 0 the server holds the request until a job arrives or the
// wait ends, and the request's time limit grows by the wait. An empty
// slice means nothing was due. ErrWorkerNotRegistered means register
// again. A claim is retried only when the server cannot have applied it
// (a lost answer would strand its jobs until the worker dies or their
// lease ends).
func (c *Client) Claim(ctx context.Context, id string, req ClaimRequest) ([]*Job, error) {
	body := struct {
		Queues      []string `json:"queues,omitempty"`
		Limit       int      `json:"limit,omitempty"`
		WaitSeconds float64  `json:"wait_seconds,omitempty"`
	}{req.Queues, req.Limit, req.Wait.Round(time.Millisecond).Seconds()}
	var out struct {
		Jobs []*Job `json:"jobs"`
	}
	if _, err := c.do(ctx, call{method: http.MethodPost, path: workerPath(id, "/claim"), body: body, out: &out, wait: max(req.Wait, 0)}); err != nil {
		return nil, err
	}
	if out.Jobs == nil {
		out.Jobs = []*Job{}
	}
	return out.Jobs, nil
}

// Deregister removes worker id's record (DELETE /v1/workers/{id}; worker
// role). Jobs it still holds come back when their leases end. Idempotent.
func (c *Client) Deregister(ctx context.Context, id string) error {
	_, err := c.do(ctx, call{method: http.MethodDelete, path: workerPath(id, ""), mode: retryIdempotent})
	return err
}

// Complete completes a claimed job (POST /v1/jobs/{id}/complete; worker
// role) and returns it as it is now: nil when the server keeps no completed
// jobs (the row was deleted), or when the outcome was retried after an
// ambiguous failure and the retry found the lease gone (the first try most
// likely applied; logged as a warning). core.ErrLeaseLost means the job is
// no longer this attempt's (nothing changed); ErrInvalidRequest a result
// over the server's limit (the job stays running).
func (c *Client) Complete(ctx context.Context, id int64, req CompleteRequest) (*Job, error) {
	return c.outcome(ctx, id, "/complete", req)
}

// Fail records a failed attempt of a claimed job (POST /v1/jobs/{id}/fail;
// worker role) and returns the job as it is now: retryable or discarded
// (action retry, by the server's policy), discarded (action discard) or
// cancelled (action cancel). Errors and retries as for Complete.
func (c *Client) Fail(ctx context.Context, id int64, req FailRequest) (*Job, error) {
	if req.Error == "" {
		return nil, fmt.Errorf("backlog client: fail job %d: the error message is required", id)
	}
	return c.outcome(ctx, id, "/fail", req)
}

// Snooze puts a claimed job back, due after req.Delay, without using an
// attempt (POST /v1/jobs/{id}/snooze; worker role). Errors and retries as
// for Complete.
func (c *Client) Snooze(ctx context.Context, id int64, req SnoozeRequest) (*Job, error) {
	return c.outcome(ctx, id, "/snooze", req)
}

// Continue moves a claimed job on to its next step (POST
// /v1/jobs/{id}/continue; worker role) and returns it as it is now:
// scheduled or available under its new kind, or retryable or discarded
// when the server found the continuation invalid (the attempt failed, as
// in process). Errors and retries as for Complete.
func (c *Client) Continue(ctx context.Context, id int64, req ContinueRequest) (*Job, error) {
	return c.outcome(ctx, id, "/continue", req)
}

// MaxOutcomes is the most outcomes one Outcomes call may carry.
const MaxOutcomes = 1000

// Outcomes reports up to MaxOutcomes outcomes of jobs worker workerID
// holds in one request (POST /v1/workers/{id}/outcomes; worker role),
// which the server applies with one store write. It returns one result per
// item, in input order: each item applies or not on its own (see
// OutcomeResult; a token issued to another worker is invalid-lease-token).
// An error means no result is known: a *Problem for a request the server
// refused as a whole (nothing changed; ErrRouteNotFound from a server
// without this endpoint: use the single calls), a *TransportError or
// ErrUnavailable after the retries. An empty batch sends nothing and
// returns no results; more than MaxOutcomes returns an error.
//
// It is retried after transient failures like the single outcome calls:
// an item that comes back lease-lost after a retried request whose answer
// was lost is marked Unknown (an earlier try most likely applied it) and
// logged as a warning.
func (c *Client) Outcomes(ctx context.Context, workerID string, items []OutcomeRequest) ([]OutcomeResult, error) {
	switch {
	case len(items) == 0:
		return nil, nil
	case len(items) > MaxOutcomes:
		return nil, fmt.Errorf("backlog client: %d outcomes in one batch, over the limit of %d", len(items), MaxOutcomes)
	}
	body := struct {
		Outcomes []OutcomeRequest `json:"outcomes"`
	}{items}
	var out struct {
		Results []OutcomeResult `json:"results"`
	}
	path := workerPath(workerID, "/outcomes")
	ambiguous, err := c.do(ctx, call{method: http.MethodPost, path: path, body: body, out: &out, mode: retryIdempotent})
	if err != nil {
		return nil, err
	}
	if len(out.Results) != len(items) {
		return nil, fmt.Errorf("backlog client: a batch of %d outcomes answered with %d results", len(items), len(out.Results))
	}
	for i := range out.Results {
		r := &out.Results[i]
		if r.Problem == nil {
			continue
		}
		r.Problem.Method = http.MethodPost
		if ambiguous && errors.Is(r.Problem, core.ErrLeaseLost) {
			r.Unknown = true
			c.log.WarnContext(ctx, "backlog client: a retried outcome found the lease gone; an earlier try whose answer was lost most likely applied it",
				"job_id", r.JobID, "outcome", items[i].Type)
		}
	}
	return out.Results, nil
}

// RecordProgress records the progress and checkpoint of one claimed job
// (POST /v1/jobs/{id}/progress; worker role), fenced by its lease token:
// core.ErrLeaseLost means the token's claim no longer holds the job
// (nothing changed); values out of bounds are a *Problem of type
// invalid-request. It is retried after transient failures (writing the
// same report twice is harmless). Handlers of a Worker call
// core.ReportProgress and core.SaveCheckpoint instead.
func (c *Client) RecordProgress(ctx context.Context, id int64, req ProgressRequest) error {
	_, err := c.do(ctx, call{method: http.MethodPost, path: jobPath(id, "/progress"), body: req, mode: retryIdempotent})
	return err
}

// ExtendLease extends the lease of one claimed job (POST
// /v1/jobs/{id}/lease; worker role), and only that job's, and returns the
// new lease deadline (UTC, by the server's clock). core.ErrLeaseLost means
// the token's claim no longer holds the job (nothing changed). It is
// retried after transient failures (extending twice is harmless).
func (c *Client) ExtendLease(ctx context.Context, id int64, req ExtendLeaseRequest) (time.Time, error) {
	var out struct {
		LeaseUntil time.Time `json:"lease_until"`
	}
	if _, err := c.do(ctx, call{method: http.MethodPost, path: jobPath(id, "/lease"), body: req, out: &out, mode: retryIdempotent}); err != nil {
		return time.Time{}, err
	}
	return out.LeaseUntil, nil
}

// outcome posts an outcome, retrying transient failures; lease-lost on a
// retry after an ambiguous failure counts as applied (result unknown).
func (c *Client) outcome(ctx context.Context, id int64, suffix string, body any) (*Job, error) {
	var out jobEnvelope
	ambiguous, err := c.do(ctx, call{method: http.MethodPost, path: jobPath(id, suffix), body: body, out: &out, mode: retryIdempotent})
	if err != nil {
		if ambiguous && errors.Is(err, core.ErrLeaseLost) {
			c.log.WarnContext(ctx, "backlog client: a retried outcome found the lease gone; an earlier try whose answer was lost most likely applied it",
				"job_id", id, "outcome", strings.TrimPrefix(suffix, "/"))
			return nil, nil
		}
		return nil, err
	}
	return out.Job, nil
}
