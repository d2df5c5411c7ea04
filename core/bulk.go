package core

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/backlogq/backlog/core/contract"
)

// BulkAction names what Client.ApplyToMatching does to each job it
// matches.
type BulkAction string

// The bulk actions. Each is the client's single-job method applied job by
// job, with that method's rules.
const (
	// BulkRetry makes a job available now (RetryJob): any state but
	// running; a job whose attempts are used up gets one more.
	BulkRetry BulkAction = "retry"
	// BulkCancel cancels a job not in a final state (CancelJob).
	BulkCancel BulkAction = "cancel"
	// BulkDelete deletes a job that is not running (DeleteJob).
	BulkDelete BulkAction = "delete"
	// BulkRunNow makes a scheduled or retryable job available now instead
	// of at its run_at. It is RetryJob restricted to those two states (a
	// retry of a job that is waiting is exactly "run it now": RunAt=now,
	// attempts and errors kept), so it never re-runs a finished job.
	BulkRunNow BulkAction = "run_now"
)

// ErrNoLongerMatches is wrapped by BulkItem.Err for a job that matched
// the filter when its page was read but no longer did when it was read
// again just before the action (its state changed meanwhile).
var ErrNoLongerMatches = errors.New("backlog: job no longer matches the filter")

// BulkActions lists every bulk action.
var BulkActions = []BulkAction{BulkRetry, BulkCancel, BulkDelete, BulkRunNow}

// Valid reports whether a is one of BulkActions.
func (a BulkAction) Valid() bool { return slices.Contains(BulkActions, a) }

// Bounds of a bulk action.
const (
	// MaxBulkJobs is the most jobs one ApplyToMatching matches (and the
	// default of BulkOptions.Limit).
	MaxBulkJobs = 100000
	// MaxBulkIDs is the most ids BulkOptions.IDs may name.
	MaxBulkIDs = 1000
	// DefaultBulkBatch is how many jobs ApplyToMatching reads per List
	// call when BulkOptions.BatchSize is 0.
	DefaultBulkBatch = 500
	// BulkResultIDs is the most ids a BulkResult lists.
	BulkResultIDs = 100
)

// RunNowStates are the states BulkRunNow applies to.
var RunNowStates = []State{StateScheduled, StateRetryable}

// BulkOptions tune Client.ApplyToMatching.
type BulkOptions struct {
	// Limit is the most jobs matched, 1..MaxBulkJobs; 0 means MaxBulkJobs.
	// Jobs are matched in id order, so a limit takes the oldest.
	Limit int
	// DryRun only counts the matching jobs (and lists the first
	// BulkResultIDs of them); nothing changes.
	DryRun bool
	// IDs, when non-empty, restricts the action to these jobs (at most
	// MaxBulkIDs, each > 0; duplicates count once), which must still
	// match the filter. Ids of jobs that do not exist are not matched.
	IDs []int64
	// BatchSize is how many jobs each List call reads, 0 meaning
	// DefaultBulkBatch.
	BatchSize int
	// OnJob, when set, is called after the action on each matched job
	// (not in a dry run), from the calling goroutine, in id order.
	OnJob func(BulkItem)
}

// BulkItem is one job's outcome of a bulk action, for BulkOptions.OnJob.
type BulkItem struct {
	ID int64
	// Job is the job after the action (nil after a delete), or as it was
	// found when it was skipped (nil when it was gone).
	Job *Job
	// Err is why the job was skipped (nil when the action applied): it
	// wraps ErrNoLongerMatches (its state changed since its page was
	// read), ErrInvalidState (the store refused the action in the job's
	// state, such as deleting a running job) or ErrNotFound (it was
	// deleted meanwhile).
	Err error
}

// BulkResult counts what a bulk action did.
type BulkResult struct {
	// Matched is how many jobs matched the filter (at most the limit).
	Matched int `json:"matched"`
	// Applied is how many of them the action changed (0 in a dry run).
	Applied int `json:"applied"`
	// Skipped is how many were left alone because they changed meanwhile
	// (another state, gone) or are in a state the action does not apply to.
	Skipped int `json:"skipped"`
	// IDs are the first BulkResultIDs ids, ascending, of the jobs the
	// action applied to (in a dry run: of the jobs it would apply to).
	IDs []int64 `json:"ids"`
}

