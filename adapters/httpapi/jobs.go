package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/core/storekit"

	"go.opentelemetry.io/otel/propagation"

	"github.com/backlogq/backlog/adapters/httpapi/apitypes"
	"github.com/backlogq/backlog/core"
)

// Job is a job as the API shows it: apitypes.Job, the one type the
// server encodes, the Go client decodes and the backlog command prints
// (docs/http-api.md; the Job schema of openapi.json).
type Job = apitypes.Job

func utc(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}

// SubmitRequest is the body of POST /v1/jobs and one item of a batch.
// RunAt and DelaySeconds are exclusive; nil pointers mean the default.
type SubmitRequest struct {
	Kind         string          `json:"kind"`
	Args         json.RawMessage `json:"args,omitempty"` // any JSON; absent or null means {}
	Queue        string          `json:"queue,omitempty"`
	Priority     *int            `json:"priority,omitempty"`      // 1..10, default 5
	RunAt        *time.Time      `json:"run_at,omitempty"`        // RFC 3339
	DelaySeconds *float64        `json:"delay_seconds,omitempty"` // ≥ 0
	MaxAttempts  *int            `json:"max_attempts,omitempty"`  // ≥ 1, default 20
	UniqueKey    string          `json:"unique_key,omitempty"`
	// UniqueScope is where unique_key is unique: global (default), queue
	// or kind (core.UniqueScope).
	UniqueScope string `json:"unique_scope,omitempty"`
	// UniqueForSeconds keeps the key held this long after the job
	// finishes (core.Options.UniqueFor); 0 to the server's
	// Config.MaxUniqueFor (30 days by default), default 0 (or
	// IdempotencyWindow with an Idempotency-Key header).
	UniqueForSeconds *float64 `json:"unique_for_seconds,omitempty"`
	// PartitionKey puts the job in a partition of its queue (a tenant, a
	// customer id) for the queue's per-partition limit.
	PartitionKey string            `json:"partition_key,omitempty"`
	Tags         []string          `json:"tags,omitempty"`
	Deadline     *time.Time        `json:"deadline,omitempty"`
	Metadata     map[string]string `json:"metadata,omitempty"`
}

// IdempotencyWindow is how long the key of a submission made with an
// Idempotency-Key header stays held after its job finishes, unless the
// body sets unique_for_seconds: a retried submission within it returns
// the original job.
const IdempotencyWindow = 24 * time.Hour

// SubmitResponse answers POST /v1/jobs and is one result of a batch.
type SubmitResponse struct {
	Job       *Job `json:"job"`
	Duplicate bool `json:"duplicate"`
}

// BatchRequest is the body of POST /v1/jobs/batch.
type BatchRequest struct {
	Jobs []SubmitRequest `json:"jobs"`
}

// BatchResponse answers POST /v1/jobs/batch, in input order.
type BatchResponse struct {
	Results []SubmitResponse `json:"results"`
}

// JobResponse wraps one job ({"job": …}); Job is null after a completion
// that deleted the row.
type JobResponse struct {
	Job *Job `json:"job"`
}

// ListResponse answers GET /v1/jobs. NextAfter is the cursor of the next
// page, absent on the last page. A page ends at its limit or once the args
// and results of its jobs reach Config.MaxPageBytes, so a page shorter
// than its limit may still carry a cursor.
type ListResponse struct {
	Jobs      []*Job `json:"jobs"`
	NextAfter *int64 `json:"next_after,omitempty"`
	// NextAfterRunAt goes with NextAfter in a list sorted by run_at
	// (sort=run_at): the next page is after=NextAfter&after_run_at=this.
	NextAfterRunAt *time.Time `json:"next_after_run_at,omitempty"`
}

// maxSeconds bounds every *_seconds field (about 100 years) so it fits a
// time.Duration.
const maxSeconds = 100 * 365 * 24 * 3600

// seconds converts a *_seconds field to a duration, rejecting negative,
// non-finite or absurd values.
func seconds(field string, v float64) (time.Duration, error) {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v > maxSeconds {
		return 0, newProblem(SlugInvalidRequest, fmt.Sprintf("%s must be a number of seconds from 0 to %d", field, maxSeconds))
	}
	return time.Duration(v * float64(time.Second)), nil
}

