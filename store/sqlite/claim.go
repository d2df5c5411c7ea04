package sqlite

import (
	"context"
	"fmt"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/core/storekit"
	"github.com/backlogq/backlog/store/internal/sqlq"
)

// claimSQL moves up to LIMIT due jobs of one queue to running and returns
// them. SQLite runs one writer at a time, so the candidate read and the
// claim are one statement no other writer can interleave with: it needs
// no version check and never loses a race. Due: the queue's pending jobs
// whose run_at has come, untagged or with every tag among the worker's
// (the JSON array bound sixth), unless the queue is paused or has
// concurrency limits (those take claimLimited's path). The inner
// SELECT reads them in claim order from the partial claim index
// <prefix>jobs_claim (queue, priority, run_at, id) of pending jobs.
//
// Arguments: worker_id, attempted_at, lease_until, queue, now, worker tags
// (JSON array), queue, true, true, limit.
const claimSQL = `
UPDATE {jobs}
SET state = 'running', attempt = attempt + 1, claim_seq = claim_seq + 1, version = version + 1,
    worker_id = ?, attempted_at = ?, lease_until = ?, progress = NULL
WHERE id IN (
    SELECT id FROM {jobs}
    WHERE queue = ? AND ` + pendingSQL + ` AND run_at <= ?
      AND (tags IS NULL OR NOT EXISTS (
          SELECT 1 FROM json_each(tags) AS jt
          WHERE jt.value NOT IN (SELECT wt.value FROM json_each(?) AS wt)))
      AND NOT EXISTS (SELECT 1 FROM {queues} WHERE name = ? AND (paused = ? OR limited = ?))
    ORDER BY priority, run_at, id
    LIMIT ?)
RETURNING {claimed}`

// limitedCandidatesSQL reads the due jobs a claim of a queue with limits
// may take, in claim order, leaving out the kinds and partition keys
// whose limit is reached (JSON arrays bound fourth and fifth). It runs
// in the claim's write transaction, which no other writer interleaves
// with, after the running jobs were counted.
//
// Arguments: queue, now, worker tags (JSON array), full kinds (JSON
// array), full partition keys (JSON array), lowest and highest priority,
// limit. limitedCandidatesPartSQL reads one partition key of a fair
// queue (a range of jobs_fair) and takes it after the priorities.
const limitedCandidatesSQL = limitedCandidatesWhere + `
ORDER BY priority, run_at, id
LIMIT ?`

const limitedCandidatesPartSQL = limitedCandidatesWhere + ` AND partition_key = ?
ORDER BY priority, run_at, id
LIMIT ?`

const limitedCandidatesWhere = `
SELECT id, kind, partition_key, priority, run_at FROM {jobs}
WHERE queue = ? AND ` + pendingSQL + ` AND run_at <= ?
  AND (tags IS NULL OR NOT EXISTS (
      SELECT 1 FROM json_each(tags) AS jt
      WHERE jt.value NOT IN (SELECT wt.value FROM json_each(?) AS wt)))
  AND kind NOT IN (SELECT value FROM json_each(?))
  AND (partition_key IS NULL OR partition_key NOT IN (SELECT value FROM json_each(?)))
  AND priority BETWEEN ? AND ?`

// limitedClaimSQL moves the candidates a limited claim took (%s: their
// ids) to running.
//
// Arguments: worker_id, attempted_at, lease_until, then the ids.
const limitedClaimSQL = `
UPDATE {jobs}
SET state = 'running', attempt = attempt + 1, claim_seq = claim_seq + 1, version = version + 1,
    worker_id = ?, attempted_at = ?, lease_until = ?, progress = NULL
WHERE id IN (%s) AND ` + pendingSQL + `
RETURNING {claimed}`

