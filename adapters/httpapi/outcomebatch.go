package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
)

// Outcome types of an OutcomeItem.
const (
	OutcomeTypeComplete = "complete"
	OutcomeTypeFail     = "fail"
	OutcomeTypeSnooze   = "snooze"
	OutcomeTypeContinue = "continue"
)

// OutcomesRequest is the body of POST /v1/workers/{id}/outcomes: 1..1000
// outcomes of jobs the worker {id} holds.
type OutcomesRequest struct {
	Outcomes []OutcomeItem `json:"outcomes"`
}

// OutcomeItem is one outcome of a batch: the job, its lease token, the
// type ("complete", "fail", "snooze" or "continue") and the fields of the
// single endpoint of that type (result; error, trace, action,
// retry_in_seconds, cause; delay_seconds; kind, args, run_at). A field of
// another type is an item problem.
type OutcomeItem struct {
	JobID          int64           `json:"job_id"`
	LeaseToken     string          `json:"lease_token"`
	Type           string          `json:"type"`
	Result         json.RawMessage `json:"result,omitempty"`           // complete: any JSON
	Error          string          `json:"error,omitempty"`            // fail: required
	Trace          string          `json:"trace,omitempty"`            // fail
	Action         string          `json:"action,omitempty"`           // fail: retry (default), discard, cancel
	RetryInSeconds *float64        `json:"retry_in_seconds,omitempty"` // fail, action retry: overrides the policy
	Cause          string          `json:"cause,omitempty"`            // fail: see WorkerCauses; absent means handler_error
	DelaySeconds   *float64        `json:"delay_seconds,omitempty"`    // snooze: default 0
	HandBack       string          `json:"hand_back,omitempty"`        // snooze: see SnoozeRequest.HandBack
	Kind           string          `json:"kind,omitempty"`             // continue: the next step's kind
	Args           json.RawMessage `json:"args,omitempty"`             // continue: the next step's args
	RunAt          *time.Time      `json:"run_at,omitempty"`           // continue: RFC 3339, absent means now
}

// OutcomesResponse answers POST /v1/workers/{id}/outcomes: one result per
// item, in input order.
type OutcomesResponse struct {
	Results []OutcomeResult `json:"results"`
}

// OutcomeResult is the fate of one item of a batch of outcomes. Applied
// items carry the job's state after the outcome (completed, retryable,
// discarded, cancelled, scheduled or available; "completed" also when
// the server keeps no completed jobs and deleted the row). Items that did
// not apply carry the problem they would have had on the single endpoint
// (lease-lost, invalid-lease-token, forbidden, invalid-request) and
// changed nothing.
type OutcomeResult struct {
	JobID   int64           `json:"job_id"`
	Applied bool            `json:"applied"`
	State   core.State      `json:"state,omitempty"`
	Problem *ProblemDetails `json:"problem,omitempty"`
}

// batchEntry is an item of a batch on its way to the store.
type batchEntry struct {
	idx  int
	tok  leaseToken
	item *OutcomeItem
	v    core.Verdict // what the item reports
}

// tokenJob is what a lease token says of its job: enough for the fence of
// an outcome that needs no more (complete, snooze, hand-back) and for its
// events when nothing else is known.
func tokenJob(tok leaseToken) *core.Job {
	return &core.Job{ID: tok.jobID, Attempt: tok.attempt, ClaimSeq: tok.claimSeq, WorkerID: tok.workerID, State: core.StateRunning}
}