// insertParams validates one submission and builds its insert. prefix
// names the item in messages ("" or "jobs[3]: ").
func (s *Server) insertParams(req *SubmitRequest, now time.Time, correlationID, prefix string) (core.InsertParams, error) {
	opts, args, err := s.submitOptions(req, now, correlationID, prefix)
	if err != nil {
		return core.InsertParams{}, err
	}
	return s.buildInsert(req.Kind, args, &opts, now, prefix)
}

// submitOptions validates one submission with the server's rules and
// returns its options and args (nil for none) as core takes them. prefix
// names the item in messages.
func (s *Server) submitOptions(req *SubmitRequest, now time.Time, correlationID, prefix string) (core.Options, []byte, error) {
	opts := core.Options{Queue: req.Queue, UniqueKey: req.UniqueKey, PartitionKey: req.PartitionKey, Tags: req.Tags}
	scope, err := core.ParseUniqueScope(req.UniqueScope)
	if err != nil {
		return core.Options{}, nil, newProblem(SlugInvalidRequest, prefix+err.Error())
	}
	opts.UniqueScope = scope
	if req.UniqueForSeconds != nil {
		d, err := seconds("unique_for_seconds", *req.UniqueForSeconds)
		if err != nil {
			return core.Options{}, nil, newProblem(SlugInvalidRequest, prefix+err.(*problem).detail)
		}
		if d > s.cfg.MaxUniqueFor {
			return core.Options{}, nil, newProblem(SlugInvalidRequest, prefix+uniqueForOverLimit(*req.UniqueForSeconds, s.cfg.MaxUniqueFor))
		}
		opts.UniqueFor = d
	}
	if req.Priority != nil {
		if *req.Priority < core.PriorityHighest || *req.Priority > core.PriorityLowest {
			return core.Options{}, nil, newProblem(SlugInvalidJob, fmt.Sprintf("%spriority %d is outside %d..%d", prefix, *req.Priority, core.PriorityHighest, core.PriorityLowest))
		}
		opts.Priority = *req.Priority
	}
	if req.MaxAttempts != nil {
		if *req.MaxAttempts < 1 {
			return core.Options{}, nil, newProblem(SlugInvalidJob, fmt.Sprintf("%smax_attempts %d is below 1", prefix, *req.MaxAttempts))
		}
		opts.MaxAttempts = *req.MaxAttempts
	} else {
		// The kind's default (core.WithMaxAttempts, WithRetries), as
		// Enqueue gives it.
		opts.MaxAttempts = s.c.MaxAttempts(req.Kind)
	}
	if req.RunAt != nil && req.DelaySeconds != nil {
		return core.Options{}, nil, newProblem(SlugInvalidRequest, prefix+"run_at and delay_seconds are exclusive")
	}
	if req.RunAt != nil {
		if req.RunAt.IsZero() {
			return core.Options{}, nil, newProblem(SlugInvalidRequest, prefix+"run_at is the zero time")
		}
		if err := core.ValidateTime("run_at", *req.RunAt); err != nil {
			return core.Options{}, nil, newProblem(SlugInvalidRequest, prefix+trimInvalid(err.Error()))
		}
		opts.RunAt = *req.RunAt
	}
	if req.DelaySeconds != nil {
		d, err := seconds("delay_seconds", *req.DelaySeconds)
		if err != nil {
			return core.Options{}, nil, newProblem(SlugInvalidRequest, prefix+err.(*problem).detail)
		}
		opts.RunAt = now.Add(d)
	}
	if req.Deadline != nil {
		if err := core.ValidateTime("deadline", *req.Deadline); err != nil {
			return core.Options{}, nil, newProblem(SlugInvalidRequest, prefix+trimInvalid(err.Error()))
		}
		opts.Deadline = *req.Deadline
	}
	if correlationID != "" {
		if _, set := req.Metadata["correlation_id"]; !set {
			md := make(map[string]string, len(req.Metadata)+1)
			for k, v := range req.Metadata {
				md[k] = v
			}
			md["correlation_id"] = correlationID
			opts.Metadata = md
		} else {
			opts.Metadata = req.Metadata
		}
	} else {
		opts.Metadata = req.Metadata
	}
	args := []byte(req.Args)
	if len(args) == 0 || string(args) == "null" {
		args = nil
	}
	if !utf8.Valid(args) {
		return core.Options{}, nil, newProblem(SlugInvalidJSON, prefix+"args are not valid UTF-8 (JSON text must be UTF-8)")
	}
	if err := s.checkSubmittedArgs(req.Kind, args, prefix); err != nil {
		return core.Options{}, nil, err
	}
	return opts, args, nil
}

