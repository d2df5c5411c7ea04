package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
)

// CompleteRequest is the body of POST /v1/jobs/{id}/complete.
type CompleteRequest struct {
	LeaseToken string          `json:"lease_token"`
	Result     json.RawMessage `json:"result,omitempty"` // any JSON; absent or null means none
}

// FailRequest is the body of POST /v1/jobs/{id}/fail.
type FailRequest struct {
	LeaseToken     string   `json:"lease_token"`
	Error          string   `json:"error"` // required
	Trace          string   `json:"trace,omitempty"`
	Action         string   `json:"action,omitempty"`           // retry (default), discard, cancel
	RetryInSeconds *float64 `json:"retry_in_seconds,omitempty"` // overrides the retry policy's delay
	Cause          string   `json:"cause,omitempty"`            // the attempt's cause (see WorkerCause); absent means handler_error
}

// SnoozeRequest is the body of POST /v1/jobs/{id}/snooze.
type SnoozeRequest struct {
	LeaseToken   string   `json:"lease_token"`
	DelaySeconds *float64 `json:"delay_seconds,omitempty"` // default 0
	// HandBack, when set, says the worker stopped the handler and hands
	// the job back unrun for this cause: the job is due again now, uses
	// no attempt, and its history gets an entry saying why (core.HandBack),
	// as in process. The one cause a worker may give is
	// core.CauseLeaseUnrenewed (it could not renew the lease before it
	// ran out). It goes without delay_seconds.
	HandBack string `json:"hand_back,omitempty"`
}

// ContinueRequest is the body of POST /v1/jobs/{id}/continue: the job
// moves on to its next step, as core.Continue does in process (same id and
// error history, attempts restarted). Kind and Args are checked as the
// engine checks a continuation (kind 1..255 bytes of UTF-8, args a JSON
// value in UTF-8 within the args limit, absent args included, run_at
// within the supported range): an invalid one fails the attempt, as in
// process, instead of being refused.
type ContinueRequest struct {
	LeaseToken string          `json:"lease_token"`
	Kind       string          `json:"kind"`             // the next step's kind
	Args       json.RawMessage `json:"args"`             // the next step's args: any JSON value
	RunAt      *time.Time      `json:"run_at,omitempty"` // RFC 3339; absent means now
}

// LeaseRequest is the body of POST /v1/jobs/{id}/lease.
type LeaseRequest struct {
	LeaseToken    string   `json:"lease_token"`
	ExtendSeconds *float64 `json:"extend_seconds,omitempty"` // default the lease duration, at most 3600
}

// LeaseResponse answers POST /v1/jobs/{id}/lease.
type LeaseResponse struct {
	LeaseUntil time.Time `json:"lease_until"`
}

// held checks the token against the path's job and the job's current
// holder, returning the token and the running job. A token that does not
// parse or names another job is invalid-lease-token; one this server did
// not sign, or a job no longer held under that claim (or gone), is
// lease-lost; a token of a worker bound to another credential is
// forbidden. Only a verified token reaches the store.
func (s *Server) held(ctx context.Context, r *http.Request, token string) (leaseToken, *core.Job, error) {
	id, err := jobID(r)
	if err != nil {
		return leaseToken{}, nil, err
	}
	tok, err := decodeLeaseToken(token)
	if err != nil {
		return leaseToken{}, nil, err
	}
	if tok.jobID != id {
		return leaseToken{}, nil, newProblem(SlugInvalidLeaseToken, fmt.Sprintf("lease_token is for job %d, not job %d", tok.jobID, id))
	}
	if err := s.checkToken(ctx, tok); err != nil {
		return leaseToken{}, nil, err
	}
	j, err := s.c.GetJob(ctx, id)
	if errors.Is(err, core.ErrNotFound) {
		s.claims.take(tok.jobID, tok.claimSeq)
		return tok, nil, newProblem(SlugLeaseLost, fmt.Sprintf("job %d no longer exists", id))
	}
	if err != nil {
		return tok, nil, err
	}
	if !heldBy(j, tok) {
		s.claims.take(tok.jobID, tok.claimSeq)
		s.c.Emit(core.Event{Kind: core.EventLeaseLost, At: s.now(), Queue: j.Queue, Job: j})
		return tok, nil, lostProblem(j)
	}
	return tok, j, nil
}

// heldBy reports whether j is running under tok's fence.
func heldBy(j *core.Job, tok leaseToken) bool {
	return j.State == core.StateRunning && j.WorkerID == tok.workerID && j.ClaimSeq == tok.claimSeq
}

func lostProblem(j *core.Job) error {
	return newProblem(SlugLeaseLost, fmt.Sprintf("job %d is no longer held under this lease token (now %s, attempt %d); nothing changed", j.ID, j.State, j.Attempt))
}

