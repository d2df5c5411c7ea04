package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/backlogq/backlog/core"
)

// QueueLimits returns the cluster-wide concurrency limits stored for queue
// (GET /v1/queues/{name}/limits; producer role): zero fields mean no
// limit. A queue name the server refuses returns a *Problem matching
// ErrInvalidRequest; a store without limits one matching
// core.ErrUnsupported.
func (c *Client) QueueLimits(ctx context.Context, queue string) (core.QueueLimits, error) {
	var out struct {
		Limits core.QueueLimits `json:"limits"`
	}
	path := "/queues/" + url.PathEscape(queue) + "/limits"
	if _, err := c.do(ctx, call{method: http.MethodGet, path: path, out: &out, mode: retryIdempotent}); err != nil {
		return core.QueueLimits{}, err
	}
	return out.Limits, nil
}

// RateWaits returns the queue's rate-limited groups whose jobs wait for
// their next start (GET /v1/queues/{name}/limits, its rate_waits; the
// producer role), sorted by group; none when no group waits.
func (c *Client) RateWaits(ctx context.Context, queue string) ([]core.RateWait, error) {
	var out struct {
		RateWaits []core.RateWait `json:"rate_waits"`
	}
	path := "/queues/" + url.PathEscape(queue) + "/limits"
	if _, err := c.do(ctx, call{method: http.MethodGet, path: path, out: &out, mode: retryIdempotent}); err != nil {
		return nil, err
	}
	return out.RateWaits, nil
}

// SetQueueLimits replaces the queue's concurrency limits with l (PUT
// /v1/queues/{name}/limits; admin role; the zero value lifts them all)
// and returns them as the server stored them. Every node's claims obey
// them at once. Limits core.QueueLimits.Validate refuses return a
// *Problem matching ErrInvalidRequest. Retried after transient failures
// (setting the same limits twice is harmless).
func (c *Client) SetQueueLimits(ctx context.Context, queue string, l core.QueueLimits) (core.QueueLimits, error) {
	var out struct {
		Limits core.QueueLimits `json:"limits"`
	}
	path := "/queues/" + url.PathEscape(queue) + "/limits"
	if _, err := c.do(ctx, call{method: http.MethodPut, path: path, body: l, out: &out, mode: retryIdempotent}); err != nil {
		return core.QueueLimits{}, err
	}
	return out.Limits, nil
}
