package httpapi

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/url"
	"time"

	"github.com/backlogq/backlog/core"
)

// WorkflowStepRequest is one step of POST /v1/workflows: a job as POST
// /v1/jobs takes it (SubmitRequest's fields, inline), named Name (unique
// in the workflow, 1..255 bytes), that waits for the steps named in
// After and for the jobs of earlier calls listed by id in DependsOn.
// OnDependencyFailure is "" (a dependency cancelled, discarded or
// deleted cancels the step) or "run" (the step runs all the same).
type WorkflowStepRequest struct {
	Name string `json:"name"`
	SubmitRequest
	After               []string              `json:"after,omitempty"`
	DependsOn           []int64               `json:"depends_on,omitempty"`
	OnDependencyFailure core.DependencyPolicy `json:"on_dependency_failure,omitempty"`
}

// WorkflowRequest is the body of POST /v1/workflows: 1..core.MaxWorkflowSteps
// steps, in any order (core.Workflow).
type WorkflowRequest struct {
	Steps []WorkflowStepRequest `json:"steps"`
}

// WorkflowResponse answers POST /v1/workflows: the workflow's id (the id
// of its first step in insert order, the workflow_id of every step) and
// its steps' jobs by step name (core.WorkflowResult).
type WorkflowResponse struct {
	ID    int64           `json:"id"`
	Steps map[string]*Job `json:"steps"`
}

// BatchCreateRequest is the body of POST /v1/batches (core.Batch): its
// jobs (1..core.MaxBatchJobs, as POST /v1/jobs takes them), the callbacks
// (null or absent: none) and the metadata kept on the callbacks under
// their own.
type BatchCreateRequest struct {
	Jobs      []SubmitRequest   `json:"jobs"`
	OnFinish  *SubmitRequest    `json:"on_finish,omitempty"`
	OnSuccess *SubmitRequest    `json:"on_success,omitempty"`
	Metadata  map[string]string `json:"metadata,omitempty"`
}

// BatchCreateResponse answers POST /v1/batches (core.BatchResult): the
// batch's id, its jobs in input order, its callbacks (null when not set).
type BatchCreateResponse struct {
	ID        int64  `json:"id"`
	Jobs      []*Job `json:"jobs"`
	OnFinish  *Job   `json:"on_finish"`
	OnSuccess *Job   `json:"on_success"`
}

// WorkflowStatus is the state of a workflow or batch as its jobs say
// (core.WorkflowStatus): an item of GET /v1/workflows and /v1/batches.
type WorkflowStatus = core.WorkflowStatus

// WorkflowListResponse answers GET /v1/workflows and GET /v1/batches:
// newest first; NextAfter, absent on the last page, is the after cursor
// of the next.
type WorkflowListResponse struct {
	Workflows []WorkflowStatus `json:"workflows"`
	NextAfter *int64           `json:"next_after,omitempty"`
}

// WorkflowStep is one step of GET /v1/workflows/{id}: its name, job id,
// kind, queue, state, attempts, dependencies (ids), the dependencies not
// yet settled while it waits, its policy and its times (UTC).
type WorkflowStep struct {
	Name                string                `json:"name"`
	ID                  int64                 `json:"id"`
	Kind                string                `json:"kind"`
	Queue               string                `json:"queue"`
	State               core.State            `json:"state"`
	Attempt             int                   `json:"attempt"`
	MaxAttempts         int                   `json:"max_attempts"`
	DependsOn           []int64               `json:"depends_on,omitempty"`
	WaitingFor          int                   `json:"waiting_for,omitempty"`
	OnDependencyFailure core.DependencyPolicy `json:"on_dependency_failure,omitempty"`
	CreatedAt           time.Time             `json:"created_at"`
	FinishedAt          time.Time             `json:"finished_at,omitzero"`
}

// WorkflowDetail answers GET /v1/workflows/{id} and GET /v1/batches/{id}:
// the status, and for a workflow its steps (every job, in id order, at
// most core.MaxWorkflowSteps), for a batch its callbacks (the jobs of
// step on_finish and on_success, each with its dependency_ends); a
// batch's jobs are paged through GET /v1/jobs?workflow_id=ID.
type WorkflowDetail struct {
	WorkflowStatus
	Steps     []WorkflowStep `json:"steps,omitempty"`
	Callbacks []*Job         `json:"callbacks,omitempty"`
}

