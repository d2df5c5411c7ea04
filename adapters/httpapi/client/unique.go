package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/backlogq/backlog/adapters/httpapi/apitypes"
	"github.com/backlogq/backlog/core"
)

// UniqueHolds returns a page of the holds on unique keys held now, by
// scoped key after `after` ("" = from the start), at most limit of them
// (1..1000; 0 means 100), and the cursor of the next page ("" on the
// last; a page may be short and still have one) (GET /v1/unique; admin
// role). Fingerprints are not part of the API.
func (c *Client) UniqueHolds(ctx context.Context, after string, limit int) (holds []core.UniqueHold, next string, err error) {
	q := url.Values{}
	if after != "" {
		q.Set("after", after)
	}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out struct {
		Holds     []apitypes.UniqueHold `json:"holds"`
		NextAfter string                `json:"next_after"`
	}
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/unique", query: q, out: &out, mode: retryIdempotent}); err != nil {
		return nil, "", err
	}
	holds = make([]core.UniqueHold, len(out.Holds))
	for i, h := range out.Holds {
		holds[i] = h.Core()
	}
	return holds, out.NextAfter, nil
}

// ReleaseUniqueHold ends the hold on key in scope (queue names the queue
// of core.UniqueQueue, kind the kind of core.UniqueKind; both "" for
// core.UniqueGlobal) and returns it as it was (DELETE /v1/unique/{key};
// admin role). A key nothing holds returns a *Problem matching
// core.ErrNotFound; a job not yet finished holding it one matching
// core.ErrInvalidState. Not retried: a second release of a key taken
// again meanwhile would end the new job's hold.
func (c *Client) ReleaseUniqueHold(ctx context.Context, key string, scope core.UniqueScope, queue, kind string) (core.UniqueHold, error) {
	q := url.Values{}
	if scope != core.UniqueGlobal {
		q.Set("scope", scope.String())
	}
	if queue != "" {
		q.Set("queue", queue)
	}
	if kind != "" {
		q.Set("kind", kind)
	}
	var out struct {
		Hold apitypes.UniqueHold `json:"hold"`
	}
	if _, err := c.do(ctx, call{method: http.MethodDelete, path: "/unique/" + url.PathEscape(key), query: q, out: &out, mode: retrySafe}); err != nil {
		return core.UniqueHold{}, err
	}
	return out.Hold.Core(), nil
}
