package sqlite

import (
	"context"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/store/internal/sqlq"
)

// claimSQL moves up to LIMIT due jobs of one queue to running and returns
// them. SQLite runs one writer at a time, so the candidate read and the
// claim are one statement no other writer can interleave with: it needs
// no version check and never loses a race. Due: the queue's pending jobs
// whose run_at has come, untagged or with every tag among the worker's
// (the JSON array bound sixth), unless the queue is paused. The inner
// SELECT reads them in claim order from the partial claim index
// <prefix>jobs_claim (queue, priority, run_at, id) of pending jobs.
//
// Arguments: worker_id, attempted_at, lease_until, queue, now, worker tags
// (JSON array), queue, true, limit.
const claimSQL = `
UPDATE {jobs}
SET state = 'running', attempt = attempt + 1, claim_seq = claim_seq + 1, version = version + 1,
    worker_id = ?, attempted_at = ?, lease_until = ?
WHERE id IN (
    SELECT id FROM {jobs}
    WHERE queue = ? AND state IN ('scheduled','available','retryable') AND run_at <= ?
      AND (tags IS NULL OR NOT EXISTS (
          SELECT 1 FROM json_each(tags) AS jt
          WHERE jt.value NOT IN (SELECT wt.value FROM json_each(?) AS wt)))
      AND NOT EXISTS (SELECT 1 FROM {queues} WHERE name = ? AND paused = ?)
    ORDER BY priority, run_at, id
    LIMIT ?)
RETURNING {columns}`

// Claim moves up to p.Limit due jobs of p.Queue to running for p.WorkerID
// with claimSQL, in one write transaction, and returns them in claim order
// (priority, run_at, id). A paused queue yields no jobs and a nil error.
func (s *Store) Claim(ctx context.Context, p core.ClaimParams) ([]*core.Job, error) {
	if p.Limit <= 0 {
		return nil, nil
	}
	d := dialect{}
	out, err := inTx(ctx, s, func(c sqlq.Conn) ([]*core.Job, error) {
		return sqlq.ScanJobs(c.Query(ctx, s.sql.claim, p.WorkerID, d.Time(p.Now), d.Time(p.LeaseUntil),
			p.Queue, d.Time(p.Now), sqlq.TagsArg(p.Tags), p.Queue, true, p.Limit))
	})
	if err != nil {
		return nil, err
	}
	sqlq.SortClaimOrder(out)
	return out, nil
}