// submitWorkflow serves POST /v1/workflows. Each step is checked as POST
// /v1/jobs checks a job (422 for an invalid one, its index named as
// steps[i]); the graph is the engine's to check (core.EnqueueWorkflow):
// an unknown step, a duplicate name or a cycle is 400 invalid-request
// with its message. Nothing is inserted unless every step is.
func (s *Server) submitWorkflow(w http.ResponseWriter, r *http.Request) error {
	if r.Header.Get("Idempotency-Key") != "" {
		return newProblem(SlugInvalidRequest, "Idempotency-Key applies to POST /v1/jobs; give a step its own unique_key")
	}
	var req WorkflowRequest
	if err := s.decodeBody(w, r, &req, true); err != nil {
		return err
	}
	if len(req.Steps) == 0 || len(req.Steps) > core.MaxWorkflowSteps {
		return newProblem(SlugInvalidRequest, fmt.Sprintf("steps must hold 1..%d steps, not %d", core.MaxWorkflowSteps, len(req.Steps)))
	}
	now, cid := s.now(), CorrelationID(r.Context())
	var wf core.Workflow
	ps := make([]core.InsertParams, len(req.Steps))
	for i := range req.Steps {
		st := &req.Steps[i]
		prefix := fmt.Sprintf("steps[%d]: ", i)
		opts, args, err := s.submitOptions(&st.SubmitRequest, now, cid, prefix)
		if err != nil {
			return err
		}
		if err := checkDependencyFields(st.DependsOn, st.OnDependencyFailure, prefix); err != nil {
			return err
		}
		opts.DependsOn, opts.OnDependencyFailure = st.DependsOn, st.OnDependencyFailure
		if ps[i], err = s.buildInsert(st.Kind, args, &opts, now, prefix); err != nil {
			return err
		}
		wf.AddRaw(st.Name, st.Kind, args, &opts, st.After...)
	}
	if err := s.checkSubmission(r.Context(), ps, stepsItem); err != nil {
		return err
	}
	res, err := s.c.EnqueueWorkflow(s.traceContext(r), &wf)
	if err != nil {
		return shapeError(err)
	}
	out := WorkflowResponse{ID: res.ID, Steps: make(map[string]*Job, len(res.Steps))}
	jobs := make([]*core.Job, 0, len(res.Steps))
	for name, j := range res.Steps {
		out.Steps[name] = s.apiJob(r.Context(), j)
		jobs = append(jobs, j)
	}
	s.wakeIfDue(jobs)
	writeJSON(w, http.StatusCreated, out)
	return nil
}

