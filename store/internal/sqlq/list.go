package sqlq

import (
	"context"

	"github.com/backlogq/backlog/core"
)

// List returns jobs matching p ordered by id (descending when p.Desc), or
// by (run_at, id) with p.ByRunAt, after p's keyset cursor; p.Limit 0
// means 100.
func (s *Store) List(ctx context.Context, p core.ListParams) ([]*core.Job, error) {
	return s.ListPage(ctx, p, 0)
}

// ListPage implements core.PageLister: one statement in p's order, read
// row by row until p.Limit jobs or until the jobs read weigh maxBytes
// (core.JobWeight); the rows after that are not scanned (SQLite stops
// stepping; PostgreSQL and MySQL drain what the server already sent when
// the rows close, without decoding it).
//
// The statement is one range read of an index in p's order: the primary
// key for id order, jobs_run_at (run_at, id) for run_at order (schema
// version 10 on SQLite, 11 on PostgreSQL and MySQL). The cursor is
// written as run_at <= t AND (run_at < t OR id < after) (mirrored for
// ascending order) so that the first conjunct bounds the index range on
// every database.
func (s *Store) ListPage(ctx context.Context, p core.ListParams, maxBytes int) ([]*core.Job, error) {
	q, args, err := s.ListQuery(p)
	if err != nil {
		return nil, err
	}
	var out []*core.Job
	err = s.retry(ctx, func() error {
		out = nil
		rows, err := s.db.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		size := 0
		for rows.Next() {
			j, err := ScanJob(rows)
			if err != nil {
				return err
			}
			out = append(out, j)
			if size += core.JobWeight(j); maxBytes > 0 && size >= maxBytes {
				return nil // the rows' Close ends the read
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		return rows.Close()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ListQuery returns the statement and arguments that List and ListPage
// run for p: the filters of p, its keyset cursor, its order and LIMIT
// p.Limit (100 when zero). An invalid p.ArgsContains returns an error
// wrapping core.ErrInvalidFilter.
func (s *Store) ListQuery(p core.ListParams) (string, []any, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	leaves, err := core.ParseArgsPattern(p.ArgsContains)
	if err != nil {
		return "", nil, err
	}
	b := newBuilder(s.d, 5+len(p.States)+3*len(leaves))
	b.w("SELECT ", JobColumns, " FROM ", s.t.Jobs, " WHERE 1=1")
	if p.Queue != "" {
		b.w(" AND queue = ", b.arg(p.Queue))
	}
	if p.Kind != "" {
		b.w(" AND kind = ", b.arg(p.Kind))
	}
	if p.WorkerID != "" {
		b.w(" AND worker_id = ", b.arg(p.WorkerID))
	}
	if len(p.States) > 0 {
		b.w(" AND state IN (")
		for i, st := range p.States {
			if i > 0 {
				b.w(",")
			}
			b.w(b.arg(string(st)))
		}
		b.w(")")
	}
	if len(leaves) > 0 {
		b.w(" AND ", s.d.ArgsContain("args", p.ArgsContains, leaves, b.argT))
	}
	cmp, dir := ">", ""
	if p.Desc {
		cmp, dir = "<", " DESC"
	}
	switch {
	case p.ByRunAt && p.AfterID != 0:
		at := s.d.Time(core.UTC(p.AfterRunAt))
		b.w(" AND run_at ", cmp, "= ", b.argT(at, TypeTime),
			" AND (run_at ", cmp, " ", b.argT(at, TypeTime), " OR id ", cmp, " ", b.arg(p.AfterID), ")")
	case p.AfterID != 0:
		b.w(" AND id ", cmp, " ", b.arg(p.AfterID))
	}
	if p.ByRunAt {
		b.w(" ORDER BY run_at", dir, ", id", dir)
	} else {
		b.w(" ORDER BY id", dir)
	}
	b.w(" LIMIT ", b.arg(limit))
	return b.String(), b.args, nil
}