// answer reports rep (an attempt of j, the running job as read) to the
// engine (core.RemoteWorkers.Report: decided, sealed, applied, reported to
// observers) and answers with the job as it is after; a failed fence is
// lease-lost.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, j *core.Job, rep core.Report) error {
	ctx := r.Context()
	rep.Job = j
	res, err := s.rw.Report(ctx, s.now(), []core.Report{rep})
	if err != nil {
		return err
	}
	s.claims.take(j.ID, j.ClaimSeq)
	if !res[0].Applied {
		return lostProblem(j)
	}
	o := res[0].Decision.Outcome
	if wakes(o) {
		s.wake.broadcast()
	}
	var after *core.Job
	if !o.Delete {
		after, err = s.c.GetJob(ctx, j.ID)
		if errors.Is(err, core.ErrNotFound) {
			after, err = nil, nil
		}
		if err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, JobResponse{Job: s.apiJob(ctx, after)})
	return nil
}

// wakes reports whether an applied outcome makes its job due at once
// (a retry, snooze or continuation to now), which should wake waiting
// claims.
func wakes(o contract.Outcome) bool {
	switch o.Kind {
	case contract.OutcomeRetry, contract.OutcomeSnooze, contract.OutcomeContinue:
		return !o.RunAt.After(o.At)
	}
	return false
}

// resultBytes checks a completion's result against the client's
// MaxResultBytes and that it is UTF-8 (as JSON text must be; the decoder
// does not check inside a raw value); JSON null means none.
func (s *Server) resultBytes(raw json.RawMessage) ([]byte, error) {
	result := []byte(raw)
	if string(result) == "null" {
		result = nil
	}
	if !utf8.Valid(result) {
		return nil, newProblem(SlugInvalidJSON, "result is not valid UTF-8 (JSON text must be UTF-8)")
	}
	limit := s.ccfg.MaxResultBytes
	if contract.IsSealed(result) {
		// Sealed by a worker holding keys: the limit of its plaintext.
		limit = core.SealedSize(limit)
	}
	if len(result) > limit {
		return nil, newProblem(SlugInvalidRequest, fmt.Sprintf("result is %d bytes, over the limit of %d", len(result), limit))
	}
	return result, nil
}

// checkFail checks a failure's fields and returns the retry delay that
// overrides the policy (nil for none).
func checkFail(msg, action, cause string, retryIn *float64) (*time.Duration, error) {
	if msg == "" {
		return nil, newProblem(SlugInvalidRequest, "error is required: the failure's message")
	}
	switch action {
	case "", "retry", "discard", "cancel":
	default:
		return nil, newProblem(SlugInvalidRequest, fmt.Sprintf("action must be retry, discard or cancel, not %q", action))
	}
	if err := checkCause(cause); err != nil {
		return nil, err
	}
	if retryIn == nil {
		return nil, nil
	}
	if action != "" && action != "retry" {
		return nil, newProblem(SlugInvalidRequest, "retry_in_seconds applies only to action retry")
	}
	d, err := seconds("retry_in_seconds", *retryIn)
	if err != nil {
		return nil, err
	}
	return &d, nil
}

// WorkerCauses are the causes a remote worker may report with a failure
// (the cause field of POST /v1/jobs/{id}/fail and of a fail item of POST
// /v1/workers/{id}/outcomes): what core.CauseOf finds in a handler's
// error where the handler ran. Absent means core.CauseHandlerError.
//
// The other causes core knows (core.KnownCause) are the server's to
// assign and are refused from a worker: the rescue and hand-back causes
// (lease_expired, worker_dead, claim_lost, lease_unrenewed,
// undeliverable), which never describe a failed attempt, and
// invalid_continue, which the server decides when it refuses a
// continuation (POST /v1/jobs/{id}/continue).
var WorkerCauses = []string{
	core.CauseHandlerError, core.CausePanic, core.CauseTimeout, core.CauseDeadline,
	core.CauseUnknownKind, core.CauseDecrypt, core.CauseShutdown,
}

// checkCause checks the cause a worker reported ("" for none).
func checkCause(cause string) error {
	if cause == "" || slices.Contains(WorkerCauses, cause) {
		return nil
	}
	allowed := strings.Join(WorkerCauses, ", ")
	if core.KnownCause(cause) {
		return newProblem(SlugInvalidRequest, fmt.Sprintf("cause %q is assigned by the server, never reported by a worker; a worker reports one of %s", cause, allowed))
	}
	return newProblem(SlugInvalidRequest, fmt.Sprintf("cause %q is not a known cause; a worker reports one of %s (absent means %s)", cause, allowed, core.CauseHandlerError))
}

// failVerdict is the verdict of a failure a remote worker reported
// (core.RemoteFailure): its message, trace and cause ("" for
// core.CauseHandlerError), its action (retry, the default; discard;
// cancel) and the delay it asked for (nil for the kind's policy).
func failVerdict(msg, trace, cause, action string, retryIn *time.Duration) core.Verdict {
	kind := contract.OutcomeRetry
	switch action {
	case "discard":
		kind = contract.OutcomeDiscard
	case "cancel":
		kind = contract.OutcomeCancel
	}
	return core.RemoteFailure(msg, trace, cause, kind, retryIn)
}

