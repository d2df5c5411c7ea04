package client

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"

	"github.com/backlogq/backlog/core"
)

// ProblemTypeBase prefixes every problem type the server sends; the rest is
// the slug ("job-not-found", "lease-lost", …).
const ProblemTypeBase = "https://backlog.dev/problems/"

// Sentinels for the problem types that have no core counterpart. A
// *Problem matches them (and the core sentinels listed at Problem.Is) with
// errors.Is.
var (
	// ErrUnauthorized: 401 unauthorized, the token is missing or unknown.
	ErrUnauthorized = errors.New("backlog api: unauthorized")
	// ErrForbidden: 403 forbidden, the token's role may not call this, or
	// the worker id is bound to another credential (per-worker tokens).
	ErrForbidden = errors.New("backlog api: forbidden")
	// ErrWorkerNotRegistered: 404 worker-not-registered, a heartbeat or
	// claim for a worker id with no record (never registered, or declared
	// dead); register again.
	ErrWorkerNotRegistered = errors.New("backlog api: worker not registered")
	// ErrUnavailable: 503 unavailable (the server's store failed and
	// nothing was done), 429 too-many-requests (the server was answering
	// as many list pages and claims as it allows; nothing was done), or a
	// 502/503/504 from a proxy in between.
	ErrUnavailable = errors.New("backlog api: unavailable")
	// ErrInvalidRequest: 400 invalid-request, wrong JSON types, unknown
	// fields, bad query parameters, missing fields, a result too large.
	ErrInvalidRequest = errors.New("backlog api: invalid request")
	// ErrInvalidJSON: 400 invalid-json, the body was not JSON.
	ErrInvalidJSON = errors.New("backlog api: invalid JSON")
	// ErrInvalidLeaseToken: 400 invalid-lease-token, a lease token that
	// does not parse or names another job.
	ErrInvalidLeaseToken = errors.New("backlog api: invalid lease token")
	// ErrBodyTooLarge: 413 body-too-large.
	ErrBodyTooLarge = errors.New("backlog api: request body too large")
	// ErrUnsupportedMediaType: 415 unsupported-media-type.
	ErrUnsupportedMediaType = errors.New("backlog api: unsupported media type")
	// ErrRouteNotFound: 404 not-found, the server knows no such route (an
	// older server, or a base URL with a wrong path).
	ErrRouteNotFound = errors.New("backlog api: no such route")
	// ErrMethodNotAllowed: 405 method-not-allowed.
	ErrMethodNotAllowed = errors.New("backlog api: method not allowed")
	// ErrInternal: 500 internal, a server failure logged under the
	// problem's correlation id.
	ErrInternal = errors.New("backlog api: internal server error")
	// ErrIdempotencyKeyReused: 422 idempotency-key-reused, an
	// Idempotency-Key sent again with another kind, queue or args than
	// the submission that took it; nothing was inserted.
	ErrIdempotencyKeyReused = errors.New("backlog api: idempotency key reused with another request")
)

// Problem is an error response of the API (RFC 9457 problem+json). Every
// method of Client returns a *Problem (possibly wrapped) for a response
// with status ≥ 400; responses that are not problem+json (a proxy's HTML
// page) become a Problem with an empty Type and the status.
type Problem struct {
	Type          string `json:"type"`   // https://backlog.dev/problems/<slug>, or "" when the response was no problem+json
	Title         string `json:"title"`  // short summary
	Status        int    `json:"status"` // HTTP status
	Detail        string `json:"detail,omitempty"`
	Instance      string `json:"instance,omitempty"`       // the request path
	CorrelationID string `json:"correlation_id,omitempty"` // also in the X-Correlation-Id response header
	// Method and URL name the request that failed (not part of the body).
	Method string `json:"-"`
	URL    string `json:"-"`
}

// Slug returns the last part of Type ("job-not-found"), or "" when the
// response was no problem+json.
func (p *Problem) Slug() string {
	return strings.TrimPrefix(p.Type, ProblemTypeBase)
}

// Error reads "backlog api: GET /v1/jobs/7: 404 job-not-found: job 7 not
// found (correlation id 3f…)".
func (p *Problem) Error() string {
	var b strings.Builder
	b.WriteString("backlog api: ")
	if p.Method != "" {
		b.WriteString(p.Method + " " + p.Instance + ": ")
	}
	fmt.Fprintf(&b, "%d", p.Status)
	if s := p.Slug(); s != "" {
		b.WriteString(" " + s)
	} else if p.Title != "" {
		b.WriteString(" " + p.Title)
	}
	if p.Detail != "" {
		b.WriteString(": " + p.Detail)
	}
	if p.CorrelationID != "" {
		b.WriteString(" (correlation id " + p.CorrelationID + ")")
	}
	return b.String()
}

