package mysql

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/store/internal/sqlq"
)

// finishChunk bounds the outcomes of one statement.
const finishChunk = 500

// Finish applies a batch of fenced outcomes and returns one result per
// outcome in input order. Updates run as one UPDATE … JOIN a derived table
// of the outcomes per 500; completions with Delete as one fenced DELETE
// (with RETURNING on MariaDB). A batch of deletions alone on MariaDB is one
// autocommit statement; anything else runs in one transaction. An outcome
// whose fence fails (job not running under its worker id and claim_seq)
// reports Applied=false and changes nothing; an unknown outcome kind fails
// the whole call. Deadlocks and lock wait timeouts are retried inside.
func (s *Store) Finish(ctx context.Context, outcomes []core.Outcome) ([]core.FinishResult, error) {
	if len(outcomes) == 0 {
		return []core.FinishResult{}, nil
	}
	var out []core.FinishResult
	if s.d.Returning(sqlq.StmtDelete) && len(outcomes) <= finishChunk && allDeletes(outcomes) {
		err := s.retry(ctx, func() (err error) {
			out, err = s.FinishOn(ctx, s.sdb, outcomes)
			return err
		})
		return out, err
	}
	err := s.inTx(ctx, func(c sqlq.Conn) (err error) {
		out, err = s.FinishOn(ctx, c, outcomes)
		return err
	})
	return out, err
}

// allDeletes reports whether every outcome is a completion with Delete, for
// distinct jobs (so one DELETE statement applies them all).
func allDeletes(outcomes []core.Outcome) bool {
	for i := range outcomes {
		if o := &outcomes[i]; o.Kind != core.OutcomeComplete || !o.Delete {
			return false
		}
	}
	return len(sqlq.Rounds(len(outcomes), func(i int) int64 { return outcomes[i].JobID })) == 1
}

// FinishOn is Finish on a caller-supplied connection or transaction, with
// no retries (CompleteTx uses it with the caller's transaction). Given
// updates, c must be a transaction: which of them applied is read back in
// it.
func (s *Store) FinishOn(ctx context.Context, c sqlq.Conn, outcomes []core.Outcome) ([]core.FinishResult, error) {
	res := make([]core.FinishResult, len(outcomes))
	chs := make([]sqlq.Change, len(outcomes))
	for i := range outcomes {
		res[i].JobID = outcomes[i].JobID
		ch, err := sqlq.OutcomeChange(&outcomes[i])
		if err != nil {
			return nil, fmt.Errorf("mysql: %w", err)
		}
		chs[i] = ch
	}
	// Rounds of distinct job ids, so a job named twice is applied in input
	// order (the second normally fails its fence).
	for _, round := range sqlq.Rounds(len(outcomes), func(i int) int64 { return outcomes[i].JobID }) {
		var upd, del []int
		for _, i := range round {
			if o := &outcomes[i]; o.Kind == core.OutcomeComplete && o.Delete {
				del = append(del, i)
			} else {
				upd = append(upd, i)
			}
		}
		for start := 0; start < len(upd); start += finishChunk {
			part := upd[start:min(len(upd), start+finishChunk)]
			applied, err := s.finishUpdate(ctx, c, chs, part)
			if err != nil {
				return nil, err
			}
			for _, i := range part {
				res[i].Applied = applied[outcomes[i].JobID]
			}
		}
		for start := 0; start < len(del); start += finishChunk {
			part := del[start:min(len(del), start+finishChunk)]
			deleted, err := s.finishDelete(ctx, c, chs, part)
			if err != nil {
				return nil, err
			}
			for _, i := range part {
				res[i].Applied = deleted[outcomes[i].JobID]
			}
		}
	}
	return res, nil
}