// buildInsert builds the insert of a submission of kind with args and
// opts (submitOptions) and validates it with core's rules.
func (s *Server) buildInsert(kind string, args []byte, opts *core.Options, now time.Time, prefix string) (core.InsertParams, error) {
	// Validate with core's rules, but the args size against this client's
	// limit (NewInsertRaw knows only the default one).
	if maxArgs := s.ccfg.MaxArgsBytes; len(args) > maxArgs {
		return core.InsertParams{}, newProblem(SlugInvalidJob, fmt.Sprintf("%skind %q: args are %d bytes, over the limit of %d", prefix, kind, len(args), maxArgs))
	}
	check := args
	if len(args) > core.DefaultMaxArgsBytes {
		check = nil
	}
	p, err := core.NewInsertRaw(kind, check, opts, now)
	if err != nil {
		return core.InsertParams{}, newProblem(SlugInvalidJob, prefix+trimInvalid(err.Error()))
	}
	if len(args) > core.DefaultMaxArgsBytes {
		if !json.Valid(args) {
			return core.InsertParams{}, newProblem(SlugInvalidJob, fmt.Sprintf("%skind %q: args are not valid JSON", prefix, kind))
		}
		p.Args = args
	}
	if p.UniqueKey != "" {
		p.UniqueFingerprint = submissionFingerprint(&p)
	}
	return p, nil
}

// enqueue inserts validated jobs and wakes long-polls when any is due.
// The client refuses a job of a kind nothing handles (core.Client.CheckKinds:
// 422 unknown-kind); batch says the jobs are the items of a batch.
func (s *Server) enqueue(ctx context.Context, ps []core.InsertParams, batch bool) ([]core.InsertResult, error) {
	var item func(int) string
	if batch {
		item = jobsItem
	}
	if err := s.checkSubmission(ctx, ps, item); err != nil {
		return nil, err
	}
	res, err := s.c.EnqueueMany(ctx, ps)
	if err != nil {
		return nil, err
	}
	now := s.now()
	for _, r := range res {
		if !r.Duplicate && r.Job != nil && !r.Job.RunAt.After(now) {
			s.wake.broadcast()
			break
		}
	}
	return res, nil
}

// traceContext is r's context carrying the trace context of its
// "traceparent" and "tracestate" headers (W3C Trace Context, or the
// client's core.Config.Propagator), so that a submission's enqueue spans,
// and the executions of its jobs, continue the caller's trace. It is r's
// context as it is when the client does not trace or the headers are
// absent or invalid.
func (s *Server) traceContext(r *http.Request) context.Context {
	return s.c.Tracing().Extract(r.Context(), propagation.HeaderCarrier(r.Header))
}

func (s *Server) submit(w http.ResponseWriter, r *http.Request) error {
	var req SubmitRequest
	if err := s.decodeBody(w, r, &req, true); err != nil {
		return err
	}
	idem, err := s.idempotencyKey(r, &req)
	if err != nil {
		return err
	}
	p, err := s.insertParams(&req, s.now(), CorrelationID(r.Context()), "")
	if err != nil {
		return err
	}
	res, err := s.enqueue(s.traceContext(r), []core.InsertParams{p}, false)
	if err != nil {
		return err
	}
	if idem {
		if err := checkIdempotentReplay(&p, res[0]); err != nil {
			return err
		}
	}
	status := http.StatusCreated
	if res[0].Duplicate {
		status = http.StatusOK
	}
	writeJSON(w, status, SubmitResponse{Job: s.apiJob(r.Context(), res[0].Job), Duplicate: res[0].Duplicate})
	return nil
}