// submitBatchJobs serves POST /v1/batches (core.EnqueueBatch). Each job
// and callback is checked as POST /v1/jobs checks a job (422, named
// jobs[i], on_finish or on_success); an empty batch is 400.
func (s *Server) submitBatchJobs(w http.ResponseWriter, r *http.Request) error {
	if r.Header.Get("Idempotency-Key") != "" {
		return newProblem(SlugInvalidRequest, "Idempotency-Key applies to POST /v1/jobs; give each job of the batch its own unique_key")
	}
	var req BatchCreateRequest
	if err := s.decodeBody(w, r, &req, true); err != nil {
		return err
	}
	if len(req.Jobs) == 0 || len(req.Jobs) > core.MaxBatchJobs {
		return newProblem(SlugInvalidRequest, fmt.Sprintf("jobs must hold 1..%d jobs, not %d", core.MaxBatchJobs, len(req.Jobs)))
	}
	now, cid := s.now(), CorrelationID(r.Context())
	b := core.Batch{Metadata: req.Metadata}
	var (
		ps    []core.InsertParams
		names []string
	)
	add := func(sr *SubmitRequest, prefix string, callback bool, to func(kind string, args []byte, opts *core.Options)) error {
		opts, args, err := s.submitOptions(sr, now, cid, prefix)
		if err != nil {
			return err
		}
		p, err := s.buildInsert(sr.Kind, args, &opts, now, prefix)
		if err != nil {
			return err
		}
		if callback && len(req.Metadata) > 0 {
			// Checked as the callback will hold it (core.Batch.Metadata).
			md := maps.Clone(req.Metadata)
			maps.Copy(md, p.Metadata)
			p.Metadata = md
		}
		ps, names = append(ps, p), append(names, prefix)
		to(sr.Kind, args, &opts)
		return nil
	}
	for i := range req.Jobs {
		err := add(&req.Jobs[i], fmt.Sprintf("jobs[%d]: ", i), false, func(kind string, args []byte, opts *core.Options) { b.AddRaw(kind, args, opts) })
		if err != nil {
			return err
		}
	}
	if req.OnFinish != nil {
		if err := add(req.OnFinish, "on_finish: ", true, func(kind string, args []byte, opts *core.Options) { b.OnFinishRaw(kind, args, opts) }); err != nil {
			return err
		}
	}
	if req.OnSuccess != nil {
		if err := add(req.OnSuccess, "on_success: ", true, func(kind string, args []byte, opts *core.Options) { b.OnSuccessRaw(kind, args, opts) }); err != nil {
			return err
		}
	}
	if err := s.checkSubmission(r.Context(), ps, func(i int) string { return names[i] }); err != nil {
		return err
	}
	res, err := s.c.EnqueueBatch(s.traceContext(r), &b)
	if err != nil {
		return shapeError(err)
	}
	out := BatchCreateResponse{ID: res.ID, Jobs: make([]*Job, len(res.Jobs)),
		OnFinish: s.apiJob(r.Context(), res.OnFinish), OnSuccess: s.apiJob(r.Context(), res.OnSuccess)}
	for i, j := range res.Jobs {
		out.Jobs[i] = s.apiJob(r.Context(), j)
	}
	s.wakeIfDue(res.Jobs)
	writeJSON(w, http.StatusCreated, out)
	return nil
}

// stepsItem names the i-th step of POST /v1/workflows in messages.
func stepsItem(i int) string { return fmt.Sprintf("steps[%d]: ", i) }

// checkDependencyFields checks a step's depends_on and
// on_dependency_failure (422 invalid-job).
func checkDependencyFields(ids []int64, policy core.DependencyPolicy, prefix string) error {
	if !policy.Valid() {
		return newProblem(SlugInvalidJob, fmt.Sprintf("%son_dependency_failure must be %q or %q, not %q", prefix, core.DependencyCancel, core.DependencyRun, clip(string(policy))))
	}
	if len(ids) > core.MaxDependencies {
		return newProblem(SlugInvalidJob, fmt.Sprintf("%sdepends_on holds %d ids, over the limit of %d", prefix, len(ids), core.MaxDependencies))
	}
	for _, id := range ids {
		if id < 1 {
			return newProblem(SlugInvalidJob, fmt.Sprintf("%sdepends_on id %d is below 1", prefix, id))
		}
	}
	return nil
}

// shapeError turns the engine's refusal of a workflow's or batch's shape
// (every job was checked before: what remains of core.ErrInvalidJob is a
// cycle, an unknown or duplicate step, an empty batch …) into 400
// invalid-request with the engine's message, and a depends_on id that
// names no job (core.ErrNotFound) into 422 invalid-job; other errors
// pass.
func shapeError(err error) error {
	switch {
	case errors.Is(err, core.ErrInvalidJob):
		return newProblem(SlugInvalidRequest, trimInvalid(err.Error()))
	case errors.Is(err, core.ErrNotFound):
		return newProblem(SlugInvalidJob, "depends_on names a job that does not exist: "+err.Error())
	}
	return err
}

// wakeIfDue wakes long-polling claims when one of jobs is due now.
func (s *Server) wakeIfDue(jobs []*core.Job) {
	now := s.now()
	for _, j := range jobs {
		if j != nil && j.State != core.StateWaiting && !j.RunAt.After(now) {
			s.wake.broadcast()
			return
		}
	}
}

// MaxWorkflowPage is the most workflows or batches one page of GET
// /v1/workflows or /v1/batches may hold (default 20).
const MaxWorkflowPage = 100

