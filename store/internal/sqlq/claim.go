package sqlq

import (
	"context"
	"fmt"

	"github.com/backlogq/backlog/core"
)

// Claim moves up to p.Limit due jobs of p.Queue to running for p.WorkerID,
// with the configured strategy, and returns them in claim order (priority,
// run_at, id). A paused queue yields no jobs and a nil error.
func (s *Store) Claim(ctx context.Context, p core.ClaimParams) ([]*core.Job, error) {
	if p.Limit <= 0 {
		return nil, nil
	}
	var out []*core.Job
	err := s.retry(ctx, func() (err error) {
		switch {
		case s.strategy == core.StrategySkipLocked && s.d.Returning(StmtUpdate):
			err = s.db.InTx(ctx, func(c Conn) (err error) {
				out, err = s.claimSkipLockedCTE(ctx, c, p)
				return err
			})
		case s.strategy == core.StrategySkipLocked:
			err = s.db.InTx(ctx, func(c Conn) (err error) {
				out, err = s.claimSkipLocked(ctx, c, p)
				return err
			})
		case s.fused:
			err = s.db.InTx(ctx, func(c Conn) (err error) {
				out, err = s.claimFused(ctx, c, p)
				return err
			})
		case s.claimInTx:
			err = s.db.InTx(ctx, func(c Conn) (err error) {
				out, err = s.claimOptimistic(ctx, c, func(fn func(Conn) error) error { return fn(c) }, p)
				return err
			})
		default:
			out, err = s.claimOptimistic(ctx, s.db, func(fn func(Conn) error) error { return s.db.InTx(ctx, fn) }, p)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	SortClaimOrder(out)
	return out, nil
}

// dueWhere writes the due-jobs predicate of a claim: queue, pending states,
// run_at ≤ now, tags within the worker's, and the queue not paused.
func (s *Store) dueWhere(b *builder, p core.ClaimParams) {
	b.w("queue = ", b.arg(p.Queue), " AND state IN ", pendingIn, " AND run_at <= ", b.arg(s.d.Time(p.Now)),
		" AND ", TagsRouting(s.d, b.arg(TagsArg(p.Tags))),
		" AND NOT EXISTS (SELECT 1 FROM ", s.t.Queues, " WHERE name = ", b.arg(p.Queue), " AND paused = ", b.arg(true), ")")
}

// claimSet writes the SET list of a claim.
func (s *Store) claimSet(b *builder, p core.ClaimParams, table string) {
	b.w("state = 'running', attempt = ", table, "attempt + 1, claim_seq = ", table, "claim_seq + 1, version = ", table, "version + 1, worker_id = ", b.arg(p.WorkerID),
		", attempted_at = ", b.arg(s.d.Time(p.Now)), ", lease_until = ", b.arg(s.d.Time(p.LeaseUntil)))
}

type candidate struct {
	id      int64
	version int64
}

// OptimisticCandidatesSQL returns the lock-free candidate read of the
// optimistic claim: (id, version) of up to fetch due jobs in claim order.
func (s *Store) optimisticCandidates(ctx context.Context, c Conn, p core.ClaimParams, fetch int) ([]candidate, error) {
	b := newBuilder(s.d, 5)
	b.w("SELECT id, version FROM ", s.t.Jobs, " WHERE ")
	s.dueWhere(b, p)
	b.w(" ORDER BY priority, run_at, id LIMIT ", b.arg(fetch))
	rows, err := c.Query(ctx, b.String(), b.args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []candidate
	for rows.Next() {
		var cd candidate
		if err := rows.Scan(&cd.id, &cd.version); err != nil {
			return nil, err
		}
		out = append(out, cd)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, rows.Close()
}

// claimOptimistic reads candidates on read, then compare-and-sets them in
// write. A candidate whose version moved (someone else claimed or changed
// it) is skipped and the next candidate tried; the candidate list is read
// again at most a few times.
func (s *Store) claimOptimistic(ctx context.Context, read Conn, write func(func(Conn) error) error, p core.ClaimParams) ([]*core.Job, error) {
	want := p.Limit
	var out []*core.Job
	for round := 0; round < 4 && want > 0; round++ {
		fetch := want + want/4 + 1 // over-fetch a little to absorb lost races
		cands, err := s.optimisticCandidates(ctx, read, p, fetch)
		if err != nil {
			return claimedSoFar(out, err)
		}
		lost := false
		for len(cands) > 0 && want > 0 {
			take := cands[:min(want, len(cands))]
			cands = cands[len(take):]
			var got []*core.Job
			err := write(func(c Conn) (err error) {
				got, err = s.casClaim(ctx, c, p, take)
				return err
			})
			if err != nil {
				return claimedSoFar(out, err)
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
	return out, nil
}

// claimedSoFar ends a multi-step claim that failed part-way. Jobs an earlier
// step claimed are committed as running under this worker: they must reach
// the caller (a nil error with them), or they would sit unworked until their
// lease expired. With nothing claimed yet the error is returned.
func claimedSoFar(out []*core.Job, err error) ([]*core.Job, error) {
	if len(out) > 0 {
		return out, nil
	}
	return nil, err
}

// casClaim claims the candidates whose version is unchanged and that are
// still due, and returns them as they now are.
func (s *Store) casClaim(ctx context.Context, c Conn, p core.ClaimParams, take []candidate) ([]*core.Job, error) {
	b := newBuilder(s.d, 6+3*len(take))
	b.w("UPDATE ", s.t.Jobs, " SET ")
	s.claimSet(b, p, "")
	b.w(" WHERE id IN (")
	for i, cd := range take {
		if i > 0 {
			b.w(",")
		}
		b.w(b.arg(cd.id))
	}
	b.w(") AND version = CASE id")
	for _, cd := range take {
		b.w(" WHEN ", b.arg(cd.id), " THEN ", b.arg(cd.version))
	}
	b.w(" END AND state IN ", pendingIn, " AND run_at <= ", b.arg(s.d.Time(p.Now)))
	if s.d.Returning(StmtUpdate) {
		b.w(" RETURNING ", JobColumns)
		return ScanJobs(c.Query(ctx, b.String(), b.args...))
	}
	res, err := c.Exec(ctx, b.String(), b.args...)
	if err != nil {
		return nil, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return nil, err
	}
	// Read back which rows we won: ours carry version+1 and our worker id.
	r := newBuilder(s.d, 1+3*len(take))
	r.w("SELECT ", JobColumns, " FROM ", s.t.Jobs, " WHERE id IN (")
	for i, cd := range take {
		if i > 0 {
			r.w(",")
		}
		r.w(r.arg(cd.id))
	}
	r.w(") AND version = CASE id")
	for _, cd := range take {
		r.w(" WHEN ", r.arg(cd.id), " THEN ", r.arg(cd.version+1))
	}
	r.w(" END AND state = 'running' AND worker_id = ", r.arg(p.WorkerID))
	return ScanJobs(c.Query(ctx, r.String(), r.args...))
}

// claimFused is the optimistic claim on a single-writer database: one
// statement reads the candidates and claims them, and the database's write
// lock keeps any other writer out in between.
func (s *Store) claimFused(ctx context.Context, c Conn, p core.ClaimParams) ([]*core.Job, error) {
	b := newBuilder(s.d, 8)
	b.w("UPDATE ", s.t.Jobs, " SET ")
	s.claimSet(b, p, "")
	b.w(" WHERE id IN (SELECT id FROM ", s.t.Jobs, " WHERE ")
	s.dueWhere(b, p)
	b.w(" ORDER BY priority, run_at, id LIMIT ", b.arg(p.Limit), ") RETURNING ", JobColumns)
	return ScanJobs(c.Query(ctx, b.String(), b.args...))
}

// claimSkipLockedCTE is the one-statement SKIP LOCKED claim for dialects with
// UPDATE … RETURNING (Postgres).
func (s *Store) claimSkipLockedCTE(ctx context.Context, c Conn, p core.ClaimParams) ([]*core.Job, error) {
	b := newBuilder(s.d, 9)
	b.w("WITH c AS (SELECT id FROM ", s.t.Jobs, " WHERE ")
	s.dueWhere(b, p)
	b.w(" ORDER BY priority, run_at, id LIMIT ", b.arg(p.Limit), s.d.LockSuffix(true), ") UPDATE ", s.t.Jobs, " SET ")
	s.claimSet(b, p, s.t.Jobs+".")
	b.w(" FROM c WHERE ", s.t.Jobs, ".id = c.id RETURNING ", s.jobCols)
	return ScanJobs(c.Query(ctx, b.String(), b.args...))
}

// claimSkipLocked selects due ids FOR UPDATE SKIP LOCKED, updates them by
// primary key and reads them back, in the caller's transaction (MySQL,
// MariaDB).
func (s *Store) claimSkipLocked(ctx context.Context, c Conn, p core.ClaimParams) ([]*core.Job, error) {
	b := newBuilder(s.d, 5)
	b.w("SELECT id FROM ", s.t.Jobs, " WHERE ")
	s.dueWhere(b, p)
	b.w(" ORDER BY priority, run_at, id LIMIT ", b.arg(p.Limit), s.d.LockSuffix(true))
	ids, err := ScanIDs(c.Query(ctx, b.String(), b.args...))
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	u := newBuilder(s.d, 3+len(ids))
	u.w("UPDATE ", s.t.Jobs, " SET ")
	s.claimSet(u, p, "")
	u.w(" WHERE id IN (")
	for i, id := range ids {
		if i > 0 {
			u.w(",")
		}
		u.w(u.arg(id))
	}
	u.w(")")
	res, err := c.Exec(ctx, u.String(), u.args...)
	if err != nil {
		return nil, err
	}
	if n, err := res.RowsAffected(); err != nil {
		return nil, err
	} else if int(n) != len(ids) {
		return nil, fmt.Errorf("sqlq: claim updated %d of %d locked rows", n, len(ids))
	}
	return s.getManyOn(ctx, c, ids)
}
