package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/internal/sqlq"
)

// finishUpdateSQL applies finish outcomes other than deletions: it joins
// each job, by primary key, with its outcome's row of a derived table (%s,
// finishRowsSQL), and changes it only while the fence holds: the job is
// still running under the outcome's worker (fw) at its claim (fc). It
// stamps a random version token on the rows it changes, so that stampedSQL
// can tell which did.
//
// The derived table's columns: id, fence worker (fw), fence claim_seq
// (fc), new state (st), new attempt (na), new run_at or NULL to keep it
// (ra), finished_at or NULL (fi), an error entry to append or NULL (er),
// the result (rs) and whether to set it (sr), the next kind (kd) and args
// (ag) or NULL to keep them; a continuation (kd set) clears the
// checkpoint of the step before. Arguments: the rows' values, then the token.
//
// has_dependants keeps its value; evaluating it tells the caller, at no
// extra cost, whether a job that some job depends on ended (fi set): the
// first such row calls LAST_INSERT_ID(id), which the server returns as the
// statement's insert id (0 when no row did; AND stops at a false
// has_dependants). The session's LAST_INSERT_ID() then holds that id.
var finishUpdateSQL = `
UPDATE {jobs} AS j
JOIN (%s) AS v ON j.id = v.id
SET j.state = v.st, j.attempt = v.na, j.run_at = COALESCE(v.ra, j.run_at), j.finished_at = v.fi,
    j.lease_until = NULL, j.version = ?,
    j.errors = CASE WHEN v.er IS NULL THEN j.errors
                    ELSE ` + dialect{}.AppendJSON("j.errors", "v.er") + ` END,
    j.result = CASE WHEN v.sr = 1 THEN v.rs ELSE j.result END,
    j.kind = COALESCE(v.kd, j.kind), j.args = COALESCE(v.ag, j.args),
    j.checkpoint = CASE WHEN v.kd IS NULL THEN j.checkpoint ELSE NULL END,
    j.has_dependants = j.has_dependants AND (v.fi IS NULL OR LAST_INSERT_ID(j.id) > 0)
WHERE j.state = 'running' AND j.worker_id = v.fw AND j.claim_seq = v.fc`

// finishFirstRowSQL and finishNextRowSQL are the rows of finishUpdateSQL's
// derived table: the first names the columns, the others follow it.
const (
	finishFirstRowSQL = "SELECT ? AS id, ? AS fw, ? AS fc, ? AS st, ? AS na, ? AS ra, ? AS fi, ? AS er, ? AS rs, ? AS sr, ? AS kd, ? AS ag"
	finishNextRowSQL  = " UNION ALL SELECT ?,?,?,?,?,?,?,?,?,?,?,?"
)

// finishFenceSQL ({fence}) selects the completions with Delete whose fence
// holds, by primary key: the job is still running under the outcome's
// worker at its claim.
//
// Arguments: the ids (%[1]s), (id, worker) per outcome, (id, claim_seq)
// per outcome (%[2]s each).
const finishFenceSQL = `
WHERE id IN (%[1]s) AND state = 'running'
  AND worker_id = CASE id %[2]s END
  AND claim_seq = CASE id %[2]s END`

// finishDeleteSQL deletes the fenced completions and returns their ids,
// unique keys, whether some job depends on them and whether they depended
// on some job (edges to forget), on MariaDB.
const finishDeleteSQL = `
DELETE FROM {jobs}
{fence}
RETURNING id, unique_key, has_dependants, dep_count > 0`

// finishDeletePlainSQL is finishDeleteSQL for jobs without a unique key,
// without dependants and without dependencies only, run alone in
// autocommit: any other job is left for a transaction that also releases
// its hold, settles its dependants or forgets its dependency edges.
const finishDeletePlainSQL = `
DELETE FROM {jobs}
{fence}
  AND unique_key IS NULL AND has_dependants = false AND dep_count = 0
RETURNING id`