// idempotencyKey applies an Idempotency-Key header to a submission and
// reports whether there was one: the key becomes the job's unique key
// (held IdempotencyWindow after the job finishes, or Config.MaxUniqueFor
// when that is shorter, unless unique_for_seconds says otherwise), so a
// retried submission returns the original job; a submission that reuses
// the key for another kind, queue or args is refused with 422
// idempotency-key-reused (checkIdempotentReplay). A body whose unique_key
// differs from the header is refused.
func (s *Server) idempotencyKey(r *http.Request, req *SubmitRequest) (bool, error) {
	keys := r.Header.Values("Idempotency-Key")
	if len(keys) == 0 {
		return false, nil
	}
	if len(keys) > 1 {
		return false, newProblem(SlugInvalidRequest, "Idempotency-Key is given more than once")
	}
	key := keys[0]
	if key == "" {
		return false, newProblem(SlugInvalidRequest, "Idempotency-Key is empty")
	}
	if req.UniqueKey != "" && req.UniqueKey != key {
		return false, newProblem(SlugInvalidRequest, "Idempotency-Key and unique_key differ: give one, or the same in both")
	}
	req.UniqueKey = key
	if req.UniqueForSeconds == nil {
		w := min(IdempotencyWindow, s.cfg.MaxUniqueFor).Seconds()
		req.UniqueForSeconds = &w
	}
	return true, nil
}