// finishUpdate applies the changes chs[part] (distinct ids) with one
//
//	UPDATE jobs JOIN (SELECT ? AS id, … UNION ALL SELECT …) v ON jobs.id = v.id
//	SET … WHERE <fence>
//
// that stamps a fresh random version token on the rows it changes. When it
// changed every row, all applied; otherwise a read of the token in the same
// transaction says which did.
func (s *Store) finishUpdate(ctx context.Context, c sqlq.Conn, chs []sqlq.Change, part []int) (map[int64]bool, error) {
	T := s.t.Jobs
	token := rand.Int64() | 1<<62
	var q strings.Builder
	args := make([]any, 0, 12*len(part)+1)
	q.WriteString("UPDATE " + T + " JOIN (")
	for k, i := range part {
		ch := &chs[i]
		if k == 0 {
			q.WriteString("SELECT ? AS id, ? AS fw, ? AS fc, ? AS st, ? AS na, ? AS ra, ? AS fi, ? AS er, ? AS rs, ? AS sr, ? AS kd, ? AS ag")
		} else {
			q.WriteString(" UNION ALL SELECT ?,?,?,?,?,?,?,?,?,?,?,?")
		}
		var er, rs, kd, ag any
		if ch.Err != "" {
			er = ch.Err
		}
		if ch.Result != nil {
			rs = ch.Result
		}
		sr := 0
		if ch.SetResult {
			sr = 1
		}
		if ch.Kind != "" {
			kd = ch.Kind
		}
		if ch.Args != nil {
			ag = string(ch.Args)
		}
		args = append(args, ch.ID, ch.Worker, ch.ClaimSeq, string(ch.State), int64(ch.NewAttempt),
			s.d.Time(ch.RunAt), s.d.Time(ch.FinishedAt), er, rs, sr, kd, ag)
	}
	q.WriteString(") v ON " + T + ".id = v.id SET " + T + ".state = v.st, " + T + ".attempt = v.na, " +
		T + ".run_at = COALESCE(v.ra, " + T + ".run_at), " + T + ".finished_at = v.fi, " + T + ".lease_until = NULL, " +
		T + ".version = ?, " + T + ".errors = CASE WHEN v.er IS NULL THEN " + T + ".errors ELSE " + s.d.AppendJSON(T+".errors", "v.er") + " END, " +
		T + ".result = CASE WHEN v.sr = 1 THEN v.rs ELSE " + T + ".result END, " +
		T + ".kind = COALESCE(v.kd, " + T + ".kind), " + T + ".args = COALESCE(v.ag, " + T + ".args)" +
		" WHERE " + T + ".state = 'running' AND " + T + ".worker_id = v.fw AND " + T + ".claim_seq = v.fc")
	args = append(args, token)
	r, err := c.Exec(ctx, q.String(), args...)
	if err != nil {
		return nil, err
	}
	n, err := r.RowsAffected()
	if err != nil {
		return nil, err
	}
	applied := make(map[int64]bool, len(part))
	switch {
	case n == 0:
	case int(n) == len(part):
		for _, i := range part {
			applied[chs[i].ID] = true
		}
	default:
		ids := make([]any, 0, len(part)+1)
		ids = append(ids, token)
		for _, i := range part {
			ids = append(ids, chs[i].ID)
		}
		got, err := sqlq.ScanIDs(c.Query(ctx, "SELECT id FROM "+T+" WHERE version = ? AND id IN ("+marks(len(part))+")", ids...))
		if err != nil {
			return nil, err
		}
		for _, id := range got {
			applied[id] = true
		}
	}
	return applied, nil
}

// finishDelete deletes the fenced completions chs[part] (distinct ids) and
// returns the ids deleted: one DELETE … RETURNING id on MariaDB; on MySQL a
// locking read of the rows that pass the fence, then a DELETE of those.
func (s *Store) finishDelete(ctx context.Context, c sqlq.Conn, chs []sqlq.Change, part []int) (map[int64]bool, error) {
	var where strings.Builder
	args := make([]any, 0, 5*len(part))
	where.WriteString(" WHERE id IN (" + marks(len(part)) + ") AND state = 'running' AND worker_id = CASE id")
	for _, i := range part {
		args = append(args, chs[i].ID)
	}
	for _, i := range part {
		where.WriteString(" WHEN ? THEN ?")
		args = append(args, chs[i].ID, chs[i].Worker)
	}
	where.WriteString(" END AND claim_seq = CASE id")
	for _, i := range part {
		where.WriteString(" WHEN ? THEN ?")
		args = append(args, chs[i].ID, chs[i].ClaimSeq)
	}
	where.WriteString(" END")
	out := make(map[int64]bool, len(part))
	var ids []int64
	var err error
	if s.d.Returning(sqlq.StmtDelete) {
		ids, err = sqlq.ScanIDs(c.Query(ctx, "DELETE FROM "+s.t.Jobs+where.String()+" RETURNING id", args...))
		if err != nil {
			return nil, err
		}
	} else {
		ids, err = sqlq.ScanIDs(c.Query(ctx, "SELECT id FROM "+s.t.Jobs+where.String()+" FOR UPDATE", args...))
		if err != nil {
			return nil, err
		}
		if len(ids) > 0 {
			del := make([]any, len(ids))
			for k, id := range ids {
				del[k] = id
			}
			if _, err := c.Exec(ctx, "DELETE FROM "+s.t.Jobs+" WHERE id IN ("+marks(len(ids))+")", del...); err != nil {
				return nil, err
			}
		}
	}
	for _, id := range ids {
		out[id] = true
	}
	return out, nil
}

// ExtendLeases sets LeaseUntil=until on the named jobs still running under
// workerID at their claim_seq, one statement per 500 leases of primary-key
// lookups, and returns how many it touched.
func (s *Store) ExtendLeases(ctx context.Context, workerID string, leases []core.Lease, until time.Time) (int, error) {
	var total int64
	for start := 0; start < len(leases); start += finishChunk {
		part := leases[start:min(len(leases), start+finishChunk)]
		args := make([]any, 0, 2+3*len(part))
		args = append(args, s.d.Time(until))
		var q strings.Builder
		q.WriteString("UPDATE " + s.t.Jobs + " SET lease_until = ?, version = version + 1 WHERE id IN (" + marks(len(part)) + ")")
		for _, l := range part {
			args = append(args, l.JobID)
		}
		q.WriteString(" AND state = 'running' AND worker_id = ? AND claim_seq = CASE id")
		args = append(args, workerID)
		for _, l := range part {
			q.WriteString(" WHEN ? THEN ?")
			args = append(args, l.JobID, l.ClaimSeq)
		}
		q.WriteString(" END")
		var n int64
		err := s.retry(ctx, func() error {
			res, err := s.sdb.Exec(ctx, q.String(), args...)
			if err != nil {
				return err
			}
			n, err = res.RowsAffected()
			return err
		})
		if err != nil {
			return int(total), err
		}
		total += n
	}
	return int(total), nil
}
