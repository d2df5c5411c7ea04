package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/backlogq/backlog/adapters/httpapi"
	"github.com/backlogq/backlog/adapters/httpapi/apitypes"
	"github.com/backlogq/backlog/adapters/httpapi/client"
	"github.com/backlogq/backlog/core"
)

// The ops of workflows and batches (workflows.go), on the store and
// through a job server.

// flowNotFound is the error of a workflow or batch id that names none
// (or names one of the other sort); it wraps core.ErrNotFound.
func flowNotFound(batch bool, id int64) error {
	what := "workflow"
	if batch {
		what = "batch"
	}
	return fmt.Errorf("backlog: %s %d: %w", what, id, core.ErrNotFound)
}

func (s storeOps) SubmitWorkflow(ctx context.Context, req httpapi.WorkflowRequest) (core.WorkflowResult, error) {
	var w core.Workflow
	for i := range req.Steps {
		st := &req.Steps[i]
		kind, args, opts, err := submitOptions(&st.SubmitRequest, fmt.Sprintf("steps[%d]: ", i))
		if err != nil {
			return core.WorkflowResult{}, err
		}
		opts.DependsOn, opts.OnDependencyFailure = st.DependsOn, st.OnDependencyFailure
		w.AddRaw(st.Name, kind, args, opts, st.After...)
	}
	return s.c.EnqueueWorkflow(ctx, &w)
}

func (s storeOps) SubmitBatch(ctx context.Context, req httpapi.BatchCreateRequest) (core.BatchResult, error) {
	b := core.Batch{Metadata: req.Metadata}
	for i := range req.Jobs {
		kind, args, opts, err := submitOptions(&req.Jobs[i], fmt.Sprintf("jobs[%d]: ", i))
		if err != nil {
			return core.BatchResult{}, err
		}
		b.AddRaw(kind, args, opts)
	}
	if r := req.OnFinish; r != nil {
		kind, args, opts, err := submitOptions(r, "on_finish: ")
		if err != nil {
			return core.BatchResult{}, err
		}
		b.OnFinishRaw(kind, args, opts)
	}
	if r := req.OnSuccess; r != nil {
		kind, args, opts, err := submitOptions(r, "on_success: ")
		if err != nil {
			return core.BatchResult{}, err
		}
		b.OnSuccessRaw(kind, args, opts)
	}
	return s.c.EnqueueBatch(ctx, &b)
}

