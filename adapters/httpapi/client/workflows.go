package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/backlogq/backlog/core"
)

// WorkflowStep is one step of SubmitWorkflow: a job as Submit takes it,
// named Name (unique in the workflow, 1..255 bytes), that waits for the
// steps named in After and for the jobs of earlier calls listed by id in
// DependsOn. OnDependencyFailure is core.DependencyCancel ("", the
// default: a dependency cancelled, discarded or deleted cancels the step)
// or core.DependencyRun (the step runs all the same). See core.Workflow.
type WorkflowStep struct {
	Name string
	SubmitRequest
	After               []string
	DependsOn           []int64
	OnDependencyFailure core.DependencyPolicy
}

// MarshalJSON writes the step as POST /v1/workflows takes it: the
// submission's fields with name, after, depends_on and
// on_dependency_failure beside them.
func (s WorkflowStep) MarshalJSON() ([]byte, error) {
	job, err := s.SubmitRequest.MarshalJSON()
	if err != nil {
		return nil, err
	}
	extra, err := json.Marshal(struct {
		Name                string                `json:"name"`
		After               []string              `json:"after,omitempty"`
		DependsOn           []int64               `json:"depends_on,omitempty"`
		OnDependencyFailure core.DependencyPolicy `json:"on_dependency_failure,omitempty"`
	}{s.Name, s.After, s.DependsOn, s.OnDependencyFailure})
	if err != nil {
		return nil, err
	}
	// Both are objects: join their members.
	job = bytes.TrimSuffix(bytes.TrimSpace(job), []byte("}"))
	extra = bytes.TrimPrefix(bytes.TrimSpace(extra), []byte("{"))
	return append(append(job, ','), extra...), nil
}

// WorkflowResult answers SubmitWorkflow: the workflow's id (the id of its
// first step in insert order, Job.WorkflowID of every step) and its
// steps' jobs by step name.
type WorkflowResult struct {
	ID    int64           `json:"id"`
	Steps map[string]*Job `json:"steps"`
}

// BatchCreateRequest is a batch for CreateBatch (core.Batch): its jobs
// (at least one), the callbacks (nil: none) and metadata kept on the
// callbacks under their own.
type BatchCreateRequest struct {
	Jobs []SubmitRequest `json:"jobs"`
	// OnFinish runs once every job of the batch is final, whatever its
	// end; OnSuccess once every one completed (it is cancelled
	// otherwise). Each reads how the batch went in its
	// Job.DependencyEnds.
	OnFinish  *SubmitRequest    `json:"on_finish,omitempty"`
	OnSuccess *SubmitRequest    `json:"on_success,omitempty"`
	Metadata  map[string]string `json:"metadata,omitempty"`
}

// BatchResult answers CreateBatch: the batch's id (the id of its first
// job, Job.WorkflowID of its jobs and callbacks), its jobs in input
// order and its callbacks (nil when not set).
type BatchResult struct {
	ID        int64  `json:"id"`
	Jobs      []*Job `json:"jobs"`
	OnFinish  *Job   `json:"on_finish"`
	OnSuccess *Job   `json:"on_success"`
}

// WorkflowStatus is the state of a workflow or batch as its jobs say
// (core.WorkflowStatus: id, batch, jobs, counts by state, done, times).
type WorkflowStatus = core.WorkflowStatus