// Is maps problem types to sentinels: job-not-found and
// unique-hold-not-found → core.ErrNotFound,
// lease-lost → core.ErrLeaseLost, invalid-job → core.ErrInvalidJob,
// invalid-state → core.ErrInvalidState, unknown-kind (422, a kind no
// handler or registered worker handles) → core.ErrUnknownKind,
// periodic-not-found → core.ErrUnknownPeriodic, not-supported (501, the
// server's store lacks the capability) → core.ErrUnsupported, and the
// others to this package's Err… variables. A response that was no problem+json matches by status:
// 401 ErrUnauthorized, 403 ErrForbidden, 502/503/504 ErrUnavailable.
func (p *Problem) Is(target error) bool {
	if target == nil {
		return false
	}
	if s := p.sentinel(); s != nil {
		return s == target
	}
	return false
}

func (p *Problem) sentinel() error {
	switch p.Slug() {
	case "job-not-found", "unique-hold-not-found", "workflow-not-found":
		return core.ErrNotFound
	case "idempotency-key-reused":
		return ErrIdempotencyKeyReused
	case "lease-lost":
		return core.ErrLeaseLost
	case "invalid-job":
		return core.ErrInvalidJob
	case "invalid-state":
		return core.ErrInvalidState
	case "unknown-kind":
		return core.ErrUnknownKind
	case "periodic-not-found":
		return core.ErrUnknownPeriodic
	case "not-supported":
		return core.ErrUnsupported
	case "unauthorized":
		return ErrUnauthorized
	case "forbidden":
		return ErrForbidden
	case "worker-not-registered":
		return ErrWorkerNotRegistered
	case "unavailable", "too-many-requests":
		return ErrUnavailable
	case "invalid-request":
		return ErrInvalidRequest
	case "invalid-json":
		return ErrInvalidJSON
	case "invalid-lease-token":
		return ErrInvalidLeaseToken
	case "body-too-large":
		return ErrBodyTooLarge
	case "unsupported-media-type":
		return ErrUnsupportedMediaType
	case "not-found":
		return ErrRouteNotFound
	case "method-not-allowed":
		return ErrMethodNotAllowed
	case "internal":
		return ErrInternal
	case "":
		switch p.Status {
		case http.StatusUnauthorized:
			return ErrUnauthorized
		case http.StatusForbidden:
			return ErrForbidden
		case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return ErrUnavailable
		case http.StatusInternalServerError:
			return ErrInternal
		}
	}
	return nil
}

// TransportError is a request that got no HTTP response: connection
// refused, reset, timed out, DNS failure. Sent reports whether the request
// may have reached the server (false only when the connection could not be
// made, so nothing was done).
type TransportError struct {
	Method, URL string
	Sent        bool
	Err         error
}

// Error reads "backlog api: POST http://host/v1/jobs: <cause>".
func (e *TransportError) Error() string {
	return fmt.Sprintf("backlog api: %s %s: %v", e.Method, e.URL, e.Err)
}

// Unwrap returns the transport's error.
func (e *TransportError) Unwrap() error { return e.Err }

// Is makes a TransportError match ErrUnavailable: the server could not be
// reached.
func (e *TransportError) Is(target error) bool { return target == ErrUnavailable }

// IsRetryable reports whether err is a failure that may go away if the call
// is repeated: no response at all (a *TransportError), 503 unavailable,
// 429 too many requests, a 502/503/504 from a proxy, or 500 internal. It says nothing about whether
// repeating is safe: see the method docs of Client for which calls are
// retried automatically.
func IsRetryable(err error) bool {
	var te *TransportError
	if errors.As(err, &te) {
		return true
	}
	var p *Problem
	if errors.As(err, &p) {
		switch p.Status {
		case http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout, http.StatusTooManyRequests:
			return true
		}
	}
	return false
}

// notApplied reports whether err proves the server did nothing: the
// connection was never made, or the server said unavailable or too many
// requests (its contract: nothing was done).
func notApplied(err error) bool {
	var te *TransportError
	if errors.As(err, &te) {
		return !te.Sent
	}
	var p *Problem
	if errors.As(err, &p) {
		return p.Slug() == "unavailable" || p.Slug() == "too-many-requests"
	}
	return false
}

// dialFailed reports whether err happened while connecting, before any
// byte of the request was written.
func dialFailed(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}
