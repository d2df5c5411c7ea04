package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// MaxWait is the longest wait one long-poll asks the server for (the
// server's httpapi.MaxJobWait); Wait asks again until the job is final.
const MaxWait = 60 * time.Second

// earlyAnswerPause is how long Wait pauses before it asks again after a
// long-poll that came back, not final, well before its wait.
const earlyAnswerPause = time.Second

// WaitJob long-polls once (GET /v1/jobs/{id}?wait=…; producer or worker
// role): it returns the job and final=true as soon as the job is final
// (completed, cancelled or discarded), or, when wait passes first, the job
// as it is then and final=false. wait is cut to 0..MaxWait and sent in
// milliseconds; the request's time limit grows by it. A missing job is a
// *Problem matching core.ErrNotFound. The call is retried under the client's
// RetryPolicy (it changes nothing).
func (c *Client) WaitJob(ctx context.Context, id int64, wait time.Duration) (j *Job, final bool, err error) {
	wait = min(max(wait, 0), MaxWait).Truncate(time.Millisecond)
	q := url.Values{"wait": {strconv.FormatInt(wait.Milliseconds(), 10) + "ms"}}
	var out jobEnvelope
	if _, err := c.do(ctx, call{method: http.MethodGet, path: jobPath(id, ""), query: q, out: &out, mode: retryIdempotent, wait: wait}); err != nil {
		return nil, false, err
	}
	if out.Job == nil {
		return nil, false, nil
	}
	return out.Job, out.Job.State.Final(), nil
}

// Wait blocks until job id is final (completed, cancelled or discarded)
// and returns it: state, result and errors history (the last entry is a
// discarded job's final error). It long-polls the server with WaitJob,
// MaxWait at a time (less when ctx's deadline is nearer), again until the
// job is final, so a wait may last as long as ctx allows (after an answer
// that came back early, not final, it pauses a second before asking
// again). It returns ctx's error (ctx.Err()) when ctx ends first, a
// *Problem matching core.ErrNotFound for a missing job, and the errors of
// WaitJob.
func (c *Client) Wait(ctx context.Context, id int64) (*Job, error) {
	for {
		wait := MaxWait
		if dl, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(dl))
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		start := time.Now()
		j, final, err := c.WaitJob(ctx, id, wait)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, err
		}
		if final {
			return j, nil
		}
		if _, ok := ctx.Deadline(); ok && wait <= 0 {
			// The deadline is here: the answer was the job as it is.
			<-ctx.Done()
			return nil, ctx.Err()
		}
		if time.Since(start) < wait/2 {
			// Answered early, not final (a server shutting down): ask
			// again after a pause, not at once.
			if !sleep(ctx, min(earlyAnswerPause, wait)) {
				return nil, ctx.Err()
			}
		}
	}
}