// WorkflowStepStatus is one step of GetWorkflow: its name, job id, kind,
// queue, state, attempts, dependencies (ids), the dependencies not yet
// settled while it waits, its policy and its times (UTC; FinishedAt zero
// until final).
type WorkflowStepStatus struct {
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

// WorkflowDetail answers GetWorkflow and GetBatch: the status, and for a
// workflow its steps in id order (at most core.MaxWorkflowSteps), for a
// batch its callbacks (page through its jobs with ListJobs and
// ListParams.WorkflowID).
type WorkflowDetail struct {
	WorkflowStatus
	Steps     []WorkflowStepStatus `json:"steps,omitempty"`
	Callbacks []*Job               `json:"callbacks,omitempty"`
}

// WorkflowListParams pages ListWorkflows and ListBatches: After is the
// NextAfter of the previous page (0: the newest), Limit 1..100 (0: the
// server's default, 20).
type WorkflowListParams struct {
	After int64
	Limit int
}

// WorkflowPage is one page of ListWorkflows or ListBatches, newest first.
// NextAfter is the cursor of the next page (WorkflowListParams.After), 0
// on the last page.
type WorkflowPage struct {
	Workflows []WorkflowStatus `json:"workflows"`
	NextAfter int64            `json:"next_after,omitempty"`
}

func flowPath(base string, id int64, suffix string) string {
	return base + "/" + strconv.FormatInt(id, 10) + suffix
}

// SubmitWorkflow inserts a workflow's steps in one transaction (POST
// /v1/workflows; producer role) and returns its id and steps' jobs. A
// step refused as Submit refuses a job is a *Problem matching
// core.ErrInvalidJob naming it ("steps[1]: …"); an unknown step in After,
// a name given twice or a cycle matches ErrInvalidRequest with the
// engine's message; a server whose store has no job dependencies answers
// core.ErrUnsupported. Nothing is inserted then. Retried only after
// failures proving the server did nothing.
func (c *Client) SubmitWorkflow(ctx context.Context, steps []WorkflowStep) (*WorkflowResult, error) {
	var out WorkflowResult
	body := struct {
		Steps []WorkflowStep `json:"steps"`
	}{steps}
	if _, err := c.do(ctx, call{method: http.MethodPost, path: "/workflows", body: body, out: &out, mode: retrySafe}); err != nil {
		return nil, err
	}
	return &out, nil
}

// CreateBatch inserts a batch's jobs and callbacks in one transaction
// (POST /v1/batches; producer role) and returns them; it is not
// SubmitBatch, which submits jobs without callbacks. Errors as
// SubmitWorkflow's (an empty batch matches ErrInvalidRequest). Retried
// only after failures proving the server did nothing.
func (c *Client) CreateBatch(ctx context.Context, req BatchCreateRequest) (*BatchResult, error) {
	var out BatchResult
	if _, err := c.do(ctx, call{method: http.MethodPost, path: "/batches", body: req, out: &out, mode: retrySafe}); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetWorkflow returns a workflow's status and steps (GET
// /v1/workflows/{id}; producer role); a *Problem matching core.ErrNotFound
// when no job has that workflow id or it is a batch's.
func (c *Client) GetWorkflow(ctx context.Context, id int64) (*WorkflowDetail, error) {
	return c.getFlow(ctx, "/workflows", id)
}

// GetBatch returns a batch's status and callbacks (GET /v1/batches/{id};
// producer role); a *Problem matching core.ErrNotFound when no job has
// that workflow id or it is a workflow's.
func (c *Client) GetBatch(ctx context.Context, id int64) (*WorkflowDetail, error) {
	return c.getFlow(ctx, "/batches", id)
}

func (c *Client) getFlow(ctx context.Context, base string, id int64) (*WorkflowDetail, error) {
	var out WorkflowDetail
	if _, err := c.do(ctx, call{method: http.MethodGet, path: flowPath(base, id, ""), out: &out, mode: retryIdempotent}); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListWorkflows returns one page of workflows, newest first, each with
// its status (GET /v1/workflows; producer role). The server reads every
// job of the workflows it lists.
func (c *Client) ListWorkflows(ctx context.Context, p WorkflowListParams) (*WorkflowPage, error) {
	return c.listFlows(ctx, "/workflows", p)
}

// ListBatches is ListWorkflows for batches (GET /v1/batches).
func (c *Client) ListBatches(ctx context.Context, p WorkflowListParams) (*WorkflowPage, error) {
	return c.listFlows(ctx, "/batches", p)
}

func (c *Client) listFlows(ctx context.Context, path string, p WorkflowListParams) (*WorkflowPage, error) {
	q := url.Values{}
	if p.After != 0 {
		q.Set("after", strconv.FormatInt(p.After, 10))
	}
	if p.Limit != 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	var out WorkflowPage
	if _, err := c.do(ctx, call{method: http.MethodGet, path: path, query: q, out: &out, mode: retryIdempotent}); err != nil {
		return nil, err
	}
	if out.Workflows == nil {
		out.Workflows = []WorkflowStatus{}
	}
	return &out, nil
}

// CancelWorkflow cancels every step of workflow id not yet final (POST
// /v1/workflows/{id}/cancel; admin role; core.Client.CancelWorkflow) and
// returns the counts as Bulk does; a *Problem matching core.ErrNotFound
// when no job has that workflow id or it is a batch's. Retried only after
// failures proving the server did nothing.
func (c *Client) CancelWorkflow(ctx context.Context, id int64) (core.BulkResult, error) {
	return c.cancelFlow(ctx, "/workflows", id)
}

// CancelBatch is CancelWorkflow for a batch (POST /v1/batches/{id}/cancel):
// its callbacks first, then its jobs.
func (c *Client) CancelBatch(ctx context.Context, id int64) (core.BulkResult, error) {
	return c.cancelFlow(ctx, "/batches", id)
}

func (c *Client) cancelFlow(ctx context.Context, base string, id int64) (core.BulkResult, error) {
	if id < 1 {
		return core.BulkResult{}, fmt.Errorf("backlog client: workflow id %d is below 1: %w", id, ErrInvalidRequest)
	}
	var out core.BulkResult
	if _, err := c.do(ctx, call{method: http.MethodPost, path: flowPath(base, id, "/cancel"), body: struct{}{}, out: &out, mode: retrySafe, wait: bulkWait}); err != nil {
		return core.BulkResult{}, err
	}
	if out.IDs == nil {
		out.IDs = []int64{}
	}
	return out, nil
}