// continueVerdict is the verdict of a continuation a remote worker
// reported; run_at absent means now.
func continueVerdict(kind string, args json.RawMessage, runAt *time.Time) core.Verdict {
	ct := &core.ContinueError{Kind: kind, Args: []byte(args)}
	if runAt != nil {
		ct.RunAt = *runAt
	}
	return core.Verdict{Kind: contract.OutcomeContinue, Err: ct, Next: ct}
}

// snoozeDelay checks a snooze's delay_seconds (absent means 0).
func snoozeDelay(v *float64) (time.Duration, error) {
	if v == nil {
		return 0, nil
	}
	return seconds("delay_seconds", *v)
}

func (s *Server) complete(w http.ResponseWriter, r *http.Request) error {
	var req CompleteRequest
	if err := s.decodeBody(w, r, &req, true); err != nil {
		return err
	}
	result, err := s.resultBytes(req.Result)
	if err != nil {
		return err
	}
	_, j, err := s.held(r.Context(), r, req.LeaseToken)
	if err != nil {
		return err
	}
	return s.answer(w, r, j, core.Report{Verdict: core.Verdict{Kind: contract.OutcomeComplete, Result: result}})
}

func (s *Server) fail(w http.ResponseWriter, r *http.Request) error {
	var req FailRequest
	if err := s.decodeBody(w, r, &req, true); err != nil {
		return err
	}
	override, err := checkFail(req.Error, req.Action, req.Cause, req.RetryInSeconds)
	if err != nil {
		return err
	}
	_, j, err := s.held(r.Context(), r, req.LeaseToken)
	if err != nil {
		return err
	}
	return s.answer(w, r, j, core.Report{Verdict: failVerdict(req.Error, req.Trace, req.Cause, req.Action, override)})
}

func (s *Server) snooze(w http.ResponseWriter, r *http.Request) error {
	var req SnoozeRequest
	if err := s.decodeBody(w, r, &req, true); err != nil {
		return err
	}
	if err := checkHandBack(req.HandBack, req.DelaySeconds); err != nil {
		return err
	}
	d, err := snoozeDelay(req.DelaySeconds)
	if err != nil {
		return err
	}
	_, j, err := s.held(r.Context(), r, req.LeaseToken)
	if err != nil {
		return err
	}
	return s.answer(w, r, j, core.Report{Verdict: core.Verdict{Kind: contract.OutcomeSnooze, Delay: d}, HandBack: req.HandBack})
}

// WorkerHandBacks are the hand-back causes a remote worker may give
// (hand_back of a snooze): core.CauseLeaseUnrenewed.
var WorkerHandBacks = []string{core.CauseLeaseUnrenewed}

// checkHandBack checks the hand_back of a snooze ("" for none).
func checkHandBack(cause string, delay *float64) error {
	switch {
	case cause == "":
		return nil
	case !slices.Contains(WorkerHandBacks, cause):
		return newProblem(SlugInvalidRequest, fmt.Sprintf("hand_back %q is not a cause a worker hands a job back for; it may be %s", cause, strings.Join(WorkerHandBacks, ", ")))
	case delay != nil:
		return newProblem(SlugInvalidRequest, "hand_back goes without delay_seconds: a job handed back is due again now")
	}
	return nil
}

func (s *Server) continueJob(w http.ResponseWriter, r *http.Request) error {
	var req ContinueRequest
	if err := s.decodeBody(w, r, &req, true); err != nil {
		return err
	}
	_, j, err := s.held(r.Context(), r, req.LeaseToken)
	if err != nil {
		return err
	}
	return s.answer(w, r, j, core.Report{Verdict: continueVerdict(req.Kind, req.Args, req.RunAt)})
}

func (s *Server) extendLease(w http.ResponseWriter, r *http.Request) error {
	var req LeaseRequest
	if err := s.decodeBody(w, r, &req, true); err != nil {
		return err
	}
	ext := s.ccfg.LeaseDuration
	if req.ExtendSeconds != nil {
		v := *req.ExtendSeconds
		if !(v > 0) || v > MaxLeaseExtension.Seconds() {
			return newProblem(SlugInvalidRequest, fmt.Sprintf("extend_seconds must be above 0 and at most %g", MaxLeaseExtension.Seconds()))
		}
		ext = time.Duration(v * float64(time.Second))
	}
	tok, j, err := s.held(r.Context(), r, req.LeaseToken)
	if err != nil {
		return err
	}
	until := contract.UTC(s.now().Add(ext))
	// Only this job's lease: the token names one execution.
	n, err := s.rw.Extend(r.Context(), tok.workerID, []contract.Lease{{JobID: j.ID, ClaimSeq: tok.claimSeq}}, until)
	if err != nil {
		return err
	}
	if n == 0 {
		return lostProblem(j)
	}
	writeJSON(w, http.StatusOK, LeaseResponse{LeaseUntil: until})
	return nil
}
