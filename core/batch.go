package core

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

// Batch limits and the step names of its callbacks.
const (
	// MaxBatchJobs is the most jobs one batch may hold: its callbacks
	// depend on every one (MaxDependencies).
	MaxBatchJobs = MaxDependencies
	// BatchOnFinishStep and BatchOnSuccessStep are the Step of a batch's
	// callbacks (Job.Step), which tell them apart from its jobs.
	BatchOnFinishStep  = "on_finish"
	BatchOnSuccessStep = "on_success"
)

// Batch is a set of jobs inserted together, in one store call and one
// transaction (Client.EnqueueBatch, EnqueueBatchTx), with callbacks: the
// OnFinish callback runs once every job of the batch is final, whatever
// its end; the OnSuccess callback runs only if every one completed (it is
// cancelled otherwise). Each callback is a job that depends on every job
// of the batch (contract.Dependencies), so it is released by the finish of
// the batch's last job, in that finish's transaction, exactly once however
// many workers finish jobs at the same time: nothing polls. A callback
// reads how the batch went in its own Job.DependencyEnds (completed,
// cancelled, discarded counts) and the batch's id in Job.WorkflowID; the
// batch's jobs carry that id too (ListParams.WorkflowID, WorkflowStatus).
// Build it with Add; the zero value is empty and ready. Borrowed from
// Sidekiq's batches and Celery's chords.
type Batch struct {
	// Metadata is kept on the batch's callbacks (merged under their own
	// Options.Metadata, which wins on a shared key).
	Metadata  map[string]string
	jobs      []batchJob
	onFinish  *batchJob
	onSuccess *batchJob
}

type batchJob struct {
	kind string
	args Args
	raw  []byte
	opts *Options
}

// Add appends a job that runs args with opts (nil: the defaults) and
// returns b for chaining.
func (b *Batch) Add(args Args, opts *Options) *Batch {
	b.jobs = append(b.jobs, batchJob{args: args, opts: opts})
	return b
}

// AddRaw is Add with a kind and JSON args (nil means {}).
func (b *Batch) AddRaw(kind string, args []byte, opts *Options) *Batch {
	b.jobs = append(b.jobs, batchJob{kind: kind, raw: args, opts: opts})
	return b
}

// OnFinish sets the callback that runs once every job of the batch is
// final (completed, cancelled, discarded or deleted). It returns b.
func (b *Batch) OnFinish(args Args, opts *Options) *Batch {
	b.onFinish = &batchJob{args: args, opts: opts}
	return b
}

// OnFinishRaw is OnFinish with a kind and JSON args.
func (b *Batch) OnFinishRaw(kind string, args []byte, opts *Options) *Batch {
	b.onFinish = &batchJob{kind: kind, raw: args, opts: opts}
	return b
}

// OnSuccess sets the callback that runs once every job of the batch
// completed; a job cancelled, discarded or deleted cancels it instead.
// It returns b.
func (b *Batch) OnSuccess(args Args, opts *Options) *Batch {
	b.onSuccess = &batchJob{args: args, opts: opts}
	return b
}

// OnSuccessRaw is OnSuccess with a kind and JSON args.
func (b *Batch) OnSuccessRaw(kind string, args []byte, opts *Options) *Batch {
	b.onSuccess = &batchJob{kind: kind, raw: args, opts: opts}
	return b
}

// Len returns how many jobs b holds, callbacks not counted.
func (b *Batch) Len() int { return len(b.jobs) }

// BatchResult is an inserted batch: its id (the id of its first job,
// Job.WorkflowID of each of its jobs and callbacks), its jobs in the
// order of Add, and its callbacks (nil when not set).
type BatchResult struct {
	ID        int64
	Jobs      []*Job
	OnFinish  *Job
	OnSuccess *Job
}

func (j batchJob) build(c *Client, now time.Time) (InsertParams, error) {
	if j.args != nil {
		raw, err := encodeArgs(j.args)
		if err != nil {
			return InsertParams{}, err
		}
		return buildInsert(j.args.Kind(), raw, j.opts, now, c.limits())
	}
	return buildInsert(j.kind, j.raw, j.opts, now, c.limits())
}

