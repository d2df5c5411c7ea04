package httpapi

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"syscall"

	"github.com/backlogq/backlog/core"
)

// ProblemTypeBase prefixes every problem type URI: a problem's "type" is
// ProblemTypeBase + its slug (for example ".../problems/lease-lost").
const ProblemTypeBase = "https://backlog.dev/problems/"

// Problem slugs, the stable last segment of a problem's type URI.
const (
	SlugInvalidJSON          = "invalid-json"
	SlugInvalidRequest       = "invalid-request"
	SlugInvalidJob           = "invalid-job"
	SlugUnknownKind          = "unknown-kind"
	SlugQueueNotAllowed      = "queue-not-allowed"
	SlugTooManyQueues        = "too-many-queues"
	SlugBodyTooLarge         = "body-too-large"
	SlugUnsupportedMediaType = "unsupported-media-type"
	SlugUnauthorized         = "unauthorized"
	SlugForbidden            = "forbidden"
	SlugNotFound             = "not-found"
	SlugJobNotFound          = "job-not-found"
	SlugWorkerNotRegistered  = "worker-not-registered"
	SlugPeriodicNotFound     = "periodic-not-found"
	SlugMethodNotAllowed     = "method-not-allowed"
	SlugInvalidState         = "invalid-state"
	SlugLeaseLost            = "lease-lost"
	SlugInvalidLeaseToken    = "invalid-lease-token"
	SlugUnavailable          = "unavailable"
	SlugTooManyRequests      = "too-many-requests"
	SlugInternal             = "internal"
	SlugNotSupported         = "not-supported"
	// SlugIdempotencyKeyReused: an Idempotency-Key came back with another
	// kind, queue or args than the submission that took it (422).
	SlugIdempotencyKeyReused = "idempotency-key-reused"
	// SlugUniqueHoldNotFound: no hold on that unique key is held (404).
	SlugUniqueHoldNotFound = "unique-hold-not-found"
	// SlugWorkflowNotFound: no job has that workflow id, or the id is a
	// batch's where a workflow's is wanted, or the other way round (404).
	SlugWorkflowNotFound = "workflow-not-found"
)

// nameListMax is how many names nameList quotes.
const nameListMax = 5

// nameList quotes names for an error message, bounded however many there
// are: at most the first nameListMax, then how many more, e.g.
// ["a" "b" "c" "d" "e" and 995 more (1000 in all)].
func nameList(names []string) string {
	if len(names) <= nameListMax {
		return fmt.Sprintf("%q", names)
	}
	head := strings.TrimSuffix(fmt.Sprintf("%q", names[:nameListMax]), "]")
	return fmt.Sprintf("%s and %d more (%d in all)]", head, len(names)-nameListMax, len(names))
}

// problemInfo is a slug's status and title.
type problemInfo struct {
	status int
	title  string
}

var problems = map[string]problemInfo{
	SlugInvalidJSON:          {http.StatusBadRequest, "Request body is not valid JSON"},
	SlugInvalidRequest:       {http.StatusBadRequest, "Invalid request"},
	SlugInvalidJob:           {http.StatusUnprocessableEntity, "Invalid job"},
	SlugUnknownKind:          {http.StatusUnprocessableEntity, "Unknown job kind"},
	SlugQueueNotAllowed:      {http.StatusUnprocessableEntity, "Queue not allowed"},
	SlugTooManyQueues:        {http.StatusUnprocessableEntity, "Too many queues"},
	SlugBodyTooLarge:         {http.StatusRequestEntityTooLarge, "Request body too large"},
	SlugUnsupportedMediaType: {http.StatusUnsupportedMediaType, "Unsupported media type"},
	SlugUnauthorized:         {http.StatusUnauthorized, "Unauthorized"},
	SlugForbidden:            {http.StatusForbidden, "Forbidden"},
	SlugNotFound:             {http.StatusNotFound, "Not found"},
	SlugJobNotFound:          {http.StatusNotFound, "Job not found"},
	SlugWorkerNotRegistered:  {http.StatusNotFound, "Worker not registered"},
	SlugPeriodicNotFound:     {http.StatusNotFound, "Periodic job not found"},
	SlugMethodNotAllowed:     {http.StatusMethodNotAllowed, "Method not allowed"},
	SlugInvalidState:         {http.StatusConflict, "Job state does not permit this"},
	SlugLeaseLost:            {http.StatusConflict, "Lease lost"},
	SlugInvalidLeaseToken:    {http.StatusBadRequest, "Invalid lease token"},
	SlugUnavailable:          {http.StatusServiceUnavailable, "Store unavailable"},
	SlugTooManyRequests:      {http.StatusTooManyRequests, "Too many requests"},
	SlugInternal:             {http.StatusInternalServerError, "Internal server error"},
	SlugNotSupported:         {http.StatusNotImplemented, "Not supported by this server's store"},
	SlugIdempotencyKeyReused: {http.StatusUnprocessableEntity, "Idempotency key reused with another request"},
	SlugUniqueHoldNotFound:   {http.StatusNotFound, "Unique key not held"},
	SlugWorkflowNotFound:     {http.StatusNotFound, "Workflow or batch not found"},
}

// problem is an error that carries the problem a handler answers with.
// Handlers return it; writeError turns any error into one.
type problem struct {
	slug   string
	detail string
	cause  error // logged for 5xx, never shown
}

func (p *problem) Error() string { return p.slug + ": " + p.detail }

func newProblem(slug, detail string) *problem { return &problem{slug: slug, detail: detail} }

