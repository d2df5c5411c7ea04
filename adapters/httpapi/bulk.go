package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/backlogq/backlog/core"
)

// BulkRequest is the body of POST /v1/jobs/bulk: an action applied, on
// the server, to every job matching Filter (see core.Client.ApplyToMatching).
type BulkRequest struct {
	// Action is retry, cancel, delete or run_now (core.BulkAction).
	Action string `json:"action"`
	// Filter selects the jobs; it must name at least one criterion.
	Filter BulkFilter `json:"filter"`
	// Limit is the most jobs matched, 1..core.MaxBulkJobs; 0 or absent
	// means core.MaxBulkJobs. The oldest (lowest ids) are taken first.
	Limit int `json:"limit,omitempty"`
	// DryRun only counts the matching jobs; nothing changes.
	DryRun bool `json:"dry_run,omitempty"`
}

// BulkFilter selects the jobs of a bulk action. Criteria combine with
// AND; at least one must be given, so an empty filter never means every
// job (name every state to mean that).
type BulkFilter struct {
	Queue  string       `json:"queue,omitempty"`
	Kind   string       `json:"kind,omitempty"`
	States []core.State `json:"states,omitempty"`
	// IDs restricts the action to these jobs (1..core.MaxBulkIDs ids),
	// which must still match the other criteria.
	IDs []int64 `json:"ids,omitempty"`
	// Args keeps jobs whose args contain this JSON object
	// (core.ListParams.ArgsContains); sealed args never match.
	Args json.RawMessage `json:"args,omitempty"`
}

// BulkResponse answers POST /v1/jobs/bulk with core.BulkResult's counts:
// how many jobs matched, how many the action changed, how many it skipped
// (changed meanwhile, or in a state the action does not apply to), and
// the first 100 ids it applied to (in a dry run: would apply to).
type BulkResponse struct {
	Matched int     `json:"matched"`
	Applied int     `json:"applied"`
	Skipped int     `json:"skipped"`
	IDs     []int64 `json:"ids"`
}

// BulkExtraTime is how much longer than Config.WriteTimeout a bulk
// request may take to be answered: an action applies one store write per
// job (about 200 to 2000 jobs a second, depending on the database and its
// durability settings), so core.MaxBulkJobs jobs can take minutes.
const BulkExtraTime = 15 * time.Minute

// bulk serves POST /v1/jobs/bulk. It holds one of the MaxHeavyRequests
// slots while it runs, and its write deadline is Config.WriteTimeout plus
// BulkExtraTime. Once started, an action that changes jobs runs to its end
// even if the caller goes away, so the counts it logs are whole.
func (s *Server) bulk(w http.ResponseWriter, r *http.Request) error {
	// Before the body is read: its end moves the read deadline to this
	// one (see setDeadlines).
	if s.cfg.WriteTimeout > 0 {
		extendWrite(w, r, s.cfg.WriteTimeout+BulkExtraTime)
	}
	var req BulkRequest
	if err := s.decodeBody(w, r, &req, true); err != nil {
		return err
	}
	action, p, opts, err := bulkParams(req)
	if err != nil {
		return err
	}
	ctx := r.Context()
	if err := s.heavy.acquire(ctx); err != nil {
		return err
	}
	defer s.heavy.release()
	if !req.DryRun {
		ctx = context.WithoutCancel(ctx)
	}
	res, err := s.c.ApplyToMatching(ctx, action, p, opts)
	if err != nil {
		if errors.Is(err, core.ErrInvalidFilter) {
			return newProblem(SlugInvalidRequest, trimFilter(err))
		}
		if res.Applied > 0 {
			reqFrom(r.Context()).log.Error("backlog http: bulk action failed part-way", "action", action,
				"matched", res.Matched, "applied", res.Applied, "skipped", res.Skipped, "err", err)
		}
		return err
	}
	if res.Applied > 0 {
		reqFrom(r.Context()).log.Info("backlog http: bulk action", "action", action,
			"matched", res.Matched, "applied", res.Applied, "skipped", res.Skipped)
		if action == core.BulkRetry || action == core.BulkRunNow {
			s.wake.broadcast()
		}
	}
	writeJSON(w, http.StatusOK, BulkResponse{Matched: res.Matched, Applied: res.Applied, Skipped: res.Skipped, IDs: res.IDs})
	return nil
}

// bulkParams checks a bulk request and turns it into ApplyToMatching's
// arguments; bad input is an invalid-request problem.
func bulkParams(req BulkRequest) (core.BulkAction, core.ListParams, core.BulkOptions, error) {
	bad := func(format string, a ...any) (core.BulkAction, core.ListParams, core.BulkOptions, error) {
		return "", core.ListParams{}, core.BulkOptions{}, newProblem(SlugInvalidRequest, fmt.Sprintf(format, a...))
	}
	action := core.BulkAction(req.Action)
	if !action.Valid() {
		return bad("action must be retry, cancel, delete or run_now, not %q", req.Action)
	}
	f := req.Filter
	if f.Queue == "" && f.Kind == "" && len(f.States) == 0 && len(f.IDs) == 0 && len(f.Args) == 0 {
		return bad("filter must name at least one of queue, kind, states, ids or args (to act on every job, name every state)")
	}
	if req.Limit < 0 || req.Limit > core.MaxBulkJobs {
		return bad("limit must be 1..%d (absent: %d), not %d", core.MaxBulkJobs, core.MaxBulkJobs, req.Limit)
	}
	if len(f.IDs) > core.MaxBulkIDs {
		return bad("filter.ids holds %d ids, over the limit of %d", len(f.IDs), core.MaxBulkIDs)
	}
	p := core.ListParams{Queue: f.Queue, Kind: f.Kind, States: f.States}
	if len(f.Args) > 0 {
		p.ArgsContains = f.Args
	}
	opts := core.BulkOptions{Limit: req.Limit, DryRun: req.DryRun, IDs: f.IDs}
	return action, p, opts, nil
}

// trimFilter drops core's "backlog: invalid filter: " prefix.
func trimFilter(err error) string {
	return strings.Replace(err.Error(), core.ErrInvalidFilter.Error()+": ", "", 1)
}
