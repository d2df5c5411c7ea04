package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/internal/sqlq"
)

// finishUpdateSQL applies finish outcomes other than deletions and returns
// the ids it changed: it joins each job, by primary key, with its
// outcome's row of the VALUES list v (%s, finishRowSQL per outcome), and
// changes it only while the fence holds: the job is still running under
// the outcome's worker (fw) at its claim (fc).
//
// The columns of v: id, fence worker (fw), fence claim_seq (fc), new state
// (st), new attempt (na), new run_at or NULL to keep it (ra), finished_at
// or NULL (fi), an error entry to append or NULL (er), the result (rs) and
// whether to set it (sr), the next kind (kd) and args (ag) or NULL to keep
// them. A continuation (kd set) clears the checkpoint of the step before.
var finishUpdateSQL = `
WITH v(id, fw, fc, st, na, ra, fi, er, rs, sr, kd, ag) AS (VALUES %s)
UPDATE {jobs} AS j
SET state = v.st, attempt = v.na, run_at = COALESCE(v.ra, j.run_at), finished_at = v.fi,
    lease_until = NULL, version = j.version + 1,
    errors = CASE WHEN v.er IS NULL THEN j.errors ELSE ` + sqlq.Standard{}.AppendJSON("j.errors", "v.er") + ` END,
    result = CASE WHEN v.sr = 1 THEN v.rs ELSE j.result END,
    kind = COALESCE(v.kd, j.kind), args = COALESCE(v.ag, j.args),
    checkpoint = CASE WHEN v.kd IS NULL THEN j.checkpoint ELSE NULL END
FROM v
WHERE j.id = v.id AND j.state = 'running' AND j.worker_id = v.fw AND j.claim_seq = v.fc
RETURNING id`

// finishRowSQL is one outcome's row of finishUpdateSQL.
const finishRowSQL = "(?,?,?,?,?,?,?,?,?,?,?,?)"

// finishDeleteSQL deletes the completions with Delete whose fence holds
// and returns their ids and unique keys: by primary key (%[1]s), each job still running
// under the outcome's worker at its claim, matched as row values against a
// VALUES list (%[2]s), which SQLite turns into one indexed temporary list
// (a CASE per column would compare every row with every listed id,
// quadratic in the batch size). The id list must stay: row values alone
// make SQLite scan the table.
//
// Arguments: the ids (%[1]s), then (id, worker, claim_seq) per outcome
// (%[2]s).
const finishDeleteSQL = `
DELETE FROM {jobs}
WHERE id IN (%[1]s) AND state = 'running'
  AND (id, worker_id, claim_seq) IN (VALUES %[2]s)
RETURNING id, unique_key`

// finishChunk is the most outcomes one finishUpdateSQL or finishDeleteSQL
// applies.
const finishChunk = 500

// Finish applies a batch of fenced outcomes in one write transaction, one
// finishUpdateSQL per 500 updates and one finishDeleteSQL per 500
// completions with Delete, and returns one result per outcome in input
// order. An outcome whose fence fails (job not running under its worker id
// and claim_seq) reports Applied=false and changes nothing. An unknown
// outcome kind fails the whole call.
func (s *Store) Finish(ctx context.Context, outcomes []contract.Outcome) ([]contract.FinishResult, error) {
	if len(outcomes) == 0 {
		return []contract.FinishResult{}, nil
	}
	return inTx(ctx, s, func(c sqlq.Conn) ([]contract.FinishResult, error) { return s.FinishOn(ctx, c, outcomes) })
}

// FinishOn is Finish on a caller-supplied connection or transaction, with
// no retries (CompleteTx uses it with the caller's transaction).
func (s *Store) FinishOn(ctx context.Context, c sqlq.Conn, outcomes []contract.Outcome) ([]contract.FinishResult, error) {
	return sqlq.FinishRounds(ctx, c, "sqlite", outcomes, finishChunk, s.finishUpdate, s.finishDelete)
}

// finishUpdate applies the changes chs[part] (distinct ids) with one
// finishUpdateSQL of padded(len(part)) rows and returns the ids it
// changed.
func (s *Store) finishUpdate(ctx context.Context, c sqlq.Conn, chs []sqlq.Change, part []int) (map[int64]bool, error) {
	n := padded(len(part))
	args := make([]any, 0, 12*n)
	for _, i := range part {
		args = chs[i].AppendRow(args, dialect{})
	}
	args = append(args, make([]any, 12*(n-len(part)))...) // rows of NULLs join no job
	ids, err := sqlq.ScanIDs(c.Query(ctx, fmt.Sprintf(s.sql.finishUpdate, rows(finishRowSQL, n)), args...))
	return idSet(ids), err
}

// padded is the number of rows a finish statement of n outcomes carries:
// n rounded up to a power of two, the rest rows of NULLs that match no
// job. A statement is compiled once per text and connection (and each
// time before the statement cache admits it), and the compile of one
// that changes finished_at or deletes jobs includes the dependency
// triggers (schema version 15), ten times what the statement alone
// costs: a handful of texts instead of one per batch size keeps the
// compiles few.
func padded(n int) int {
	p := 1
	for p < n {
		p *= 2
	}
	return p
}

// finishDelete deletes the fenced completions chs[part] (distinct ids)
// with one finishDeleteSQL of padded(len(part)) rows and returns the ids
// it deleted. When some of
// them had a unique key, their holds are released (sqlq.ReleaseHolds: held
// until the completion time plus their UniqueFor) in the same transaction;
// key-less completions need nothing more.
func (s *Store) finishDelete(ctx context.Context, c sqlq.Conn, chs []sqlq.Change, part []int) (map[int64]bool, error) {
	n := padded(len(part))
	args := make([]any, 0, 4*n)
	for _, i := range part {
		args = append(args, chs[i].ID)
	}
	args = append(args, make([]any, n-len(part))...) // NULL ids match no job
	for _, i := range part {
		args = append(args, chs[i].ID, chs[i].Worker, chs[i].ClaimSeq)
	}
	args = append(args, make([]any, 3*(n-len(part)))...)
	q := fmt.Sprintf(s.sql.finishDelete, marks(n), rows("(?,?,?)", n))
	r, err := c.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return s.deleted(ctx, c, chs, part, r)
}

// deleted reads the (id, unique_key) rows of a finishDeleteSQL, releases
// the holds of the keyed ones, and returns the ids.
func (s *Store) deleted(ctx context.Context, c sqlq.Conn, chs []sqlq.Change, part []int, r sqlq.Rows) (map[int64]bool, error) {
	set := make(map[int64]bool, len(part))
	var keyed []int64
	for r.Next() {
		var id int64
		var key sql.NullString
		if err := r.Scan(&id, &key); err != nil {
			r.Close()
			return nil, err
		}
		set[id] = true
		if key.Valid {
			keyed = append(keyed, id)
		}
	}
	if err := r.Err(); err != nil {
		r.Close()
		return nil, err
	}
	if err := r.Close(); err != nil {
		return nil, err
	}
	if len(keyed) == 0 {
		return set, nil
	}
	at := make(map[int64]sqlq.Release, len(part))
	for _, i := range part {
		at[chs[i].ID] = sqlq.Release{JobID: chs[i].ID, FinishedAt: chs[i].FinishedAt}
	}
	rel := make([]sqlq.Release, len(keyed))
	for k, id := range keyed {
		rel[k] = at[id]
	}
	return set, s.ReleaseHolds(ctx, c, rel)
}

// idSet returns ids as a set.
func idSet(ids []int64) map[int64]bool {
	set := make(map[int64]bool, len(ids))
	for _, id := range ids {
		set[id] = true
	}
	return set
}
