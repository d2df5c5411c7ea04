package sqlq

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

// Prune deletes up to limit jobs in the final state state whose FinishedAt
// is before before, and returns how many. A non-final state is an error
// wrapping core.ErrInvalidArgument and core.ErrInvalidState.
func (s *Store) Prune(ctx context.Context, state contract.State, before time.Time, limit int) (int, error) {
	if !state.Final() {
		return 0, fmt.Errorf("prune: state %q is not final: %w: %w", state, contract.ErrInvalidArgument, contract.ErrInvalidState)
	}
	if limit <= 0 {
		return 0, nil
	}
	var n int
	err := s.tx(ctx, func(c Conn) error {
		var gone []Release
		var edged []int64
		b := newBuilder(s.d, 3)
		where := "state = " + b.arg(string(state)) + " AND finished_at < " + b.arg(s.d.Time(before))
		if s.d.Returning(StmtDelete) {
			// One statement; the rows with a unique key come back.
			q := s.d.DeleteLimit(s.t.Jobs, where, "finished_at, id", b.arg(limit)) + " RETURNING " + prunedColumns
			rows, withDeps, err := scanPruned(c.Query(ctx, q, b.args...))
			if err != nil {
				return err
			}
			n, gone, edged = len(rows), rows, withDeps
		} else {
			// Select and lock the batch, then delete it by id.
			q := "SELECT " + prunedColumns + " FROM " + s.t.Jobs + " WHERE " + where + " ORDER BY finished_at, id LIMIT " + b.arg(limit) + s.d.LockSuffix(false)
			rows, withDeps, err := scanPruned(c.Query(ctx, q, b.args...))
			if err != nil || len(rows) == 0 {
				return err
			}
			ids := make([]int64, len(rows))
			for i, r := range rows {
				ids[i] = r.JobID
			}
			if err := s.deleteIn(ctx, c, s.t.Jobs, "id", ids); err != nil {
				return err
			}
			n, gone, edged = len(rows), rows, withDeps
		}
		if err := s.forgetEdges(ctx, c, edged); err != nil {
			return err
		}
		return s.releasePruned(ctx, c, gone, before, limit)
	})
	return n, err
}

// releasePruned ends, in c, the holds of the jobs whose rows Prune or
// Archive took out of the jobs table (gone, as scanPruned reads them):
// each keyed job's hold lasts until its FinishedAt + UniqueFor (see
// ReleaseHolds); then it forgets up to limit holds that ended before
// `before`.
func (s *Store) releasePruned(ctx context.Context, c Conn, gone []Release, before time.Time, limit int) error {
	var keyed []Release
	for _, r := range gone {
		if !r.FinishedAt.IsZero() {
			keyed = append(keyed, r)
		}
	}
	if err := s.ReleaseHolds(ctx, c, keyed); err != nil {
		return err
	}
	return s.forgetHolds(ctx, c, before, limit)
}

// prunedColumns are the columns scanPruned reads.
const prunedColumns = "id, unique_key, finished_at, dep_count"

// scanPruned reads prunedColumns rows of pruned jobs as Releases
// (FinishedAt is left zero for a job without a unique key: it has no hold
// to release) and returns the ids of those with dependencies (dep_count >
// 0: edges to forget) apart.
func scanPruned(rows Rows, err error) (_ []Release, withDeps []int64, _ error) {
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var out []Release
	for rows.Next() {
		var (
			r    Release
			key  sql.NullString
			fin  time.Time
			deps int64
		)
		if err := rows.Scan(&r.JobID, &key, TimeDest(&fin), &deps); err != nil {
			return nil, nil, err
		}
		if deps > 0 {
			withDeps = append(withDeps, r.JobID)
		}
		if key.Valid && key.String != "" {
			r.FinishedAt = fin
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	return out, withDeps, rows.Close()
}

// deleteIn deletes, on c, the rows of table whose column holds one of
// ids, in statements of at most 1,000 ids (and the dialect's parameter
// limit).
func (s *Store) deleteIn(ctx context.Context, c Conn, table, column string, ids []int64) error {
	chunk := max(1, min(1000, s.d.MaxParams()))
	for start := 0; start < len(ids); start += chunk {
		part := ids[start:min(len(ids), start+chunk)]
		b := newBuilder(s.d, len(part))
		b.w("DELETE FROM ", table, " WHERE ", column, " IN ").in(part)
		if _, err := c.Exec(ctx, b.String(), b.args...); err != nil {
			return err
		}
	}
	return nil
}
