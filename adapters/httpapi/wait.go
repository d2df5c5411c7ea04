package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/backlogq/backlog/core"
)

// MaxJobWait is the longest wait GET /v1/jobs/{id}?wait=… accepts.
const MaxJobWait = 60 * time.Second

// jobWait reads the wait parameter of GET /v1/jobs/{id}: a duration with
// its unit ("30s", "1m", "1500ms") or whole seconds ("30"), from 0 to
// MaxJobWait. has is false when the query has no wait; a wait given
// twice, malformed, negative or over MaxJobWait is a 400
// invalid-request problem.
func jobWait(q url.Values) (wait time.Duration, has bool, err error) {
	vs, has := q["wait"]
	if !has {
		return 0, false, nil
	}
	if len(vs) != 1 {
		return 0, true, newProblem(SlugInvalidRequest, "give wait once")
	}
	v := strings.TrimSpace(vs[0])
	bad := newProblem(SlugInvalidRequest, fmt.Sprintf(
		"wait must be a duration from 0s to %s, such as 30s, 1m or 1500ms, or whole seconds (30), not %q", MaxJobWait, clip(vs[0])))
	if n, ok := parseDecimal(v, 0, int64(MaxJobWait/time.Second)); ok {
		return time.Duration(n) * time.Second, true, nil
	}
	d, perr := time.ParseDuration(v)
	if perr != nil || d < 0 || d > MaxJobWait {
		return 0, true, bad
	}
	return d, true, nil
}

// waitJob answers GET /v1/jobs/{id}?wait=D, a long-poll: 200 with the job
// as soon as it is final (completed, cancelled or discarded), or, when D
// passes first (or the server closes), 202 with the job as it is then,
// not final. wait=0 answers at once, 200 or 202 alike. A missing job is
// 404 job-not-found.
//
// The wait is the client's core.Client.Wait: every long-poll of the
// server shares one waiter loop, which reads the waited jobs together
// (and this server's engine and the store's cancel notifications wake it
// at once), so waiting holds no store connection and no job. The request
// counts against Config.MaxHeavyRequests while it holds its job to
// answer, as a long-polling claim does while it holds jobs: a 429
// too-many-requests when no slot comes free within 5 s. Its write
// deadline is extended by the wait.
func (s *Server) waitJob(w http.ResponseWriter, r *http.Request, id int64, wait time.Duration) error {
	ctx := r.Context()
	if s.cfg.WriteTimeout > 0 {
		extendWrite(w, r, s.cfg.WriteTimeout+wait)
	}
	var j *core.Job
	if wait > 0 {
		s.waiting.Add(1)
		wctx, cancel := context.WithTimeout(ctx, wait)
		stop := context.AfterFunc(s.ctx, cancel) // Close ends the wait
		var err error
		j, err = s.c.Wait(wctx, id)
		stop()
		cancel()
		s.waiting.Add(-1)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
			j = nil // the wait ended: answer with the job as it is now
		case err != nil:
			return notFound(id, err)
		}
	}
	if err := s.heavy.acquire(ctx); err != nil {
		return err
	}
	defer s.heavy.release()
	if j == nil {
		var err error
		if j, err = s.c.GetJob(ctx, id); err != nil {
			return notFound(id, err)
		}
	}
	status := http.StatusOK
	if !j.State.Final() {
		status = http.StatusAccepted
	}
	writeJSON(w, status, JobResponse{Job: s.apiJob(ctx, j)})
	return nil
}