// finishLockSQL reads and locks the fenced completions, their unique keys,
// whether some job depends on them and whether they depended on some job,
// on MySQL (no DELETE … RETURNING); deleteIDsSQL then deletes them.
const finishLockSQL = `
SELECT id, unique_key, has_dependants, dep_count > 0 FROM {jobs}
{fence}
FOR UPDATE`

// deleteIDsSQL deletes the jobs whose ids it names (%s).
const deleteIDsSQL = `DELETE FROM {jobs} WHERE id IN (%s)`

// finishChunk bounds the outcomes of one statement.
const finishChunk = 500

// Finish applies a batch of fenced outcomes and returns one result per
// outcome in input order. Updates run as one finishUpdateSQL per 500
// outcomes; completions with Delete as one finishDeleteSQL per 500 on
// MariaDB, a finishLockSQL and a deleteIDsSQL on MySQL; the holds of
// deleted jobs with a unique key are released in the same transaction
// (sqlq.ReleaseHolds). A batch of deletions alone on MariaDB is one
// autocommit finishDeletePlainSQL, which deletes only jobs without a key,
// dependants or dependencies; the outcomes it did not apply (any other
// job, or a failed fence) then run
// in a transaction. Anything else runs in one transaction. An outcome whose fence fails (job not running
// under its worker id and claim_seq) reports Applied=false and changes
// nothing; an unknown outcome kind fails the whole call. Deadlocks and lock
// wait timeouts are retried inside.
func (s *Store) Finish(ctx context.Context, outcomes []contract.Outcome) ([]contract.FinishResult, error) {
	if len(outcomes) == 0 {
		return []contract.FinishResult{}, nil
	}
	defer s.pruneSettleNotes(ctx)
	var out []contract.FinishResult
	if s.d.Returning(sqlq.StmtDelete) && len(outcomes) <= finishChunk && allDeletes(outcomes) {
		return s.finishPlainDeletes(ctx, outcomes)
	}
	err := s.inTx(ctx, func(c sqlq.Conn) (err error) {
		out, err = s.FinishOn(ctx, c, outcomes)
		return err
	})
	return out, err
}

// finishPlainDeletes applies completions with Delete of distinct jobs
// (allDeletes) on MariaDB: one autocommit finishDeletePlainSQL for the
// key-less ones, then a transaction (FinishOn) for the outcomes it did not
// apply.
func (s *Store) finishPlainDeletes(ctx context.Context, outcomes []contract.Outcome) ([]contract.FinishResult, error) {
	args := make([]any, 0, 5*len(outcomes))
	for i := range outcomes {
		args = append(args, outcomes[i].JobID)
	}
	for i := range outcomes {
		args = append(args, outcomes[i].JobID, outcomes[i].WorkerID)
	}
	for i := range outcomes {
		args = append(args, outcomes[i].JobID, outcomes[i].ClaimSeq)
	}
	q := fmt.Sprintf(s.q.finishDeletePlain, marks(len(outcomes)), whens(len(outcomes)))
	var ids []int64
	err := s.retry(ctx, func() (err error) {
		ids, err = sqlq.ScanIDs(s.sdb.Query(ctx, q, args...))
		return err
	})
	if err != nil {
		return nil, err
	}
	done := make(map[int64]bool, len(ids))
	for _, id := range ids {
		done[id] = true
	}
	out := make([]contract.FinishResult, len(outcomes))
	var rest []contract.Outcome
	var restIdx []int
	for i := range outcomes {
		out[i] = contract.FinishResult{JobID: outcomes[i].JobID, Applied: done[outcomes[i].JobID]}
		if !out[i].Applied {
			rest, restIdx = append(rest, outcomes[i]), append(restIdx, i)
		}
	}
	if len(rest) == 0 {
		return out, nil
	}
	var more []contract.FinishResult
	err = s.inTx(ctx, func(c sqlq.Conn) (err error) {
		more, err = s.FinishOn(ctx, c, rest)
		return err
	})
	if err != nil {
		return nil, err
	}
	for k, i := range restIdx {
		out[i] = more[k]
	}
	return out, nil
}