// ApplyToMatching applies action to every job matching p's filters
// (Queue, Kind, States, WorkerID, ArgsContains; its paging fields are
// ignored), up to opts.Limit jobs, and returns the counts. It pages
// through the store in id order, opts.BatchSize jobs per List call, so no
// call holds locks for long and memory stays bounded whatever the number
// of jobs; jobs created after the walk passed their id are not matched.
//
// Each job is read again just before the action and skipped unless it
// still matches the filter (its state may have changed since the page was
// read); a job the store refuses for its state (ErrInvalidState, such as
// retrying a running job) or that is gone (ErrNotFound) is skipped too.
// Skips are counted, not errors. BulkRunNow applies to scheduled and
// retryable jobs only: with no States it takes both, and States naming any
// other state are refused.
//
// It returns an error wrapping ErrInvalidFilter for an unknown action,
// invalid states, an invalid ArgsContains pattern, a limit out of range or
// invalid ids, and changes nothing then. Any other error (the store
// failing, ctx ending) stops the walk: the result counts what was done
// before it, along with the error.
//
// The bounded batches follow `backlog jobs retry --state …` of earlier
// versions, which did this in the CLI.
func (c *Client) ApplyToMatching(ctx context.Context, action BulkAction, p ListParams, opts BulkOptions) (BulkResult, error) {
	res := BulkResult{IDs: []int64{}}
	p, leaves, err := bulkFilter(action, p)
	if err != nil {
		return res, err
	}
	limit := opts.Limit
	if limit == 0 {
		limit = MaxBulkJobs
	}
	if limit < 1 || limit > MaxBulkJobs {
		return res, badFilter("bulk %s: limit must be 1..%d, not %d", action, MaxBulkJobs, limit)
	}
	batch := opts.BatchSize
	if batch <= 0 {
		batch = DefaultBulkBatch
	}
	ids, err := bulkIDs(opts.IDs)
	if err != nil {
		return res, err
	}
	matches := func(j *Job) bool {
		f := p
		f.ArgsContains = nil
		return f.Matches(j) && contract.ArgsMatch(j.Args, leaves)
	}
	visit := func(j *Job) error {
		res.Matched++
		if opts.DryRun {
			if len(res.IDs) < BulkResultIDs {
				res.IDs = append(res.IDs, j.ID)
			}
			return nil
		}
		item, err := c.bulkOne(ctx, action, j.ID, matches)
		if err != nil {
			return err
		}
		if item.Err != nil {
			res.Skipped++
		} else {
			res.Applied++
			if len(res.IDs) < BulkResultIDs {
				res.IDs = append(res.IDs, j.ID)
			}
		}
		if opts.OnJob != nil {
			opts.OnJob(item)
		}
		return nil
	}

	if ids != nil {
		for _, id := range ids {
			if res.Matched >= limit {
				break
			}
			if err := ctx.Err(); err != nil {
				return res, err
			}
			j, err := c.store.Get(ctx, id)
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				return res, fmt.Errorf("backlog: bulk %s: read job %d: %w", action, id, err)
			}
			if !matches(j) {
				continue
			}
			if err := visit(j); err != nil {
				return res, err
			}
		}
		return res, nil
	}

	q := p
	for res.Matched < limit {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		q.Limit = min(batch, limit-res.Matched)
		jobs, err := c.store.List(ctx, q)
		if err != nil {
			return res, fmt.Errorf("backlog: bulk %s: list jobs after id %d: %w", action, q.AfterID, err)
		}
		for _, j := range jobs {
			if err := visit(j); err != nil {
				return res, err
			}
		}
		if len(jobs) < q.Limit {
			break
		}
		q.AfterID = jobs[len(jobs)-1].ID
	}
	return res, nil
}

// bulkFilter validates action and the filter of p and returns p without
// paging, with BulkRunNow's states filled in, and its args leaves.
func bulkFilter(action BulkAction, p ListParams) (ListParams, []contract.ArgsLeaf, error) {
	if !action.Valid() {
		return p, nil, badFilter("bulk action %q is not one of retry, cancel, delete, run_now", action)
	}
	p.AfterID, p.Desc, p.Limit = 0, false, 0
	p.States = slices.Clone(p.States)
	for _, s := range p.States {
		if !s.Valid() {
			return p, nil, badFilter("state %q is not one of waiting, scheduled, available, running, retryable, completed, cancelled, discarded", s)
		}
		if action == BulkRunNow && !slices.Contains(RunNowStates, s) {
			return p, nil, badFilter("run_now applies to scheduled and retryable jobs, not to %s ones (retry makes any job that is not running available)", s)
		}
	}
	if action == BulkRunNow && len(p.States) == 0 {
		p.States = slices.Clone(RunNowStates)
	}
	leaves, err := contract.ParseArgsPattern(p.ArgsContains)
	if err != nil {
		return p, nil, err
	}
	return p, leaves, nil
}

// bulkIDs validates BulkOptions.IDs and returns them sorted without
// duplicates (nil when none were given).
func bulkIDs(in []int64) ([]int64, error) {
	if len(in) == 0 {
		return nil, nil
	}
	if len(in) > MaxBulkIDs {
		return nil, badFilter("bulk: %d ids given, over the limit of %d", len(in), MaxBulkIDs)
	}
	ids := slices.Clone(in)
	for _, id := range ids {
		if id < 1 {
			return nil, badFilter("bulk: job id %d is not a positive integer", id)
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

// bulkOne reads job id again and applies action when it still matches.
// Expected refusals come back in the item; other errors are returned.
func (c *Client) bulkOne(ctx context.Context, action BulkAction, id int64, matches func(*Job) bool) (BulkItem, error) {
	item := BulkItem{ID: id}
	j, err := c.store.Get(ctx, id)
	if errors.Is(err, ErrNotFound) {
		item.Err = err
		return item, nil
	}
	if err != nil {
		return item, fmt.Errorf("backlog: bulk %s: read job %d: %w", action, id, err)
	}
	if !matches(j) {
		item.Job = j
		item.Err = fmt.Errorf("job %d is %s now: %w", id, j.State, ErrNoLongerMatches)
		return item, nil
	}
	var after *Job
	switch action {
	case BulkRetry, BulkRunNow:
		after, err = c.RetryJob(ctx, id)
	case BulkCancel:
		after, err = c.CancelJob(ctx, id)
	case BulkDelete:
		err = c.DeleteJob(ctx, id)
	}
	switch {
	case err == nil:
		item.Job = after
	case errors.Is(err, ErrInvalidState) || errors.Is(err, ErrNotFound):
		item.Job = j
		item.Err = err
	default:
		return item, fmt.Errorf("backlog: bulk %s: job %d: %w", action, id, err)
	}
	return item, nil
}
