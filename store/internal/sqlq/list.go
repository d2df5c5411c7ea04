package sqlq

import (
	"context"
	"slices"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/core/storekit"
)

// List returns jobs matching p ordered by id (descending when p.Desc), or
// by (run_at, id) with p.ByRunAt, after p's keyset cursor; p.Limit 0
// means 100.
func (s *Store) List(ctx context.Context, p contract.ListParams) ([]*contract.Job, error) {
	return s.ListPage(ctx, p, 0)
}

// ListPage implements contract.PageLister: a read in p's order, row by row,
// until p.Limit jobs or until the jobs read weigh maxBytes
// (storekit.JobWeight).
//
// Each statement is one range read of an index in p's order: the primary
// key for id order, jobs_run_at (run_at, id) for run_at order (schema
// version 10 on SQLite, 11 on MySQL; on PostgreSQL jobs_run_at_idle,
// schema version 14, which leaves running jobs out: see ListQuery). The cursor is
// written as run_at <= t AND (run_at < t OR id < after) (mirrored for
// ascending order) so that the first conjunct bounds the index range on
// every database.
//
// Where the dialect's rows stop when closed (RowsStopEarly: SQLite stops
// stepping the statement) the page is one statement of LIMIT p.Limit.
// Elsewhere closing rows early still receives the rest of the result
// (pgx and go-sql-driver/mysql drain it), so the page is read in
// statements that continue from the last row read: the first of
// listFirstChunk rows, each next one sized by the weight of the rows read
// so far to what the budget still holds. Small jobs take two statements;
// what is received beyond the budget is at most one statement's rows.
func (s *Store) ListPage(ctx context.Context, p contract.ListParams, maxBytes int) ([]*contract.Job, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	if es, ok := s.d.(RowsStopEarly); maxBytes <= 0 || (ok && es.RowsStopEarly()) {
		q := p
		q.Limit = limit
		return s.listRead(ctx, s.t.Jobs, q, maxBytes)
	}
	var out []*contract.Job
	used := 0
	want := min(limit, listFirstChunk)
	for {
		q := p
		q.Limit = want
		if len(out) > 0 {
			last := out[len(out)-1]
			q.AfterID, q.AfterRunAt = last.ID, last.RunAt
		}
		jobs, err := s.listRead(ctx, s.t.Jobs, q, maxBytes-used)
		if err != nil {
			return nil, err
		}
		for _, j := range jobs {
			used += storekit.JobWeight(j)
		}
		out = append(out, jobs...)
		if used >= maxBytes || len(jobs) < want || len(out) >= limit {
			return out, nil
		}
		avg := max(1, used/len(out))
		want = min(limit-len(out), (maxBytes-used)/avg+1)
	}
}

// listFirstChunk is the LIMIT of the first statement of a page read in
// statements (see ListPage).
const listFirstChunk = 16

// RowsStopEarly is implemented by a Dialect whose driver ends a read when
// its rows are closed before their end, without receiving the rest.
type RowsStopEarly interface {
	RowsStopEarly() bool
}

// listRead runs ListQuery(p) on table (the jobs or the archive) and
// scans its rows until they end or the jobs scanned weigh maxBytes (no
// bound when maxBytes <= 0).
func (s *Store) listRead(ctx context.Context, table string, p contract.ListParams, maxBytes int) ([]*contract.Job, error) {
	q, args, err := s.listQuery(table, p)
	if err != nil {
		return nil, err
	}
	var out []*contract.Job
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
			if size += storekit.JobWeight(j); maxBytes > 0 && size >= maxBytes {
				return nil // the rows' Close ends the read
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if err := rows.Close(); err != nil {
			return err
		}
		return s.LoadDependsOn(ctx, s.db, out)
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
//
// Where the dialect's run_at index leaves running jobs out
// (RunAtIndexSkipsRunning: PostgreSQL's jobs_run_at_idle, schema version
// 14, so that a claim writes no entry in it), a page in run_at order
// that may hold running jobs is the merge of two reads of at most
// p.Limit rows each: that index's range for the other states and the
// running jobs (few: one per busy worker) sorted.
func (s *Store) ListQuery(p contract.ListParams) (string, []any, error) {
	return s.listQuery(s.t.Jobs, p)
}

// listQuery is ListQuery on table, the jobs or the archive (whose
// columns and indexes by id and by (run_at, id) are the jobs table's).
func (s *Store) listQuery(table string, p contract.ListParams) (string, []any, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	leaves, err := contract.ParseArgsPattern(p.ArgsContains)
	if err != nil {
		return "", nil, err
	}
	b := newBuilder(s.d, 2*(5+len(p.States)+3*len(leaves))+3)
	cmp, dir := ">", ""
	if p.Desc {
		cmp, dir = "<", " DESC"
	}
	// read writes one SELECT of p's filters and cursor, with extra
	// appended to its WHERE.
	read := func(extra string) {
		b.w("SELECT ", JobColumns, " FROM ", table, " WHERE 1=1", extra)
		if p.Queue != "" {
			b.w(" AND queue = ", b.arg(p.Queue))
		}
		if p.Kind != "" {
			b.w(" AND kind = ", b.arg(p.Kind))
		}
		if p.WorkflowID != 0 {
			b.w(" AND workflow_id = ", b.arg(p.WorkflowID))
		}
		if p.WorkflowFirst {
			b.w(" AND workflow_id = id")
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
		switch {
		case p.ByRunAt && p.AfterID != 0:
			at := s.d.Time(contract.UTC(p.AfterRunAt))
			b.w(" AND run_at ", cmp, "= ", b.argT(at, TypeTime),
				" AND (run_at ", cmp, " ", b.argT(at, TypeTime), " OR id ", cmp, " ", b.arg(p.AfterID), ")")
		case p.AfterID != 0:
			b.w(" AND id ", cmp, " ", b.arg(p.AfterID))
		}
	}
	order := " ORDER BY id" + dir
	if p.ByRunAt {
		order = " ORDER BY run_at" + dir + ", id" + dir
	}
	running, others := true, true
	if len(p.States) > 0 {
		running = slices.Contains(p.States, contract.StateRunning)
		others = slices.ContainsFunc(p.States, func(st contract.State) bool { return st != contract.StateRunning })
	}
	sk, _ := s.d.(interface{ RunAtIndexSkipsRunning() bool })
	split := table == s.t.Jobs && p.ByRunAt && sk != nil && sk.RunAtIndexSkipsRunning() && others
	const notRunning, isRunning = " AND state <> '" + string(contract.StateRunning) + "'", " AND state = '" + string(contract.StateRunning) + "'"
	switch {
	case split && running:
		b.w("SELECT * FROM ((")
		read(notRunning)
		b.w(order, " LIMIT ", b.arg(limit), ") UNION ALL (")
		read(isRunning)
		b.w(order, " LIMIT ", b.arg(limit), ")) u", order, " LIMIT ", b.arg(limit))
	case split:
		read(notRunning)
		b.w(order, " LIMIT ", b.arg(limit))
	default:
		read("")
		b.w(order, " LIMIT ", b.arg(limit))
	}
	return b.String(), b.args, nil
}