// workflowListParams parses the limit and after of GET /v1/workflows.
func workflowListParams(q url.Values) (limit int, after int64, err error) {
	limit = 20
	if v := q.Get("limit"); v != "" {
		n, ok := parseDecimal(v, 1, MaxWorkflowPage)
		if !ok {
			return 0, 0, newProblem(SlugInvalidRequest, fmt.Sprintf("limit must be an integer from 1 to %d in canonical decimal, not %q", MaxWorkflowPage, clip(v)))
		}
		limit = int(n)
	}
	if v := q.Get("after"); v != "" {
		n, ok := parseDecimal(v, 0, math.MaxInt64)
		if !ok {
			return 0, 0, newProblem(SlugInvalidRequest, fmt.Sprintf("after must be a workflow id (a non-negative integer in canonical decimal), not %q", clip(v)))
		}
		after = n
	}
	return limit, after, nil
}

func (s *Server) listWorkflows(w http.ResponseWriter, r *http.Request) error {
	return s.listFlows(w, r, false)
}

func (s *Server) listBatches(w http.ResponseWriter, r *http.Request) error {
	return s.listFlows(w, r, true)
}

// listFlows answers a page of GET /v1/workflows (batches false) or GET
// /v1/batches (true): the first jobs of workflows, newest first
// (ListParams.WorkflowFirst), those of the other sort skipped, then each
// one's core.WorkflowStatus, which reads every job of it. It holds one of
// the MaxHeavyRequests slots.
func (s *Server) listFlows(w http.ResponseWriter, r *http.Request, batches bool) error {
	limit, after, err := workflowListParams(r.URL.Query())
	if err != nil {
		return err
	}
	ctx := r.Context()
	readCtx, cancel := s.listReadContext(ctx)
	defer cancel()
	if err := s.heavy.acquire(readCtx); err != nil {
		return s.listReadError(ctx, err)
	}
	defer s.heavy.release()
	var ids []int64
	more := false
	p := core.ListParams{WorkflowFirst: true, Desc: true, AfterID: after, Limit: MaxWorkflowPage}
scan:
	for {
		firsts, err := s.c.ListJobs(readCtx, p)
		if err != nil {
			return s.listReadError(ctx, err)
		}
		for _, j := range firsts {
			if (j.Step == "") != batches {
				continue
			}
			if len(ids) == limit {
				more = true
				break scan
			}
			ids = append(ids, j.ID)
		}
		if len(firsts) < p.Limit {
			break
		}
		p.AfterID = firsts[len(firsts)-1].ID
	}
	out := WorkflowListResponse{Workflows: make([]WorkflowStatus, 0, len(ids))}
	for _, id := range ids {
		st, err := s.c.WorkflowStatus(readCtx, id)
		if errors.Is(err, core.ErrNotFound) {
			continue // pruned meanwhile
		}
		if err != nil {
			return s.listReadError(ctx, err)
		}
		out.Workflows = append(out.Workflows, utcStatus(st))
	}
	if more {
		last := ids[len(ids)-1]
		out.NextAfter = &last
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// utcStatus returns st with its times in UTC.
func utcStatus(st core.WorkflowStatus) core.WorkflowStatus {
	st.CreatedAt, st.FinishedAt = utc(st.CreatedAt), utc(st.FinishedAt)
	return st
}

// workflowID parses the {id} path value.
func workflowID(r *http.Request, what string) (int64, error) {
	v := r.PathValue("id")
	id, ok := parseDecimal(v, 1, math.MaxInt64)
	if !ok {
		return 0, newProblem(SlugInvalidRequest, fmt.Sprintf("%s id must be a positive integer in canonical decimal, not %q", what, clip(v)))
	}
	return id, nil
}

// flowNotFound is the problem of a workflow or batch id that names none.
func flowNotFound(what string, id int64) error {
	return newProblem(SlugWorkflowNotFound, fmt.Sprintf("%s %d does not exist (no job has workflow_id %d, or it is not a %s)", what, id, id, what))
}

func (s *Server) getWorkflow(w http.ResponseWriter, r *http.Request) error {
	return s.getFlow(w, r, false)
}

func (s *Server) getBatch(w http.ResponseWriter, r *http.Request) error {
	return s.getFlow(w, r, true)
}

// getFlow answers GET /v1/workflows/{id} (batch false) and GET
// /v1/batches/{id} (true): 404 workflow-not-found when no job has that
// workflow id or the id is of the other sort. It holds one of the
// MaxHeavyRequests slots.
func (s *Server) getFlow(w http.ResponseWriter, r *http.Request, batch bool) error {
	what := flowName(batch)
	id, err := workflowID(r, what)
	if err != nil {
		return err
	}
	ctx := r.Context()
	readCtx, cancel := s.listReadContext(ctx)
	defer cancel()
	if err := s.heavy.acquire(readCtx); err != nil {
		return s.listReadError(ctx, err)
	}
	defer s.heavy.release()
	st, err := s.c.WorkflowStatus(readCtx, id)
	if errors.Is(err, core.ErrNotFound) {
		return flowNotFound(what, id)
	}
	if err != nil {
		return s.listReadError(ctx, err)
	}
	if st.Batch != batch {
		return flowNotFound(what, id)
	}
	out := WorkflowDetail{WorkflowStatus: utcStatus(st)}
	errEnough := errors.New("enough")
	err = s.c.WorkflowJobs(readCtx, id, func(page []*core.Job) error {
		for _, j := range page {
			if batch {
				if j.Step == core.BatchOnFinishStep || j.Step == core.BatchOnSuccessStep {
					out.Callbacks = append(out.Callbacks, s.apiJob(ctx, j))
				}
				continue
			}
			if len(out.Steps) == core.MaxWorkflowSteps {
				return errEnough
			}
			out.Steps = append(out.Steps, WorkflowStep{
				Name: j.Step, ID: j.ID, Kind: j.Kind, Queue: j.Queue, State: j.State, Attempt: j.Attempt,
				MaxAttempts: j.MaxAttempts, DependsOn: j.DependsOn, WaitingFor: j.WaitingFor,
				OnDependencyFailure: j.OnDependencyFailure, CreatedAt: utc(j.CreatedAt), FinishedAt: utc(j.FinishedAt),
			})
		}
		return nil
	})
	if err != nil && !errors.Is(err, errEnough) {
		return s.listReadError(ctx, err)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func flowName(batch bool) string {
	if batch {
		return "batch"
	}
	return "workflow"
}

func (s *Server) cancelWorkflow(w http.ResponseWriter, r *http.Request) error {
	return s.cancelFlow(w, r, false)
}

func (s *Server) cancelBatch(w http.ResponseWriter, r *http.Request) error {
	return s.cancelFlow(w, r, true)
}

// cancelFlow serves POST /v1/workflows/{id}/cancel and POST
// /v1/batches/{id}/cancel (core.CancelWorkflow), answering the counts as
// POST /v1/jobs/bulk does. 404 workflow-not-found when no job has that
// workflow id or the id is of the other sort. Like a bulk action it holds
// a MaxHeavyRequests slot, may take BulkExtraTime beyond WriteTimeout,
// and runs to its end once started even if the caller goes away.
func (s *Server) cancelFlow(w http.ResponseWriter, r *http.Request, batch bool) error {
	if s.cfg.WriteTimeout > 0 {
		extendWrite(w, r, s.cfg.WriteTimeout+BulkExtraTime)
	}
	what := flowName(batch)
	id, err := workflowID(r, what)
	if err != nil {
		return err
	}
	ctx := r.Context()
	first, err := s.c.ListJobs(ctx, core.ListParams{WorkflowID: id, Limit: 1})
	if err != nil {
		return err
	}
	if len(first) == 0 || (first[0].ID == id && first[0].Step == "") != batch { // as core.WorkflowStatus tells a batch
		return flowNotFound(what, id)
	}
	if err := s.heavy.acquire(ctx); err != nil {
		return err
	}
	defer s.heavy.release()
	res, err := s.c.CancelWorkflow(context.WithoutCancel(ctx), id)
	if err != nil {
		if res.Applied > 0 {
			reqFrom(ctx).log.Error("backlog http: cancel of a "+what+" failed part-way", "workflow_id", id,
				"matched", res.Matched, "applied", res.Applied, "skipped", res.Skipped, "err", err)
		}
		return err
	}
	if res.Applied > 0 {
		reqFrom(ctx).log.Info("backlog http: "+what+" cancelled", "workflow_id", id,
			"matched", res.Matched, "applied", res.Applied, "skipped", res.Skipped)
	}
	ids := res.IDs
	if ids == nil {
		ids = []int64{}
	}
	writeJSON(w, http.StatusOK, BulkResponse{Matched: res.Matched, Applied: res.Applied, Skipped: res.Skipped, IDs: ids})
	return nil
}
