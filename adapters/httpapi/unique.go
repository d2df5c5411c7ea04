package httpapi

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/backlogq/backlog/adapters/httpapi/apitypes"
	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
)

// DefaultMaxUniqueFor is Config.MaxUniqueFor's default: a submission may
// keep its unique key held for at most 30 days after its job finishes.
const DefaultMaxUniqueFor = 30 * 24 * time.Hour

// uniqueForOverLimit is the detail of a submission whose
// unique_for_seconds v is over the server's limit max.
func uniqueForOverLimit(v float64, max time.Duration) string {
	limit := max.String()
	if max%(24*time.Hour) == 0 {
		limit = strconv.Itoa(int(max/(24*time.Hour))) + " days"
	}
	return fmt.Sprintf("unique_for_seconds %s is over this server's limit of %s (%s): a key may stay held at most that long after its job finishes (backlog serve --max-unique-for)",
		strconv.FormatFloat(v, 'f', -1, 64), strconv.FormatFloat(max.Seconds(), 'f', -1, 64), limit)
}

// UniqueHold is one hold on a unique key, as GET /v1/unique lists it and
// DELETE /v1/unique/{key} returns it (apitypes.UniqueHold).
type UniqueHold = apitypes.UniqueHold

// UniqueHoldsResponse answers GET /v1/unique. NextAfter, when present, is
// the cursor of the next page (after=NextAfter); a page may be short, or
// empty, and still have one.
type UniqueHoldsResponse struct {
	Holds     []UniqueHold `json:"holds"`
	NextAfter string       `json:"next_after,omitempty"`
}

// UniqueHoldResponse answers DELETE /v1/unique/{key}: the hold released.
type UniqueHoldResponse struct {
	Hold UniqueHold `json:"hold"`
}

func toUniqueHold(h core.UniqueHold) UniqueHold { return apitypes.UniqueHoldFromCore(h) }

// uniqueHolder returns the store's contract.UniqueHolder, or a 501 problem.
func (s *Server) uniqueHolder() (contract.UniqueHolder, error) {
	u, ok := s.st.(contract.UniqueHolder)
	if !ok {
		return nil, newProblem(SlugNotSupported, "this server's store cannot list or release unique-key holds (contract.UniqueHolder)")
	}
	return u, nil
}