// outcomes applies a batch of outcomes of worker {id} with as few store
// round trips as it can: completions and snoozes are fenced by their
// tokens alone (no read), failures and continuations read their job for
// the decision (attempts, deadline, the kind's retry policy), then one
// core.RemoteWorkers.Report decides and applies everything. Problems of single items
// answer in their result; only a malformed body fails the whole request
// (and changes nothing), as does a store failure (nothing applied).
func (s *Server) outcomes(w http.ResponseWriter, r *http.Request) error {
	wid, err := workerID(r)
	if err != nil {
		return err
	}
	var req OutcomesRequest
	if err := s.decodeBody(w, r, &req, true); err != nil {
		return err
	}
	n := len(req.Outcomes)
	if n == 0 || n > MaxOutcomeBatch {
		return newProblem(SlugInvalidRequest, fmt.Sprintf("outcomes must hold 1 to %d items, not %d", MaxOutcomeBatch, n))
	}
	ctx := r.Context()
	rc := reqFrom(ctx)
	results := make([]OutcomeResult, n)
	reject := func(i int, err error) {
		p := classify(err)
		d := p.details(r.URL.Path, rc.id)
		results[i] = OutcomeResult{JobID: req.Outcomes[i].JobID, Problem: &d}
	}

	// Check every item; the valid ones go on.
	var entries []*batchEntry
	seen := make(map[int64]bool, n)
	for i := range req.Outcomes {
		e, err := s.checkItem(ctx, wid, &req.Outcomes[i], seen)
		if err != nil {
			var p *problem
			if !errors.As(err, &p) {
				return err // the store failed: nothing applied
			}
			reject(i, err)
			continue
		}
		e.idx = i
		entries = append(entries, e)
	}

	// Failures and continuations (which fail when invalid) need their job
	// (attempt, attempts allowed, deadline, kind) for the decision;
	// completions and snoozes only the fence, which the token holds.
	now := s.now()
	var reports []core.Report
	var applying []*batchEntry
	// heldJob reads e's job; nil (and the item rejected as lease-lost) when
	// it is gone or no longer held under e's token.
	heldJob := func(e *batchEntry) (*core.Job, error) {
		tok := e.tok
		j, err := s.c.GetJob(ctx, tok.jobID)
		switch {
		case errors.Is(err, core.ErrNotFound):
			s.claims.take(tok.jobID, tok.claimSeq)
			reject(e.idx, newProblem(SlugLeaseLost, fmt.Sprintf("job %d no longer exists", tok.jobID)))
			return nil, nil
		case err != nil:
			return nil, err
		case !heldBy(j, tok):
			s.claims.take(tok.jobID, tok.claimSeq)
			s.c.Emit(core.Event{Kind: core.EventLeaseLost, At: now, Queue: j.Queue, Job: j})
			reject(e.idx, lostProblem(j))
			return nil, nil
		}
		return j, nil
	}
	for _, e := range entries {
		tok := e.tok
		// As claimed here (queue, kind and claim time for events), else
		// what the token says.
		j := s.claims.peek(tok.jobID, tok.claimSeq)
		read := false
		switch e.item.Type {
		case OutcomeTypeFail, OutcomeTypeContinue:
			read = true
		case OutcomeTypeComplete:
			// A result is sealed for its job's kind: from this
			// server's claim, or read.
			read = j == nil && s.sealsResults() && e.v.Result != nil && !contract.IsSealed(e.v.Result)
		}
		if read {
			var err error
			if j, err = heldJob(e); err != nil {
				return err // nothing applied yet
			}
			if j == nil {
				continue
			}
		}
		if j == nil {
			j = tokenJob(tok)
		}
		reports = append(reports, core.Report{Job: j, Verdict: e.v, HandBack: e.item.HandBack})
		applying = append(applying, e)
	}

	if len(reports) > 0 {
		res, err := s.rw.Report(ctx, now, reports)
		if err != nil {
			return err
		}
		wake := false
		for k, e := range applying {
			s.claims.take(e.tok.jobID, e.tok.claimSeq)
			if !res[k].Applied {
				reject(e.idx, newProblem(SlugLeaseLost, fmt.Sprintf("job %d is no longer held under this lease token (it was rescued, re-claimed, cancelled, finished or deleted); nothing changed", e.tok.jobID)))
				continue
			}
			o := res[k].Decision.Outcome
			wake = wake || wakes(o)
			results[e.idx] = OutcomeResult{JobID: e.tok.jobID, Applied: true, State: stateAfter(o)}
		}
		if wake {
			s.wake.broadcast()
		}
	}
	writeJSON(w, http.StatusOK, OutcomesResponse{Results: results})
	return nil
}