// allDeletes reports whether every outcome is a completion with Delete, for
// distinct jobs (so one DELETE statement applies them all).
func allDeletes(outcomes []contract.Outcome) bool {
	for i := range outcomes {
		if o := &outcomes[i]; o.Kind != contract.OutcomeComplete || !o.Delete {
			return false
		}
	}
	return len(sqlq.Rounds(len(outcomes), func(i int) int64 { return outcomes[i].JobID })) == 1
}

// FinishOn is Finish on a caller-supplied connection or transaction, with
// no retries (CompleteTx uses it with the caller's transaction). Given
// updates, c must be a transaction: which of them applied is read back in
// it.
func (s *Store) FinishOn(ctx context.Context, c sqlq.Conn, outcomes []contract.Outcome) ([]contract.FinishResult, error) {
	return sqlq.FinishRounds(ctx, c, "mysql", outcomes, finishChunk, s.finishUpdate, s.finishDelete)
}

// finishUpdate applies the changes chs[part] (distinct ids) with one
// finishUpdateSQL, in c, which must be a transaction: when the update
// changed fewer rows than it was given, a read of its token in the same
// transaction says which it changed.
func (s *Store) finishUpdate(ctx context.Context, c sqlq.Conn, chs []sqlq.Change, part []int) (map[int64]bool, error) {
	token := versionToken()
	args := make([]any, 0, 12*len(part)+1)
	ids := make([]int64, len(part))
	for k, i := range part {
		ids[k] = chs[i].ID
		args = chs[i].AppendRow(args, s.d)
	}
	args = append(args, token)
	rows := finishFirstRowSQL + strings.Repeat(finishNextRowSQL, len(part)-1)
	r, err := c.Exec(ctx, fmt.Sprintf(s.q.finishUpdate, rows), args...)
	if err != nil {
		return nil, err
	}
	n, err := r.RowsAffected()
	if err != nil {
		return nil, err
	}
	won, err := s.stamped(ctx, c, token, ids, n)
	if err != nil {
		return nil, err
	}
	if dep, err := r.LastInsertId(); err != nil || dep == 0 {
		return won, err // no job that ended has dependants
	}
	var ended []sqlq.Ended
	var at time.Time
	for _, i := range part {
		if ch := &chs[i]; won[ch.ID] && ch.State.Final() {
			ended = append(ended, sqlq.Ended{ID: ch.ID, State: ch.State})
			at = later(at, ch.FinishedAt)
		}
	}
	return won, s.settle(ctx, c, ended, at)
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// finishDelete deletes the fenced completions chs[part] (distinct ids)
// and returns the ids deleted: one finishDeleteSQL on MariaDB; on MySQL a
// finishLockSQL, then a deleteIDsSQL of the rows it locked. The
// dependency edges of those that had dependencies are forgotten
// (sqlq.ForgetEdges) and their dependants settled. The holds of
// those with a unique key are then released (sqlq.ReleaseHolds) on c,
// which must be a transaction when any has one.
func (s *Store) finishDelete(ctx context.Context, c sqlq.Conn, chs []sqlq.Change, part []int) (map[int64]bool, error) {
	args := make([]any, 0, 5*len(part))
	for _, i := range part {
		args = append(args, chs[i].ID)
	}
	for _, i := range part {
		args = append(args, chs[i].ID, chs[i].Worker)
	}
	for _, i := range part {
		args = append(args, chs[i].ID, chs[i].ClaimSeq)
	}
	in, cases := marks(len(part)), whens(len(part))
	out := make(map[int64]bool, len(part))
	var ids, keyed, depended, edged []int64
	var err error
	if s.d.Returning(sqlq.StmtDelete) {
		ids, keyed, depended, edged, err = scanKeyed(c.Query(ctx, fmt.Sprintf(s.q.finishDelete, in, cases), args...))
		if err != nil {
			return nil, err
		}
	} else {
		ids, keyed, depended, edged, err = scanKeyed(c.Query(ctx, fmt.Sprintf(s.q.finishLock, in, cases), args...))
		if err != nil {
			return nil, err
		}
		if len(ids) > 0 {
			del := make([]any, len(ids))
			for k, id := range ids {
				del[k] = id
			}
			if _, err := c.Exec(ctx, fmt.Sprintf(s.q.deleteIDs, marks(len(ids))), del...); err != nil {
				return nil, err
			}
		}
	}
	for _, id := range ids {
		out[id] = true
	}
	if err := s.ForgetEdges(ctx, c, edged); err != nil {
		return nil, err
	}
	at := make(map[int64]time.Time, len(part))
	for _, i := range part {
		at[chs[i].ID] = chs[i].FinishedAt
	}
	if len(depended) > 0 {
		ended := make([]sqlq.Ended, len(depended))
		var when time.Time
		for k, id := range depended {
			ended[k] = sqlq.Ended{ID: id, State: contract.StateCompleted}
			when = later(when, at[id])
		}
		if err := s.settle(ctx, c, ended, when); err != nil {
			return nil, err
		}
	}
	if len(keyed) == 0 {
		return out, nil
	}
	rel := make([]sqlq.Release, len(keyed))
	for k, id := range keyed {
		rel[k] = sqlq.Release{JobID: id, FinishedAt: at[id]}
	}
	return out, s.ReleaseHolds(ctx, c, rel)
}

// scanKeyed reads (id, unique_key, has_dependants, dep_count > 0) rows:
// every id, the ids with a key, the ids some job depends on, and the ids
// that depended on some job (their edges to forget).
func scanKeyed(rows sqlq.Rows, err error) (ids, keyed, depended, edged []int64, _ error) {
	if err != nil {
		return nil, nil, nil, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var key sql.NullString
		var deps, edges bool
		if err := rows.Scan(&id, &key, &deps, &edges); err != nil {
			return nil, nil, nil, nil, err
		}
		ids = append(ids, id)
		if key.Valid {
			keyed = append(keyed, id)
		}
		if deps {
			depended = append(depended, id)
		}
		if edges {
			edged = append(edged, id)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, nil, nil, err
	}
	return ids, keyed, depended, edged, rows.Close()
}

// extendLeasesSQL sets a new lease on the named executions: by primary key
// (%[1]s), each job still running under the worker at the claim_seq the
// lease names (%[2]s binds each id's).
//
// Arguments: lease_until, the ids (%[1]s), worker_id, (id, claim_seq) per
// lease (%[2]s).
const extendLeasesSQL = `
UPDATE {jobs}
SET lease_until = ?, version = version + 1
WHERE id IN (%[1]s) AND state = 'running' AND worker_id = ?
  AND claim_seq = CASE id %[2]s END`

// ExtendLeases sets LeaseUntil=until on the named jobs still running under
// workerID at their claim_seq, one autocommit extendLeasesSQL per 500
// leases, and returns how many it touched.
func (s *Store) ExtendLeases(ctx context.Context, workerID string, leases []contract.Lease, until time.Time) (int, error) {
	return sqlq.Chunks(leases, finishChunk, func(part []contract.Lease) (n int64, err error) {
		q := fmt.Sprintf(s.q.extendLeases, marks(len(part)), whens(len(part)))
		args := sqlq.LeaseArgs(s.d.Time(until), workerID, part)
		err = s.retry(ctx, func() error {
			res, err := s.sdb.Exec(ctx, q, args...)
			if err != nil {
				return err
			}
			n, err = res.RowsAffected()
			return err
		})
		return n, err
	})
}