// ListWorkflows reads the first jobs of workflows newest first
// (ListParams.WorkflowFirst), keeps those of the sort asked for (a
// batch's first job names no step), and reads each one's status, as GET
// /v1/workflows does.
func (s storeOps) ListWorkflows(ctx context.Context, batches bool, after int64, limit int) ([]core.WorkflowStatus, bool, error) {
	var ids []int64
	more := false
	p := core.ListParams{WorkflowFirst: true, Desc: true, AfterID: after, Limit: httpapi.MaxWorkflowPage}
scan:
	for {
		firsts, err := s.c.ListJobs(ctx, p)
		if err != nil {
			return nil, false, err
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
	out := make([]core.WorkflowStatus, 0, len(ids))
	for _, id := range ids {
		st, err := s.c.WorkflowStatus(ctx, id)
		if errors.Is(err, core.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, false, err
		}
		out = append(out, utcStatus(st))
	}
	return out, more, nil
}

func utcStatus(st core.WorkflowStatus) core.WorkflowStatus {
	st.CreatedAt = st.CreatedAt.UTC()
	if !st.FinishedAt.IsZero() {
		st.FinishedAt = st.FinishedAt.UTC()
	}
	return st
}

// GetWorkflow reads the status of workflow (or batch) id and its steps
// (or callbacks), as GET /v1/workflows/{id} answers them.
func (s storeOps) GetWorkflow(ctx context.Context, id int64, batch bool) (httpapi.WorkflowDetail, error) {
	st, err := s.c.WorkflowStatus(ctx, id)
	if errors.Is(err, core.ErrNotFound) || (err == nil && st.Batch != batch) {
		return httpapi.WorkflowDetail{}, flowNotFound(batch, id)
	}
	if err != nil {
		return httpapi.WorkflowDetail{}, err
	}
	out := httpapi.WorkflowDetail{WorkflowStatus: utcStatus(st)}
	errEnough := errors.New("enough")
	err = s.c.WorkflowJobs(ctx, id, func(page []*core.Job) error {
		for _, j := range page {
			if batch {
				if j.Step == core.BatchOnFinishStep || j.Step == core.BatchOnSuccessStep {
					out.Callbacks = append(out.Callbacks, apitypes.FromCore(j))
				}
				continue
			}
			if len(out.Steps) == core.MaxWorkflowSteps {
				return errEnough
			}
			out.Steps = append(out.Steps, httpapi.WorkflowStep{
				Name: j.Step, ID: j.ID, Kind: j.Kind, Queue: j.Queue, State: j.State, Attempt: j.Attempt,
				MaxAttempts: j.MaxAttempts, DependsOn: j.DependsOn, WaitingFor: j.WaitingFor,
				OnDependencyFailure: j.OnDependencyFailure, CreatedAt: j.CreatedAt.UTC(), FinishedAt: utcOrZero(j.FinishedAt),
			})
		}
		return nil
	})
	if err != nil && !errors.Is(err, errEnough) {
		return httpapi.WorkflowDetail{}, err
	}
	return out, nil
}

func utcOrZero(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}

// secondsDuration converts a *_seconds field to a duration.
func secondsDuration(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// CancelWorkflow cancels workflow (or batch) id with
// core.Client.CancelWorkflow once its first job says it is one of the
// sort asked for.
func (s storeOps) CancelWorkflow(ctx context.Context, id int64, batch bool) (core.BulkResult, error) {
	first, err := s.c.ListJobs(ctx, core.ListParams{WorkflowID: id, Limit: 1})
	if err != nil {
		return core.BulkResult{}, err
	}
	if len(first) == 0 || (first[0].ID == id && first[0].Step == "") != batch { // as core.WorkflowStatus tells a batch
		return core.BulkResult{}, flowNotFound(batch, id)
	}
	return s.c.CancelWorkflow(ctx, id)
}

// submitRequestOf is r as the Go client sends it.
func submitRequestOf(r *httpapi.SubmitRequest) client.SubmitRequest {
	out := client.SubmitRequest{
		Kind: r.Kind, Args: r.Args, Queue: r.Queue, UniqueKey: r.UniqueKey, UniqueScope: r.UniqueScope,
		PartitionKey: r.PartitionKey, Tags: r.Tags, Metadata: r.Metadata,
	}
	if r.Priority != nil {
		out.Priority = *r.Priority
	}
	if r.RunAt != nil {
		out.RunAt = *r.RunAt
	}
	if r.DelaySeconds != nil {
		out.Delay = secondsDuration(*r.DelaySeconds)
	}
	if r.MaxAttempts != nil {
		out.MaxAttempts = *r.MaxAttempts
	}
	if r.UniqueForSeconds != nil {
		out.UniqueFor = secondsDuration(*r.UniqueForSeconds)
	}
	if r.Deadline != nil {
		out.Deadline = *r.Deadline
	}
	return out
}

func (s serverOps) SubmitWorkflow(ctx context.Context, req httpapi.WorkflowRequest) (core.WorkflowResult, error) {
	steps := make([]client.WorkflowStep, len(req.Steps))
	for i := range req.Steps {
		st := &req.Steps[i]
		steps[i] = client.WorkflowStep{Name: st.Name, SubmitRequest: submitRequestOf(&st.SubmitRequest),
			After: st.After, DependsOn: st.DependsOn, OnDependencyFailure: st.OnDependencyFailure}
	}
	res, err := s.c.SubmitWorkflow(ctx, steps)
	if err != nil {
		return core.WorkflowResult{}, s.check(err, roleProducer)
	}
	out := core.WorkflowResult{ID: res.ID, Steps: make(map[string]*core.Job, len(res.Steps))}
	for name, j := range res.Steps {
		out.Steps[name] = coreJob(j)
	}
	return out, nil
}

func (s serverOps) SubmitBatch(ctx context.Context, req httpapi.BatchCreateRequest) (core.BatchResult, error) {
	creq := client.BatchCreateRequest{Jobs: make([]client.SubmitRequest, len(req.Jobs)), Metadata: req.Metadata}
	for i := range req.Jobs {
		creq.Jobs[i] = submitRequestOf(&req.Jobs[i])
	}
	if req.OnFinish != nil {
		r := submitRequestOf(req.OnFinish)
		creq.OnFinish = &r
	}
	if req.OnSuccess != nil {
		r := submitRequestOf(req.OnSuccess)
		creq.OnSuccess = &r
	}
	res, err := s.c.CreateBatch(ctx, creq)
	if err != nil {
		return core.BatchResult{}, s.check(err, roleProducer)
	}
	out := core.BatchResult{ID: res.ID, OnFinish: coreJob(res.OnFinish), OnSuccess: coreJob(res.OnSuccess)}
	for _, j := range res.Jobs {
		out.Jobs = append(out.Jobs, coreJob(j))
	}
	return out, nil
}

func (s serverOps) ListWorkflows(ctx context.Context, batches bool, after int64, limit int) ([]core.WorkflowStatus, bool, error) {
	list := s.c.ListWorkflows
	if batches {
		list = s.c.ListBatches
	}
	page, err := list(ctx, client.WorkflowListParams{After: after, Limit: limit})
	if err != nil {
		return nil, false, s.check(err, roleProducer)
	}
	return page.Workflows, page.NextAfter != 0, nil
}

func (s serverOps) GetWorkflow(ctx context.Context, id int64, batch bool) (httpapi.WorkflowDetail, error) {
	get := s.c.GetWorkflow
	if batch {
		get = s.c.GetBatch
	}
	d, err := get(ctx, id)
	if err != nil {
		return httpapi.WorkflowDetail{}, s.check(err, roleProducer)
	}
	out := httpapi.WorkflowDetail{WorkflowStatus: d.WorkflowStatus, Callbacks: d.Callbacks}
	for _, st := range d.Steps {
		out.Steps = append(out.Steps, httpapi.WorkflowStep(st))
	}
	return out, nil
}

func (s serverOps) CancelWorkflow(ctx context.Context, id int64, batch bool) (core.BulkResult, error) {
	cancel := s.c.CancelWorkflow
	if batch {
		cancel = s.c.CancelBatch
	}
	res, err := cancel(ctx, id)
	return res, s.check(err, roleAdmin)
}