// checkItem checks one item of worker wid's batch: its fields for its
// type, its token (which must name the item's job and wid, carry this
// server's signature and belong to the request's credential), and that
// its job appears once in the batch. A store failure is returned as is.
func (s *Server) checkItem(ctx context.Context, wid string, it *OutcomeItem, seen map[int64]bool) (*batchEntry, error) {
	if it.JobID < 1 {
		return nil, newProblem(SlugInvalidRequest, "job_id is required: a positive integer")
	}
	if seen[it.JobID] {
		return nil, newProblem(SlugInvalidRequest, fmt.Sprintf("job %d has more than one outcome in this batch", it.JobID))
	}
	seen[it.JobID] = true
	e := &batchEntry{item: it}
	var err error
	misplaced := func(field string) error {
		return newProblem(SlugInvalidRequest, fmt.Sprintf("%s does not apply to an outcome of type %s", field, it.Type))
	}
	hasFail := it.Error != "" || it.Trace != "" || it.Action != "" || it.RetryInSeconds != nil || it.Cause != ""
	hasContinue := it.Kind != "" || len(it.Args) > 0 || it.RunAt != nil
	switch it.Type {
	case OutcomeTypeComplete:
		switch {
		case hasFail:
			return nil, misplaced("error, trace, action, retry_in_seconds and cause")
		case it.DelaySeconds != nil:
			return nil, misplaced("delay_seconds")
		case it.HandBack != "":
			return nil, misplaced("hand_back")
		case hasContinue:
			return nil, misplaced("kind, args and run_at")
		}
		result, err := s.resultBytes(it.Result)
		if err != nil {
			return nil, err
		}
		e.v = core.Verdict{Kind: contract.OutcomeComplete, Result: result}
	case OutcomeTypeFail:
		switch {
		case len(it.Result) > 0:
			return nil, misplaced("result")
		case it.DelaySeconds != nil:
			return nil, misplaced("delay_seconds")
		case it.HandBack != "":
			return nil, misplaced("hand_back")
		case hasContinue:
			return nil, misplaced("kind, args and run_at")
		}
		over, err := checkFail(it.Error, it.Action, it.Cause, it.RetryInSeconds)
		if err != nil {
			return nil, err
		}
		e.v = failVerdict(it.Error, it.Trace, it.Cause, it.Action, over)
	case OutcomeTypeSnooze:
		switch {
		case hasFail:
			return nil, misplaced("error, trace, action, retry_in_seconds and cause")
		case len(it.Result) > 0:
			return nil, misplaced("result")
		case hasContinue:
			return nil, misplaced("kind, args and run_at")
		}
		if err := checkHandBack(it.HandBack, it.DelaySeconds); err != nil {
			return nil, err
		}
		delay, err := snoozeDelay(it.DelaySeconds)
		if err != nil {
			return nil, err
		}
		e.v = core.Verdict{Kind: contract.OutcomeSnooze, Delay: delay}
	case OutcomeTypeContinue:
		switch {
		case hasFail:
			return nil, misplaced("error, trace, action, retry_in_seconds and cause")
		case len(it.Result) > 0:
			return nil, misplaced("result")
		case it.DelaySeconds != nil:
			return nil, misplaced("delay_seconds")
		case it.HandBack != "":
			return nil, misplaced("hand_back")
		}
		e.v = continueVerdict(it.Kind, it.Args, it.RunAt)
	default:
		return nil, newProblem(SlugInvalidRequest, fmt.Sprintf("type must be complete, fail, snooze or continue, not %q", it.Type))
	}
	if e.tok, err = decodeLeaseToken(it.LeaseToken); err != nil {
		return nil, err
	}
	switch {
	case e.tok.jobID != it.JobID:
		return nil, newProblem(SlugInvalidLeaseToken, fmt.Sprintf("lease_token is for job %d, not job %d", e.tok.jobID, it.JobID))
	case e.tok.workerID != wid:
		return nil, newProblem(SlugInvalidLeaseToken, fmt.Sprintf("lease_token of job %d was issued to another worker than %q", it.JobID, wid))
	}
	if err := s.checkToken(ctx, e.tok); err != nil {
		return nil, err
	}
	return e, nil
}

// stateAfter is the state an applied outcome leaves its job in.
func stateAfter(o contract.Outcome) core.State {
	switch o.Kind {
	case contract.OutcomeComplete:
		return core.StateCompleted
	case contract.OutcomeRetry:
		return core.StateRetryable
	case contract.OutcomeDiscard:
		return core.StateDiscarded
	case contract.OutcomeCancel:
		return core.StateCancelled
	case contract.OutcomeSnooze, contract.OutcomeContinue:
		if o.RunAt.After(o.At) {
			return core.StateScheduled
		}
		return core.StateAvailable
	}
	return ""
}