func (s *Server) submitBatch(w http.ResponseWriter, r *http.Request) error {
	if r.Header.Get("Idempotency-Key") != "" {
		return newProblem(SlugInvalidRequest, "Idempotency-Key applies to POST /v1/jobs; give each batch item its own unique_key (and unique_for_seconds)")
	}
	var req BatchRequest
	if err := s.decodeBody(w, r, &req, true); err != nil {
		return err
	}
	if len(req.Jobs) == 0 || len(req.Jobs) > MaxBatch {
		return newProblem(SlugInvalidRequest, fmt.Sprintf("jobs must hold 1..%d jobs, not %d", MaxBatch, len(req.Jobs)))
	}
	now, cid := s.now(), CorrelationID(r.Context())
	ps := make([]core.InsertParams, len(req.Jobs))
	for i := range req.Jobs {
		p, err := s.insertParams(&req.Jobs[i], now, cid, fmt.Sprintf("jobs[%d]: ", i))
		if err != nil {
			return err
		}
		ps[i] = p
	}
	res, err := s.enqueue(s.traceContext(r), ps, true)
	if err != nil {
		return err
	}
	out := BatchResponse{Results: make([]SubmitResponse, len(res))}
	for i, x := range res {
		out.Results[i] = SubmitResponse{Job: s.apiJob(r.Context(), x.Job), Duplicate: x.Duplicate}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// listParams parses GET /v1/jobs's query.
func listParams(q url.Values) (core.ListParams, error) {
	p := core.ListParams{Limit: 100}
	bad := func(format string, a ...any) (core.ListParams, error) {
		return core.ListParams{}, newProblem(SlugInvalidRequest, fmt.Sprintf(format, a...))
	}
	if v := q["queue"]; len(v) > 0 {
		if len(v) > 1 {
			return bad("queue may be given once")
		}
		p.Queue = v[0]
	}
	if v := q["kind"]; len(v) > 0 {
		if len(v) > 1 {
			return bad("kind may be given once")
		}
		p.Kind = v[0]
	}
	if v := q["args"]; len(v) > 0 {
		if len(v) > 1 {
			return bad("args may be given once")
		}
		if _, err := contract.ParseArgsPattern([]byte(v[0])); err != nil {
			return bad("%s", trimFilter(err))
		}
		p.ArgsContains = []byte(v[0])
	}
	for _, v := range q["state"] {
		for _, st := range strings.Split(v, ",") {
			st = strings.TrimSpace(st)
			if st == "" {
				continue
			}
			if !core.State(st).Valid() {
				return bad("state %q is not one of waiting, scheduled, available, running, retryable, completed, cancelled, discarded", st)
			}
			p.States = append(p.States, core.State(st))
		}
	}
	if v := q["workflow_id"]; len(v) > 0 {
		n, ok := parseDecimal(v[0], 1, math.MaxInt64)
		if len(v) > 1 || !ok {
			return bad("workflow_id may be given once, a positive integer in canonical decimal, not %q", clip(v[0]))
		}
		p.WorkflowID = n
	}
	if v := q.Get("after"); v != "" {
		n, ok := parseDecimal(v, 0, math.MaxInt64)
		if !ok {
			return bad("after must be a job id (a non-negative integer in canonical decimal), not %q", clip(v))
		}
		p.AfterID = n
	}
	if v := q.Get("limit"); v != "" {
		n, ok := parseDecimal(v, 1, MaxClaimLimit)
		if !ok {
			return bad("limit must be an integer from 1 to %d in canonical decimal, not %q", MaxClaimLimit, clip(v))
		}
		p.Limit = int(n)
	}
	switch v := q.Get("order"); v {
	case "", "asc":
	case "desc":
		p.Desc = true
	default:
		return bad("order must be asc or desc, not %q", v)
	}
	switch v := q.Get("sort"); v {
	case "", "id":
	case "run_at":
		p.ByRunAt = true
	default:
		return bad("sort must be id or run_at, not %q", v)
	}
	if v := q.Get("after_run_at"); v != "" {
		t, err := parseTime(v)
		switch {
		case !p.ByRunAt || p.AfterID == 0:
			return bad("after_run_at goes with sort=run_at and after (the next_after_run_at and next_after of the previous page)")
		case err != nil:
			return bad("after_run_at must be an RFC 3339 time, not %q", v)
		}
		p.AfterRunAt = t.UTC()
	} else if p.ByRunAt && p.AfterID != 0 {
		return bad("sort=run_at with after needs after_run_at (the next_after_run_at of the previous page)")
	}
	return p, nil
}

// listJobs answers one page of GET /v1/jobs. The page ends after limit
// jobs or once the args and results of its jobs reach MaxPageBytes
// (always at least one job), and it carries next_after unless the store
// had no more jobs. It reads the page with one store read (readPage),
// holding one of the MaxHeavyRequests slots, and only then writes it, job
// by job as each is encoded: a read that fails or runs out of time is
// answered with a problem, never with part of a page.
//
// The read must end within listReadShare of Config.WriteTimeout, leaving
// the rest for writing: a read that takes longer is answered 503
// unavailable with Retry-After. A page that cannot be written whole (the
// client reads too slowly for the write deadline, or went away) is
// aborted (http.ErrAbortHandler): the connection is closed without the
// end of the body, so the client sees an unexpected EOF, never a body
// that ends as if the page were complete.
func (s *Server) listJobs(w http.ResponseWriter, r *http.Request) error {
	p, err := listParams(r.URL.Query())
	if err != nil {
		return err
	}
	archived, err := archivedParam(r.URL.Query())
	if err != nil {
		return err
	}
	if _, ok := s.st.(contract.Dependencies); p.WorkflowID != 0 && !ok {
		return fmt.Errorf("backlog: workflow_id: %w (the store does not implement contract.Dependencies)", core.ErrUnsupported)
	}
	ctx := r.Context()
	readCtx, cancel := s.listReadContext(ctx)
	defer cancel()
	if err := s.heavy.acquire(readCtx); err != nil {
		return s.listReadError(ctx, err)
	}
	defer s.heavy.release()

	var jobs []*core.Job
	if archived {
		jobs, err = s.readArchivedPage(readCtx, p)
	} else {
		jobs, err = s.readPage(readCtx, p)
	}
	if err != nil {
		return s.listReadError(ctx, err)
	}
	size := 0
	for _, j := range jobs {
		size += storekit.JobWeight(j)
	}
	more := len(jobs) >= p.Limit || size >= s.cfg.MaxPageBytes

	var (
		fw        = &failWriter{ResponseWriter: w}
		out       = newJobStream(fw)
		last      int64
		lastRunAt time.Time
		n         int // jobs on the page
	)
	for i, j := range jobs {
		aj := s.apiJob(ctx, j)
		aj.Archived = archived
		if err := out.add(aj); err != nil {
			if fw.err != nil {
				break // the connection failed: aborted below
			}
			err = fmt.Errorf("job %d cannot be encoded (run `backlog migrate` to repair stored times): %w", j.ID, err)
			if n == 0 {
				writeEncodeFailure(w, err)
				return nil
			}
			reqFrom(ctx).log.Error("backlog http: a job of a list page cannot be encoded; ending the page before it", "job_id", j.ID, "err", err)
			more = true
			break
		}
		jobs[i] = nil // written: let it go
		n++
		last, lastRunAt = j.ID, j.RunAt
	}
	if !more || n == 0 {
		last = 0
	}
	var afterRunAt *time.Time
	if p.ByRunAt {
		afterRunAt = &lastRunAt
	}
	if fw.err == nil {
		out.end(last, afterRunAt)
	}
	if fw.err == nil {
		// Push the end out now, so a connection that cannot take it
		// fails here rather than after the handler returned.
		if err := http.NewResponseController(fw.ResponseWriter).Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
			fw.err = err
		}
	}
	if fw.err != nil {
		reqFrom(ctx).log.Warn("backlog http: a list page could not be written whole (the client reads too slowly for the write deadline, or went away); aborting its connection", "jobs_written", n, "err", fw.err)
		panic(http.ErrAbortHandler)
	}
	return nil
}

// listReadShare is the share of Config.WriteTimeout within which a list
// page must have been read from the store; the rest is left for writing
// it (8 MiB, the default MaxPageBytes, in 15 s of the default 60 s).
const listReadShare = 0.75

// listReadContext returns ctx ended listReadShare of WriteTimeout from
// now (ctx itself when there is no write timeout).
func (s *Server) listReadContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.cfg.WriteTimeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, s.listReadTime())
}

