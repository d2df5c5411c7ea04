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

// finish applies one decided outcome and reports its event; a failed
// fence is lease-lost. It returns the job as it is after (nil when
// deleted).
func (s *Server) finish(ctx context.Context, j *core.Job, d core.Decision) (*core.Job, error) {
	o := d.Outcome
	res, err := s.st.Finish(ctx, []core.Outcome{o})
	if err != nil {
		return nil, err
	}
	if len(res) != 1 {
		return nil, fmt.Errorf("httpapi: store returned %d finish results for one outcome", len(res))
	}
	s.claims.take(o.JobID, o.ClaimSeq)
	if !res[0].Applied {
		s.c.Emit(core.Event{Kind: core.EventLeaseLost, At: o.At, Queue: j.Queue, Job: j})
		return nil, lostProblem(j)
	}
	s.emitApplied(j, d)
	if wakes(o) {
		s.wake.broadcast()
	}
	if o.Delete {
		return nil, nil
	}
	after, err := s.c.GetJob(ctx, j.ID)
	if errors.Is(err, core.ErrNotFound) {
		return nil, nil
	}
	return after, err
}

// answer seals d's outcome for j's kind (encryption at rest), applies it
// with finish and answers with the job as it is after.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, j *core.Job, d core.Decision) error {
	s.sealOutcome(&d.Outcome, j.Kind)
	after, err := s.finish(r.Context(), j, d)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, JobResponse{Job: s.apiJob(r.Context(), after)})
	return nil
}

// emitApplied reports an applied outcome of j's execution; its duration
// runs from the claim (j.AttemptedAt, when known) to the outcome, and a
// failed attempt's event carries the cause of its error entry, as the
// engine's own do.
func (s *Server) emitApplied(j *core.Job, d core.Decision) {
	var dur time.Duration
	if !j.AttemptedAt.IsZero() {
		dur = max(d.Outcome.At.Sub(j.AttemptedAt), 0)
	}
	var cause string
	if d.Outcome.Error != nil {
		cause = d.Outcome.Error.Cause
	}
	s.c.Emit(core.Event{Kind: d.Event, At: d.Outcome.At, Queue: j.Queue, Job: j, Err: d.Err, Reason: d.Reason, Duration: dur, Cause: cause})
}

// wakes reports whether an applied outcome makes its job due at once
// (a retry, snooze or continuation to now), which should wake waiting
// claims.
func wakes(o core.Outcome) bool {
	switch o.Kind {
	case core.OutcomeRetry, core.OutcomeSnooze, core.OutcomeContinue:
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
	if core.IsSealed(result) {
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

// decide is the engine's decision (core.Decide) on an attempt of j that
// a remote worker reported as v, at now. The delay before a retry is, in
// order: the one the worker sent (retry_in_seconds, v.RetryIn), then the
// engine's policy of j's kind (core.Client.RetryPolicy: the kind's
// WithRetry, given to its handler or to core.Handlers.Declare, else
// core.Config.Retry), the same as for the engine's own handlers. A failure the worker reported (failVerdict) keeps
// the cause it reported in its error entry; with cause deadline the job
// is discarded for its deadline, as the engine does when an attempt ends
// by the job's deadline, whatever this server's clock says. The caller
// seals the outcome (sealOutcome).
func (s *Server) decide(j *core.Job, now time.Time, v core.Verdict) core.Decision {
	maxArgs := s.ccfg.MaxArgsBytes
	if v.Next != nil && core.IsSealed(v.Next.Args) && maxArgs > 0 {
		// Sealed by a worker holding keys: the limit of its plaintext.
		maxArgs = core.SealedSize(maxArgs)
	}
	policy := s.c.RetryPolicy(j.Kind)
	var re *reportedError
	reported := errors.As(v.Err, &re)
	if reported && re.cause == core.CauseDeadline && v.Kind == core.OutcomeRetry {
		// Decide discards an attempt whose deadline has passed.
		dj := *j
		if dj.Deadline.IsZero() || dj.Deadline.After(now) {
			dj.Deadline = now
		}
		j = &dj
	}
	d := core.Decide(j, v, core.DecidePolicy{
		Now: now, Retry: policy, MaxArgsBytes: maxArgs, DeleteCompleted: s.ccfg.Retention.Completed == 0,
	})
	if reported && d.Outcome.Error != nil {
		d.Outcome.Error.Cause = re.cause
	}
	return d
}

// reportedError is a failure as a remote worker reported it: its message
// and trace become the attempt's error entry as they are (bounded), with
// the cause the worker reported (core.CauseHandlerError when it sent
// none).
type reportedError struct{ msg, trace, cause string }

func (e *reportedError) Error() string      { return e.msg }
func (e *reportedError) ErrorTrace() string { return e.trace }

// failVerdict is the verdict of a failure a remote worker reported: its
// message, trace and cause ("" for core.CauseHandlerError), its action
// (retry, the default; discard; cancel) and the delay it asked for (nil
// for the policy's).
func failVerdict(msg, trace, cause, action string, retryIn *time.Duration) core.Verdict {
	if cause == "" {
		cause = core.CauseHandlerError
	}
	v := core.Verdict{Kind: core.OutcomeRetry, Err: &reportedError{msg: msg, trace: trace, cause: cause}, RetryIn: retryIn}
	switch action {
	case "discard":
		v.Kind = core.OutcomeDiscard
	case "cancel":
		v.Kind = core.OutcomeCancel
	}
	return v
}

// continueVerdict is the verdict of a continuation a remote worker
// reported; run_at absent means now.
func continueVerdict(kind string, args json.RawMessage, runAt *time.Time) core.Verdict {
	ct := &core.ContinueError{Kind: kind, Args: []byte(args)}
	if runAt != nil {
		ct.RunAt = *runAt
	}
	return core.Verdict{Kind: core.OutcomeContinue, Err: ct, Next: ct}
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
	return s.answer(w, r, j, s.decide(j, s.now(), core.Verdict{Kind: core.OutcomeComplete, Result: result}))
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
	return s.answer(w, r, j, s.decide(j, s.now(), failVerdict(req.Error, req.Trace, req.Cause, req.Action, override)))
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
	if req.HandBack != "" {
		return s.answer(w, r, j, handBackDecision(j, req.HandBack, s.now()))
	}
	return s.answer(w, r, j, s.decide(j, s.now(), core.Verdict{Kind: core.OutcomeSnooze, Delay: d}))
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

// handBackDecision is the decision on a job a remote worker handed back
// for cause, as the engine decides it in process: core.HandBack.
func handBackDecision(j *core.Job, cause string, now time.Time) core.Decision {
	return core.Decision{Outcome: core.HandBack(j, cause, now), Event: core.EventJobSnoozed}
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
	return s.answer(w, r, j, s.decide(j, s.now(), continueVerdict(req.Kind, req.Args, req.RunAt)))
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
	until := core.UTC(s.now().Add(ext))
	// Only this job's lease: the token names one execution.
	n, err := s.st.ExtendLeases(r.Context(), tok.workerID, []core.Lease{{JobID: j.ID, ClaimSeq: tok.claimSeq}}, until)
	if err != nil {
		return err
	}
	if n == 0 {
		return lostProblem(j)
	}
	writeJSON(w, http.StatusOK, LeaseResponse{LeaseUntil: until})
	return nil
}