// ProblemDetails is the RFC 9457 problem document: the body of every
// error response, and the problem of an item of a batch of outcomes that
// did not apply. Type is ProblemTypeBase + a slug; Status is the HTTP
// status the problem has on its own; Instance is the request path.
type ProblemDetails struct {
	Type          string `json:"type"`
	Title         string `json:"title"`
	Status        int    `json:"status"`
	Detail        string `json:"detail,omitempty"`
	Instance      string `json:"instance,omitempty"`
	CorrelationID string `json:"correlation_id,omitempty"`
}

// problemBody is the document written for an error response.
type problemBody = ProblemDetails

// details returns p's document for the request with correlation id cid.
func (p *problem) details(instance, cid string) ProblemDetails {
	info, ok := problems[p.slug]
	if !ok {
		info = problems[SlugInternal]
	}
	return ProblemDetails{
		Type: ProblemTypeBase + p.slug, Title: info.title, Status: info.status,
		Detail: p.detail, Instance: instance, CorrelationID: cid,
	}
}

// classify maps an error from core or a store to a problem.
func classify(err error) *problem {
	var p *problem
	switch {
	case errors.As(err, &p):
		return p
	case errors.Is(err, core.ErrInvalidJob):
		return &problem{slug: SlugInvalidJob, detail: trimInvalid(err.Error())}
	case errors.Is(err, core.ErrInvalidFilter):
		return &problem{slug: SlugInvalidRequest, detail: trimFilter(err)}
	case errors.Is(err, core.ErrUnknownKind):
		return &problem{slug: SlugUnknownKind, detail: err.Error()}
	case errors.Is(err, core.ErrNotFound):
		return &problem{slug: SlugJobNotFound, detail: err.Error()}
	case errors.Is(err, core.ErrInvalidState):
		return &problem{slug: SlugInvalidState, detail: err.Error()}
	case errors.Is(err, core.ErrLeaseLost):
		return &problem{slug: SlugLeaseLost, detail: err.Error()}
	case errors.Is(err, core.ErrUnsupported):
		return &problem{slug: SlugNotSupported, detail: err.Error()}
	case unavailable(err):
		return &problem{slug: SlugUnavailable, detail: "the job store is unavailable; nothing was done, retry later", cause: err}
	}
	return &problem{slug: SlugInternal, detail: "internal error; see the server log for this correlation id", cause: err}
}

// trimInvalid drops the sentinel's "backlog: invalid job: " prefix from a
// validation message when it leads it, keeping any index prefix.
func trimInvalid(s string) string {
	return strings.Replace(s, core.ErrInvalidJob.Error()+": ", "", 1)
}

// unavailable reports whether err looks like the store (its database) is
// down or unreachable rather than a bug: a closed store, a dropped or
// refused connection, a timeout.
func unavailable(err error) bool {
	if errors.Is(err, core.ErrClosed) || errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return true
	}
	msg := strings.ToLower(err.Error())
	for _, s := range []string{
		"connection refused", "connection reset", "broken pipe", "bad connection", "database is closed",
		"closed pool", "conn closed", "connection closed", "database is locked", "too many connections",
		"server closed", "no such host", "i/o timeout", "the database system is shutting down",
		"the database system is starting up", "terminating connection", "invalid connection",
	} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// writeProblem writes p as application/problem+json and logs server errors.
func (s *Server) writeProblem(w http.ResponseWriter, r *http.Request, p *problem) {
	info, ok := problems[p.slug]
	if !ok {
		info = problems[SlugInternal]
		p = &problem{slug: SlugInternal, detail: p.detail, cause: p}
	}
	rc := reqFrom(r.Context())
	if info.status >= 500 && r.Context().Err() != nil {
		rc.log.Info("backlog http: request ended by the client", "method", r.Method, "path", r.URL.Path, "err", p.cause)
	} else if info.status >= 500 {
		attrs := []any{"method", r.Method, "path", r.URL.Path, "status", info.status, "problem", p.slug}
		if p.cause != nil {
			attrs = append(attrs, "err", p.cause)
		}
		rc.log.Error("backlog http: request failed", attrs...)
	}
	body := problemBody{
		Type: ProblemTypeBase + p.slug, Title: info.title, Status: info.status,
		Detail: p.detail, Instance: r.URL.Path, CorrelationID: rc.id,
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(body)
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	if p.slug == SlugUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="backlog"`)
	}
	if p.slug == SlugUnavailable || p.slug == SlugTooManyRequests {
		h.Set("Retry-After", "1")
	}
	w.WriteHeader(info.status)
	_, _ = w.Write(buf.Bytes())
}

// writeError writes any error as a problem.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	s.writeProblem(w, r, classify(err))
}

// writeJSON writes v as application/json with the given status. When v
// cannot be encoded (a stored time outside what JSON can write, say) it
// answers 500 problem+json instead, with the request's correlation id
// (read back from the X-Correlation-Id response header) and the reason, so
// the failure is never an empty answer.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		writeEncodeFailure(w, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// writeEncodeFailure answers a response that could not be encoded: 500
// problem+json carrying the correlation id of w's request and what failed.
func writeEncodeFailure(w http.ResponseWriter, err error) {
	cid := w.Header().Get("X-Correlation-Id")
	slog.Default().Error("backlog http: encode response", "correlation_id", cid, "err", err)
	info := problems[SlugInternal]
	body, _ := json.Marshal(problemBody{
		Type: ProblemTypeBase + SlugInternal, Title: info.title, Status: info.status,
		Detail:        "the answer could not be encoded as JSON: " + err.Error(),
		CorrelationID: cid,
	})
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(info.status)
	_, _ = w.Write(append(body, '\n'))
}