func (s *Server) listReadTime() time.Duration {
	return time.Duration(float64(s.cfg.WriteTimeout) * listReadShare)
}

// listReadError turns a failed read of a list page into its answer: a
// read that ran out of its time (listReadContext) while the request is
// still open becomes 503 unavailable with Retry-After, saying so.
func (s *Server) listReadError(ctx context.Context, err error) error {
	if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return newProblem(SlugUnavailable, fmt.Sprintf(
			"the page could not be read within %s (%.0f%% of the server's write timeout); retry later, narrow the filter or ask for a smaller limit",
			s.listReadTime().Round(time.Millisecond), listReadShare*100))
	}
	return err
}

// archivedParam reads the archived query parameter of GET /v1/jobs:
// true lists the archive of finished jobs (core.Retention.Archive)
// instead of the jobs; absent or false, the jobs.
func archivedParam(q url.Values) (bool, error) {
	v := q["archived"]
	if len(v) == 0 {
		return false, nil
	}
	if len(v) > 1 {
		return false, newProblem(SlugInvalidRequest, "archived may be given once")
	}
	switch v[0] {
	case "true":
		return true, nil
	case "false", "":
		return false, nil
	}
	return false, newProblem(SlugInvalidRequest, fmt.Sprintf("archived must be true or false, not %q", clip(v[0])))
}

// readArchivedPage reads one page of the archive through the client
// (core.Client.ListArchivedJobs) and cuts it at MaxPageBytes as readPage
// does; a store without an archive is an error wrapping
// core.ErrUnsupported (501 not-supported).
func (s *Server) readArchivedPage(ctx context.Context, p core.ListParams) ([]*core.Job, error) {
	jobs, err := s.c.ListArchivedJobs(ctx, p)
	if err != nil {
		return nil, err
	}
	return storekit.CutPage(jobs, s.cfg.MaxPageBytes), nil
}

