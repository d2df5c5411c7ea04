package mysql

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/store/internal/sqlq"
)

// claimFrom is the FROM … WHERE of both claims' reads: due jobs of one queue
// through the claim index (equality on queue and pending, then index order
// is claim order), jobs the worker's tags allow, unless the queue is
// paused. Arguments: queue, now, tags, queue, limit (claimArgs). The
// paused subquery takes no lock, even under FOR UPDATE.
func (s *Store) claimFrom() string {
	return " FROM " + s.t.Jobs + " FORCE INDEX (claim_idx) WHERE queue = ? AND pending = 1 AND run_at <= ? AND " + sqlq.TagsRouting(s.d, "?") +
		" AND NOT EXISTS (SELECT 1 FROM " + s.t.Queues + " WHERE name = ? AND paused = TRUE)" +
		" ORDER BY priority, run_at, id LIMIT ?"
}

// claimArgs are the bind arguments of claimFrom.
func (s *Store) claimArgs(p core.ClaimParams, limit int) []any {
	return []any{p.Queue, s.d.Time(p.Now), sqlq.TagsArg(p.Tags), p.Queue, limit}
}

// Claim moves up to p.Limit due jobs of p.Queue to running for p.WorkerID
// with the configured strategy and returns them in claim order (priority,
// run_at, id). A paused queue yields no jobs and a nil error. Deadlocks and
// lock wait timeouts are retried inside.
func (s *Store) Claim(ctx context.Context, p core.ClaimParams) ([]*core.Job, error) {
	if p.Limit <= 0 {
		return nil, nil
	}
	var out []*core.Job
	err := s.retry(ctx, func() (err error) {
		if s.strategy == core.StrategySkipLocked {
			err = s.sdb.InTx(ctx, func(c sqlq.Conn) (err error) {
				out, err = s.claimSkipLocked(ctx, c, p)
				return err
			})
		} else {
			out, err = s.claimOptimistic(ctx, p)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// claimSkipLocked reads and locks up to p.Limit due jobs with FOR UPDATE
// SKIP LOCKED (rows other claimers hold are passed over, not waited for),
// updates them to running by primary key, and returns them as they now
// are, in the caller's READ COMMITTED transaction.
func (s *Store) claimSkipLocked(ctx context.Context, c sqlq.Conn, p core.ClaimParams) ([]*core.Job, error) {
	jobs, err := sqlq.ScanJobs(c.Query(ctx, "SELECT "+sqlq.JobColumns+s.claimFrom()+" FOR UPDATE SKIP LOCKED",
		s.claimArgs(p, p.Limit)...))
	if err != nil || len(jobs) == 0 {
		return nil, err
	}
	args := make([]any, 0, 3+len(jobs))
	args = append(args, p.WorkerID, s.d.Time(p.Now), s.d.Time(p.LeaseUntil))
	for _, j := range jobs {
		args = append(args, j.ID)
	}
	res, err := c.Exec(ctx, "UPDATE "+s.t.Jobs+" SET state = 'running', attempt = attempt + 1, claim_seq = claim_seq + 1, version = version + 1, worker_id = ?, attempted_at = ?, lease_until = ? WHERE id IN ("+marks(len(jobs))+")", args...)
	if err != nil {
		return nil, err
	}
	if n, err := res.RowsAffected(); err != nil {
		return nil, err
	} else if int(n) != len(jobs) {
		return nil, fmt.Errorf("mysql: claim updated %d of %d locked rows", n, len(jobs))
	}
	for _, j := range jobs {
		claimed(j, p)
	}
	return jobs, nil
}

// claimed sets on j what a claim wrote.
func claimed(j *core.Job, p core.ClaimParams) {
	j.State = core.StateRunning
	j.Attempt++
	j.ClaimSeq++
	j.WorkerID = p.WorkerID
	j.AttemptedAt = core.UTC(p.Now)
	j.LeaseUntil = core.UTC(p.LeaseUntil)
}

// candidate is a job read by the optimistic claim with its version.
type candidate struct {
	job     *core.Job
	version int64
}

// claimOptimistic reads candidates without locks, then claims them with one
// compare-and-set UPDATE per round in autocommit: a row whose version moved
// was taken (or changed) by someone else and is skipped. The UPDATE stamps
// a random version token, so when it touched fewer rows than it was given,
// a read of that token says which it won. Candidates are read again at
// most a few times while races are lost and jobs are still wanted.
func (s *Store) claimOptimistic(ctx context.Context, p core.ClaimParams) ([]*core.Job, error) {
	want := p.Limit
	var out []*core.Job
	for round := 0; round < 4 && want > 0; round++ {
		fetch := want + want/4 + 1 // over-fetch a little to absorb lost races
		cands, err := s.candidates(ctx, p, fetch)
		if err != nil {
			if len(out) > 0 {
				break
			}
			return nil, err
		}
		lost := false
		for len(cands) > 0 && want > 0 {
			take := cands[:min(want, len(cands))]
			cands = cands[len(take):]
			got, err := s.casClaim(ctx, p, take)
			if err != nil {
				if len(out) > 0 {
					// Keep what we won (those claims committed); the update
					// that failed took no effect and the next claim will
					// meet its cause again.
					sqlq.SortClaimOrder(out)
					return out, nil
				}
				return nil, err
			}
			out = append(out, got...)
			want -= len(got)
			if len(got) < len(take) {
				lost = true
			}
		}
		if !lost {
			break // every candidate was ours: the queue has no more due jobs
		}
	}
	sqlq.SortClaimOrder(out)
	return out, nil
}

// candidates reads up to fetch due jobs, with their versions, in claim
// order, without locks.
func (s *Store) candidates(ctx context.Context, p core.ClaimParams, fetch int) ([]candidate, error) {
	rows, err := s.sdb.Query(ctx, "SELECT "+sqlq.JobColumns+", version"+s.claimFrom(), s.claimArgs(p, fetch)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []candidate
	for rows.Next() {
		var cd candidate
		j, err := sqlq.ScanJob(withExtra{rows, []any{&cd.version}})
		if err != nil {
			return nil, err
		}
		cd.job = j
		out = append(out, cd)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, rows.Close()
}

// casClaim claims the candidates whose version is unchanged and that are
// still due, and returns them as they now are.
func (s *Store) casClaim(ctx context.Context, p core.ClaimParams, take []candidate) ([]*core.Job, error) {
	token := rand.Int64() | 1<<62 // far from any version+1 count
	args := make([]any, 0, 6+3*len(take))
	args = append(args, token, p.WorkerID, s.d.Time(p.Now), s.d.Time(p.LeaseUntil))
	var q strings.Builder
	q.WriteString("UPDATE " + s.t.Jobs + " SET state = 'running', attempt = attempt + 1, claim_seq = claim_seq + 1, version = ?, worker_id = ?, attempted_at = ?, lease_until = ? WHERE id IN (")
	q.WriteString(marks(len(take)))
	for _, cd := range take {
		args = append(args, cd.job.ID)
	}
	q.WriteString(") AND version = CASE id")
	for _, cd := range take {
		q.WriteString(" WHEN ? THEN ?")
		args = append(args, cd.job.ID, cd.version)
	}
	q.WriteString(" END AND pending = 1 AND run_at <= ?")
	args = append(args, s.d.Time(p.Now))
	res, err := s.sdb.Exec(ctx, q.String(), args...)
	if err != nil {
		return nil, err
	}
	n, err := res.RowsAffected()
	if err != nil || n == 0 {
		return nil, err
	}
	won := make(map[int64]bool, len(take))
	if int(n) == len(take) {
		for _, cd := range take {
			won[cd.job.ID] = true
		}
	} else {
		// Which did we win? Ours carry the token (no other writer can have
		// moved a row we just claimed: it is running under our lease).
		ids := make([]any, 0, len(take)+1)
		ids = append(ids, token)
		for _, cd := range take {
			ids = append(ids, cd.job.ID)
		}
		got, err := sqlq.ScanIDs(s.sdb.Query(ctx, "SELECT id FROM "+s.t.Jobs+" WHERE version = ? AND id IN ("+marks(len(take))+")", ids...))
		if err != nil {
			return nil, err
		}
		for _, id := range got {
			won[id] = true
		}
	}
	var out []*core.Job
	for _, cd := range take {
		if won[cd.job.ID] {
			claimed(cd.job, p)
			out = append(out, cd.job)
		}
	}
	return out, nil
}
