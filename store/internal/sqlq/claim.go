package sqlq

import (
	"context"

	"github.com/backlogq/backlog/core"
)

// Claim moves up to p.Limit due jobs of p.Queue to running for p.WorkerID
// and returns them in claim order (priority, run_at, id). A paused queue
// yields no jobs and a nil error. It is the claim of a single-writer
// database (SQLite): one statement reads the candidates and claims them,
// UPDATE … WHERE id IN (SELECT id … ORDER BY … LIMIT n) RETURNING …, and
// the database's write lock keeps every other writer out in between, so
// it needs no version check.
func (s *Store) Claim(ctx context.Context, p core.ClaimParams) ([]*core.Job, error) {
	if p.Limit <= 0 {
		return nil, nil
	}
	var out []*core.Job
	err := s.tx(ctx, func(c Conn) (err error) {
		b := newBuilder(s.d, 8)
		b.w("UPDATE ", s.t.Jobs, " SET state = 'running', attempt = attempt + 1, claim_seq = claim_seq + 1, version = version + 1, worker_id = ", b.arg(p.WorkerID),
			", attempted_at = ", b.arg(s.d.Time(p.Now)), ", lease_until = ", b.arg(s.d.Time(p.LeaseUntil)))
		b.w(" WHERE id IN (SELECT id FROM ", s.t.Jobs, " WHERE queue = ", b.arg(p.Queue), " AND state IN ", pendingIn, " AND run_at <= ", b.arg(s.d.Time(p.Now)),
			" AND ", TagsRouting(s.d, b.arg(TagsArg(p.Tags))),
			" AND NOT EXISTS (SELECT 1 FROM ", s.t.Queues, " WHERE name = ", b.arg(p.Queue), " AND paused = ", b.arg(true), ")")
		b.w(" ORDER BY priority, run_at, id LIMIT ", b.arg(p.Limit), ") RETURNING ", JobColumns)
		out, err = ScanJobs(c.Query(ctx, b.String(), b.args...))
		return err
	})
	if err != nil {
		return nil, err
	}
	SortClaimOrder(out)
	return out, nil
}
