package client

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/backlogq/backlog/core"
)

// BulkRequest is the body of POST /v1/jobs/bulk: Action applied by the
// server to every job matching Filter (see core.Client.ApplyToMatching).
type BulkRequest struct {
	// Action is core.BulkRetry, BulkCancel, BulkDelete or BulkRunNow.
	Action core.BulkAction `json:"action"`
	// Filter selects the jobs; the server refuses an empty one.
	Filter BulkFilter `json:"filter"`
	// Limit is the most jobs matched (oldest first), 1..core.MaxBulkJobs;
	// 0 means core.MaxBulkJobs.
	Limit int `json:"limit,omitempty"`
	// DryRun only counts the matching jobs; nothing changes.
	DryRun bool `json:"dry_run,omitempty"`
}

// BulkFilter selects the jobs of a bulk action; criteria combine with AND
// and at least one must be set.
type BulkFilter struct {
	Queue  string       `json:"queue,omitempty"`
	Kind   string       `json:"kind,omitempty"`
	States []core.State `json:"states,omitempty"`
	// IDs restricts the action to these jobs (at most core.MaxBulkIDs).
	IDs []int64 `json:"ids,omitempty"`
	// Args keeps jobs whose args contain this JSON object (see
	// core.ListParams.ArgsContains).
	Args json.RawMessage `json:"args,omitempty"`
}

// bulkWait is how much longer than the client's timeout a bulk call may
// take (httpapi.BulkExtraTime).
const bulkWait = 15 * time.Minute

// Bulk asks the server to apply req.Action to every job matching
// req.Filter and returns its counts: matched, applied, skipped (changed
// meanwhile or in a state the action does not apply to) and the first
// core.BulkResultIDs ids it applied to (would apply to, in a dry run).
// Bad input is an error wrapping ErrInvalidRequest with the server's
// message; a token without the admin role gets ErrForbidden. A dry run is
// retried on any transient failure; an action only on failures proving
// the server did nothing (it skips jobs no longer matching, so running it
// twice would be harmless, but the counts of the first would be lost).
func (c *Client) Bulk(ctx context.Context, req BulkRequest) (core.BulkResult, error) {
	var out core.BulkResult
	mode := retrySafe
	if req.DryRun {
		mode = retryIdempotent
	}
	// The server may take minutes over a large action (its write deadline
	// is extended by httpapi.BulkExtraTime): wait for it.
	if _, err := c.do(ctx, call{method: http.MethodPost, path: "/jobs/bulk", body: req, out: &out, mode: mode, wait: bulkWait}); err != nil {
		return core.BulkResult{}, err
	}
	if out.IDs == nil {
		out.IDs = []int64{}
	}
	return out, nil
}