// Claim moves up to p.Limit due jobs of p.Queue to running for p.WorkerID
// with claimSQL, in one write transaction, and returns them in claim order
// (priority, run_at, id). A paused queue yields no jobs and a nil error.
func (s *Store) Claim(ctx context.Context, p contract.ClaimParams) ([]*contract.Job, error) {
	if p.Limit < 1 {
		return nil, fmt.Errorf("sqlite: claim limit %d is below 1: %w", p.Limit, contract.ErrInvalidArgument)
	}
	d := dialect{}
	out, err := inTx(ctx, s, func(c sqlq.Conn) ([]*contract.Job, error) {
		hint := s.LimitedHint(p.Queue)
		if !hint {
			out, err := sqlq.ScanClaimed(&p)(c.Query(ctx, s.sql.claim, p.WorkerID, d.Time(p.Now), d.Time(p.LeaseUntil),
				p.Queue, d.Time(p.Now), sqlq.TagsArg(p.Tags), p.Queue, true, true, p.Limit))
			if err != nil || len(out) > 0 {
				return out, err
			}
		}
		// Nothing claimed (or the queue had limits at the last claim):
		// the queue may have limits, which claimSQL leaves to
		// claimLimited.
		limited, err := s.QueueLimited(ctx, c, p.Queue)
		if err != nil {
			return nil, err
		}
		s.SetLimitedHint(p.Queue, limited)
		if !limited {
			if hint { // limits lifted since: the path of unlimited queues
				return sqlq.ScanClaimed(&p)(c.Query(ctx, s.sql.claim, p.WorkerID, d.Time(p.Now), d.Time(p.LeaseUntil),
					p.Queue, d.Time(p.Now), sqlq.TagsArg(p.Tags), p.Queue, true, true, p.Limit))
			}
			return nil, nil
		}
		return s.claimLimited(ctx, c, p)
	})
	if err != nil {
		return nil, err
	}
	storekit.SortClaimOrder(out)
	return out, nil
}

// claimLimited claims from a queue with concurrency limits on c, the
// claim's write transaction: SQLite runs one writer at a time, so the
// count of running jobs (sqlq.Store.LockClaimRoom), the candidate reads
// (limitedCandidatesSQL) and the claim (limitedClaimSQL) see no other
// claim in between.
func (s *Store) claimLimited(ctx context.Context, c sqlq.Conn, p contract.ClaimParams) ([]*contract.Job, error) {
	now := contract.UTC(p.Now)
	room, err := s.LockClaimRoom(ctx, c, p.Queue, now)
	if err != nil || room == nil {
		return nil, err
	}
	d := dialect{}
	read := func(f storekit.CandidateFilter, n int) ([]storekit.LimitCandidate, error) {
		lo, hi := f.PriorityRange()
		args := []any{p.Queue, d.Time(now), sqlq.TagsArg(p.Tags), sqlq.TagsArg(f.FullKinds), sqlq.TagsArg(f.FullParts), lo, hi}
		q := s.sql.limitedCands
		if f.Partition != "" {
			q, args = s.sql.limitedCandsPart, append(args, f.Partition)
		}
		return sqlq.ScanLimitCandidates(c.Query(ctx, q, append(args, n)...))
	}
	take := func(cands []storekit.LimitCandidate) ([]*contract.Job, error) {
		args := make([]any, 0, 3+len(cands))
		args = append(args, p.WorkerID, d.Time(now), d.Time(p.LeaseUntil))
		for _, lc := range cands {
			args = append(args, lc.ID)
		}
		return sqlq.ScanClaimed(&p)(c.Query(ctx, fmt.Sprintf(s.sql.limitedClaim, marks(len(cands))), args...))
	}
	parts := func(after string, n int) ([]string, error) {
		return s.FairPartitions(ctx, c, p.Queue, "partition_key", pendingSQL, after, n)
	}
	out, err := storekit.ClaimLimited(p.Limit, room, storekit.LimitedReads{Read: read, Take: take, Partitions: parts})
	if err != nil {
		return nil, err
	}
	return out, s.SaveClaimRoom(ctx, c, p.Queue, room, now)
}