// plan returns b as InsertParams: the jobs (InWorkflow), then each
// callback depending on all of them. An empty batch, more than
// MaxBatchJobs jobs or an invalid job are ErrInvalidJob.
func (b *Batch) plan(c *Client) ([]InsertParams, error) {
	n := len(b.jobs)
	if n == 0 {
		return nil, invalid("batch has no jobs")
	}
	if n > MaxBatchJobs {
		return nil, invalid("batch has %d jobs, over the limit of %d", n, MaxBatchJobs)
	}
	now := c.clock.Now()
	out := make([]InsertParams, 0, n+2)
	for i, j := range b.jobs {
		p, err := j.build(c, now)
		if err != nil {
			return nil, fmt.Errorf("batch job %d: %w", i, err)
		}
		if p.Step != "" || len(p.DependsOnIndex) > 0 {
			return nil, invalid("batch job %d: a batch's jobs name no step and no DependsOnIndex", i)
		}
		p.InWorkflow = true
		out = append(out, p)
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	for _, cb := range []struct {
		job    *batchJob
		step   string
		policy DependencyPolicy
	}{{b.onFinish, BatchOnFinishStep, DependencyRun}, {b.onSuccess, BatchOnSuccessStep, DependencyCancel}} {
		if cb.job == nil {
			continue
		}
		p, err := cb.job.build(c, now)
		if err != nil {
			return nil, fmt.Errorf("batch callback %s: %w", cb.step, err)
		}
		if len(p.DependsOn) > 0 {
			return nil, invalid("batch callback %s: depends on the batch's jobs only", cb.step)
		}
		p.Step, p.DependsOnIndex, p.OnDependencyFailure = cb.step, all, cb.policy
		if len(b.Metadata) > 0 {
			meta := maps.Clone(b.Metadata)
			maps.Copy(meta, p.Metadata)
			p.Metadata = meta
		}
		out = append(out, p)
	}
	return out, nil
}

// EnqueueBatch inserts b's jobs and callbacks in one store call (one
// transaction) and returns the batch's id, jobs and callbacks. Errors:
// an invalid batch or job wraps ErrInvalidJob (inserting nothing), a
// store without dependencies ErrUnsupported, an unknown kind
// ErrUnknownKind.
func (c *Client) EnqueueBatch(ctx context.Context, b *Batch) (BatchResult, error) {
	ps, err := b.plan(c)
	if err != nil {
		return BatchResult{}, err
	}
	res, err := c.EnqueueMany(ctx, ps)
	if err != nil {
		return BatchResult{}, err
	}
	return batchResult(ps, res), nil
}

// EnqueueBatchTx is EnqueueBatch inside tx, the caller's open transaction
// (as EnqueueTx): the batch exists exactly when it commits.
func (c *Client) EnqueueBatchTx(ctx context.Context, tx any, b *Batch) (BatchResult, error) {
	ps, err := b.plan(c)
	if err != nil {
		return BatchResult{}, err
	}
	res, err := c.EnqueueTx(ctx, tx, ps)
	if err != nil {
		return BatchResult{}, err
	}
	return batchResult(ps, res), nil
}

func batchResult(ps []InsertParams, res []InsertResult) BatchResult {
	var out BatchResult
	for i, p := range ps {
		j := res[i].Job
		switch p.Step {
		case BatchOnFinishStep:
			out.OnFinish = j
		case BatchOnSuccessStep:
			out.OnSuccess = j
		default:
			out.Jobs = append(out.Jobs, j)
		}
		if out.ID == 0 && j != nil {
			out.ID = j.WorkflowID
		}
	}
	return out
}

// WorkflowStatus is the state of a workflow or batch as its jobs in the
// store say (Client.WorkflowStatus): jobs pruned or archived since are not
// counted.
type WorkflowStatus struct {
	ID int64 `json:"id"`
	// Batch is true for a batch (its first job names no step).
	Batch bool `json:"batch"`
	// Jobs counts its jobs (a batch's callbacks included); Counts splits
	// them by state.
	Jobs   int           `json:"jobs"`
	Counts map[State]int `json:"counts"`
	// Done is true once every job is final.
	Done bool `json:"done"`
	// CreatedAt is when it was inserted; FinishedAt, once Done, the
	// latest FinishedAt of its jobs (UTC).
	CreatedAt  time.Time `json:"created_at"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
}

// WorkflowStatus reads every job of workflow (or batch) id, a page of
// 1,000 at a time, and counts them by state. It returns an error wrapping
// ErrNotFound when no job of the store has that WorkflowID, and
// ErrUnsupported on a store without contract.Dependencies.
func (c *Client) WorkflowStatus(ctx context.Context, id int64) (WorkflowStatus, error) {
	st := WorkflowStatus{ID: id, Counts: map[State]int{}, Done: true}
	err := c.WorkflowJobs(ctx, id, func(page []*Job) error {
		for _, j := range page {
			if st.Jobs == 0 {
				st.Batch, st.CreatedAt = j.ID == id && j.Step == "", j.CreatedAt
			}
			st.Jobs++
			st.Counts[j.State]++
			if !j.State.Final() {
				st.Done = false
			} else if j.FinishedAt.After(st.FinishedAt) {
				st.FinishedAt = j.FinishedAt
			}
		}
		return nil
	})
	if err != nil {
		return WorkflowStatus{}, err
	}
	if st.Jobs == 0 {
		return WorkflowStatus{}, fmt.Errorf("backlog: workflow %d: %w", id, ErrNotFound)
	}
	if !st.Done {
		st.FinishedAt = time.Time{}
	}
	return st, nil
}

// WorkflowJobs calls fn with the jobs of workflow (or batch) id in id
// order, a page of at most 1,000 at a time, until they end or fn returns
// an error (returned as is). Errors: ErrUnsupported on a store without
// contract.Dependencies, and the store's.
func (c *Client) WorkflowJobs(ctx context.Context, id int64, fn func([]*Job) error) error {
	p := ListParams{WorkflowID: id, Limit: 1000}
	for {
		page, err := c.ListJobs(ctx, p)
		if err != nil {
			return err
		}
		if len(page) > 0 {
			if err := fn(page); err != nil {
				return err
			}
		}
		if len(page) < p.Limit {
			return nil
		}
		p.AfterID = page[len(page)-1].ID
	}
}

// CancelWorkflow cancels every job of workflow (or batch) id not yet
// final with BulkCancel (ApplyToMatching): the waiting ones first, so
// that no step or callback is released by the cancel of what it waits
// for, then the rest, oldest first; a running job gets the cancel its
// handler's context sees. It returns what the bulk actions did together
// (IDs: the first BulkResultIDs of them). Errors: ErrInvalidFilter for an
// id below 1, ErrUnsupported on a store without contract.Dependencies.
func (c *Client) CancelWorkflow(ctx context.Context, id int64) (BulkResult, error) {
	if id < 1 {
		return BulkResult{}, fmt.Errorf("backlog: workflow id %d: %w", id, ErrInvalidFilter)
	}
	if _, ok := c.store.(contract.Dependencies); !ok {
		return BulkResult{}, fmt.Errorf("backlog: cancel workflow %d: %w (the store does not implement contract.Dependencies)", id, ErrUnsupported)
	}
	var total BulkResult
	for _, states := range [][]State{{StateWaiting}, {StateScheduled, StateAvailable, StateRetryable, StateRunning}} {
		for {
			r, err := c.ApplyToMatching(ctx, BulkCancel, ListParams{WorkflowID: id, States: states}, BulkOptions{})
			total.Matched += r.Matched
			total.Applied += r.Applied
			total.Skipped += r.Skipped
			total.IDs = append(total.IDs, r.IDs[:min(len(r.IDs), BulkResultIDs-len(total.IDs))]...)
			if err != nil {
				return total, err
			}
			if r.Matched < MaxBulkJobs || r.Applied == 0 {
				break
			}
		}
	}
	return total, nil
}