// listUniqueHolds serves GET /v1/unique?after=&limit=: the holds on
// unique keys held now, by scoped key.
func (s *Server) listUniqueHolds(w http.ResponseWriter, r *http.Request) error {
	u, err := s.uniqueHolder()
	if err != nil {
		return err
	}
	q := r.URL.Query()
	for name, v := range q {
		if name != "after" && name != "limit" {
			return newProblem(SlugInvalidRequest, fmt.Sprintf("unknown query parameter %q (after, limit)", name))
		}
		if len(v) > 1 {
			return newProblem(SlugInvalidRequest, name+" may be given once")
		}
	}
	p := contract.UniqueHoldsParams{Now: s.now(), After: q.Get("after"), Limit: 100}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > contract.MaxUniqueHoldsPage {
			return newProblem(SlugInvalidRequest, fmt.Sprintf("limit must be a number from 1 to %d, not %q", contract.MaxUniqueHoldsPage, v))
		}
		p.Limit = n
	}
	holds, next, err := u.UniqueHolds(r.Context(), p)
	if err != nil {
		return err
	}
	out := UniqueHoldsResponse{Holds: make([]UniqueHold, 0, len(holds)), NextAfter: next}
	for _, h := range holds {
		out.Holds = append(out.Holds, toUniqueHold(h))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// releaseUniqueHold serves DELETE /v1/unique/{key}?scope=&queue=&kind=:
// it ends the hold on the key in its scope (global by default; queue
// names the queue of the queue scope, kind the kind of the kind scope).
func (s *Server) releaseUniqueHold(w http.ResponseWriter, r *http.Request) error {
	u, err := s.uniqueHolder()
	if err != nil {
		return err
	}
	q := r.URL.Query()
	for name, v := range q {
		if name != "scope" && name != "queue" && name != "kind" {
			return newProblem(SlugInvalidRequest, fmt.Sprintf("unknown query parameter %q (scope, queue, kind)", name))
		}
		if len(v) > 1 {
			return newProblem(SlugInvalidRequest, name+" may be given once")
		}
	}
	sk, err := ScopedKeyOf(r.PathValue("key"), q.Get("scope"), q.Get("queue"), q.Get("kind"))
	if err != nil {
		return err
	}
	h, err := u.ReleaseUniqueHold(r.Context(), sk, s.now())
	switch {
	case errors.Is(err, core.ErrNotFound):
		return newProblem(SlugUniqueHoldNotFound, fmt.Sprintf("no hold on %q is held now", sk))
	case errors.Is(err, core.ErrInvalidState):
		return newProblem(SlugInvalidState, fmt.Sprintf("the job holding %q has not finished: cancel it first (a live job keeps its key)", sk))
	case err != nil:
		return err
	}
	reqFrom(r.Context()).log.Info("backlog http: unique-key hold released", "scoped_key", sk, "job_id", h.JobID)
	writeJSON(w, http.StatusOK, UniqueHoldResponse{Hold: toUniqueHold(h)})
	return nil
}

// ScopedKeyOf returns the scoped key (contract.ScopedUniqueKey) of key in
// scope ("" or "global", "queue" with its queue, "kind" with its kind), or
// a 400 problem naming what is missing or out of place.
func ScopedKeyOf(key, scope, queue, kind string) (string, error) {
	if key == "" {
		return "", newProblem(SlugInvalidRequest, "the unique key is empty")
	}
	if len(key) > contract.MaxUniqueKeyLen {
		return "", newProblem(SlugInvalidRequest, fmt.Sprintf("the unique key is %d bytes, over the limit of %d", len(key), contract.MaxUniqueKeyLen))
	}
	sc, err := core.ParseUniqueScope(scope)
	if err != nil {
		return "", newProblem(SlugInvalidRequest, err.Error())
	}
	p := core.InsertParams{UniqueKey: key, UniqueScope: sc}
	switch sc {
	case core.UniqueQueue:
		if queue == "" || kind != "" {
			return "", newProblem(SlugInvalidRequest, "scope queue needs queue (and no kind)")
		}
		p.Queue = queue
	case core.UniqueKind:
		if kind == "" || queue != "" {
			return "", newProblem(SlugInvalidRequest, "scope kind needs kind (and no queue)")
		}
		p.Kind = kind
	default:
		if queue != "" || kind != "" {
			return "", newProblem(SlugInvalidRequest, "a global key takes no queue or kind (give scope=queue or scope=kind)")
		}
	}
	return contract.ScopedUniqueKey(&p), nil
}

// fingerprintVersion prefixes every submission fingerprint, so that a
// later change of what is hashed never matches an older hash by chance.
const fingerprintVersion = "v1:"

// submissionFingerprint returns the fingerprint of a keyed submission,
// kept with its unique-key hold (core.InsertParams.UniqueFingerprint):
// "v1:" and the hex SHA-256 of its kind, queue and args, the args in a
// canonical form (object keys sorted, no insignificant space, numbers as
// written), each part preceded by its length. p is the validated insert,
// before its args are sealed.
func submissionFingerprint(p *core.InsertParams) string {
	args := canonicalJSON(p.Args)
	h := sha256.New()
	for _, part := range [][]byte{[]byte(p.Kind), []byte(p.Queue), args} {
		fmt.Fprintf(h, "%d:", len(part))
		h.Write(part)
	}
	return fingerprintVersion + hex.EncodeToString(h.Sum(nil))
}

// canonicalJSON is core.CanonicalJSON, b as it is when it does not
// decode (it was validated before, so this does not happen).
func canonicalJSON(b []byte) []byte {
	out, err := core.CanonicalJSON(b)
	if err != nil {
		return b
	}
	return out
}

// checkIdempotentReplay refuses a submission made with an Idempotency-Key
// that the store answered with a duplicate taken for another request: the
// holder's fingerprint differs from p's. For a hold without one (taken
// before holds kept fingerprints, or by a Go program), only what the hold
// is sure of is compared: the queue, and the kind when the holder's row is
// gone (a row's kind moves on with a continuation).
func checkIdempotentReplay(p *core.InsertParams, res core.InsertResult) error {
	if !res.Duplicate || res.Job == nil {
		return nil
	}
	j := res.Job
	var what string
	switch {
	case res.Fingerprint != "":
		if res.Fingerprint == p.UniqueFingerprint {
			return nil
		}
		what = "another kind, queue or args"
	case j.Queue != p.Queue:
		what = fmt.Sprintf("queue %q (this request: %q)", j.Queue, p.Queue)
	case j.State == "" && j.Kind != p.Kind:
		what = fmt.Sprintf("kind %q (this request: %q)", j.Kind, p.Kind)
	default:
		return nil
	}
	return newProblem(SlugIdempotencyKeyReused, fmt.Sprintf(
		"Idempotency-Key %q was taken by job %d for a request with %s: a retry must repeat the request as it was; use a new key for a new request", p.UniqueKey, j.ID, what))
}