// readPage reads one list page: with a store that is a contract.PageLister,
// one ListPage bounded by MaxPageBytes; with another store, List in
// chunks sized for the largest job (chunkSize) until p.Limit jobs or
// MaxPageBytes. The jobs weigh less than MaxPageBytes plus one job.
func (s *Server) readPage(ctx context.Context, p core.ListParams) ([]*core.Job, error) {
	if pl, ok := s.st.(contract.PageLister); ok {
		return pl.ListPage(ctx, p, s.cfg.MaxPageBytes)
	}
	var out []*core.Job
	size := 0
	for len(out) < p.Limit && size < s.cfg.MaxPageBytes {
		want := s.chunkSize(p.Limit-len(out), size)
		q := p
		q.Limit = want
		if len(out) > 0 {
			last := out[len(out)-1]
			q.AfterID, q.AfterRunAt = last.ID, last.RunAt
		}
		jobs, err := s.st.List(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, j := range storekit.CutPage(jobs, s.cfg.MaxPageBytes-size) {
			out = append(out, j)
			size += storekit.JobWeight(j)
		}
		if len(jobs) < want {
			break
		}
	}
	return out, nil
}

// failWriter remembers the first error writing the answer.
type failWriter struct {
	http.ResponseWriter
	err error
}

func (w *failWriter) Write(b []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	n, err := w.ResponseWriter.Write(b)
	if err != nil {
		w.err = err
	}
	return n, err
}

// Unwrap gives http.ResponseController the underlying writer.
func (w *failWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// jobID parses the {id} path value.
func jobID(r *http.Request) (int64, error) {
	v := r.PathValue("id")
	id, ok := parseDecimal(v, 1, math.MaxInt64)
	if !ok {
		return 0, newProblem(SlugInvalidRequest, fmt.Sprintf("job id must be a positive integer in canonical decimal, not %q", clip(v)))
	}
	return id, nil
}

// notFound turns a store's ErrNotFound for job id into the problem.
func notFound(id int64, err error) error {
	if errors.Is(err, core.ErrNotFound) {
		return newProblem(SlugJobNotFound, fmt.Sprintf("job %d does not exist", id))
	}
	return err
}

func (s *Server) getJob(w http.ResponseWriter, r *http.Request) error {
	id, err := jobID(r)
	if err != nil {
		return err
	}
	if wait, has, err := jobWait(r.URL.Query()); err != nil || has {
		if err != nil {
			return err
		}
		return s.waitJob(w, r, id, wait) // a long-poll (wait.go)
	}
	j, archived, err := s.c.FindJob(r.Context(), id)
	if err != nil {
		return notFound(id, err)
	}
	aj := s.apiJob(r.Context(), j)
	aj.Archived = archived
	writeJSON(w, http.StatusOK, JobResponse{Job: aj})
	return nil
}

func (s *Server) cancelJob(w http.ResponseWriter, r *http.Request) error {
	id, err := jobID(r)
	if err != nil {
		return err
	}
	j, err := s.c.CancelJob(r.Context(), id)
	if err != nil {
		if errors.Is(err, core.ErrInvalidState) {
			return newProblem(SlugInvalidState, fmt.Sprintf("job %d is already in a final state", id))
		}
		return notFound(id, err)
	}
	writeJSON(w, http.StatusOK, JobResponse{Job: s.apiJob(r.Context(), j)})
	return nil
}

func (s *Server) retryJob(w http.ResponseWriter, r *http.Request) error {
	id, err := jobID(r)
	if err != nil {
		return err
	}
	j, err := s.c.RetryJob(r.Context(), id)
	if err != nil {
		if errors.Is(err, core.ErrInvalidState) {
			return newProblem(SlugInvalidState, fmt.Sprintf("job %d cannot be retried now (running, or its unique key is held by another live job): %v", id, err))
		}
		return notFound(id, err)
	}
	s.wake.broadcast()
	writeJSON(w, http.StatusOK, JobResponse{Job: s.apiJob(r.Context(), j)})
	return nil
}

func (s *Server) deleteJob(w http.ResponseWriter, r *http.Request) error {
	id, err := jobID(r)
	if err != nil {
		return err
	}
	if err := s.c.DeleteJob(r.Context(), id); err != nil {
		if errors.Is(err, core.ErrInvalidState) {
			return newProblem(SlugInvalidState, fmt.Sprintf("job %d is running; cancel it first", id))
		}
		return notFound(id, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// QueueInfo is one queue's entry in GET /v1/queues: its paused flag and
// job count per state (every state present, zero when empty).
type QueueInfo struct {
	Queue  string             `json:"queue"`
	Paused bool               `json:"paused"`
	Counts map[core.State]int `json:"counts"`
}

func toQueue(q core.QueueStats) QueueInfo {
	counts := make(map[core.State]int, len(core.AllStates))
	for _, st := range core.AllStates {
		counts[st] = q.Counts[st]
	}
	return QueueInfo{Queue: q.Queue, Paused: q.Paused, Counts: counts}
}

// queueName parses the {name} path value.
func queueName(r *http.Request) (string, error) {
	name := r.PathValue("name")
	if err := contract.ValidateQueueName(name); err != nil {
		return "", newProblem(SlugInvalidRequest, trimInvalid(err.Error()))
	}
	return name, nil
}

func (s *Server) pauseQueue(w http.ResponseWriter, r *http.Request) error {
	name, err := queueName(r)
	if err != nil {
		return err
	}
	if err := s.checkQueueKnown(r, name); err != nil {
		return err
	}
	if err := s.c.PauseQueue(r.Context(), name); err != nil {
		return err
	}
	return s.writeQueue(w, r, name)
}

func (s *Server) resumeQueue(w http.ResponseWriter, r *http.Request) error {
	name, err := queueName(r)
	if err != nil {
		return err
	}
	if err := s.checkQueueKnown(r, name); err != nil {
		return err
	}
	if err := s.c.ResumeQueue(r.Context(), name); err != nil {
		return err
	}
	s.wake.broadcast()
	return s.writeQueue(w, r, name)
}

// QueueLimitsResponse answers GET and PUT /v1/queues/{name}/limits: the
// queue's cluster-wide limits and claim policy as stored (zero fields:
// none), and the rate-limited groups whose jobs wait for their next
// start (absent when none waits).
type QueueLimitsResponse struct {
	Queue     string           `json:"queue"`
	Limits    core.QueueLimits `json:"limits"`
	RateWaits []core.RateWait  `json:"rate_waits,omitempty"`
}

func (s *Server) getQueueLimits(w http.ResponseWriter, r *http.Request) error {
	name, err := queueName(r)
	if err != nil {
		return err
	}
	l, err := s.c.QueueLimits(r.Context(), name)
	if err != nil {
		return err
	}
	waits, err := s.c.RateWaits(r.Context(), name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, QueueLimitsResponse{Queue: name, Limits: l, RateWaits: waits})
	return nil
}

// setQueueLimits replaces the queue's limits with the body (a
// core.QueueLimits; {} lifts them all) and answers them read back.
func (s *Server) setQueueLimits(w http.ResponseWriter, r *http.Request) error {
	name, err := queueName(r)
	if err != nil {
		return err
	}
	var l core.QueueLimits
	if err := s.decodeBody(w, r, &l, true); err != nil {
		return err
	}
	if err := l.Validate(); err != nil {
		return newProblem(SlugInvalidRequest, trimInvalid(err.Error()))
	}
	if err := s.c.SetQueueLimits(r.Context(), name, l); err != nil {
		return err
	}
	s.wake.broadcast() // raised limits may let waiting jobs run
	return s.getQueueLimits(w, r)
}

// writeQueue answers {"queue": <entry>} for name, read back from Stats.
func (s *Server) writeQueue(w http.ResponseWriter, r *http.Request, name string) error {
	stats, err := s.stats.FreshStats(r.Context())
	if err != nil {
		return err
	}
	q := core.QueueStats{Queue: name}
	for _, x := range stats {
		if x.Queue == name {
			q = x
		}
	}
	writeJSON(w, http.StatusOK, struct {
		Queue QueueInfo `json:"queue"`
	}{toQueue(q)})
	return nil
}
