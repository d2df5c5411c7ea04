package sqlq

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/backlogq/backlog/core"
)

// insertCols are the columns Insert writes; the rest take their defaults
// (attempt 0, errors '[]', version 0, NULLs).
const insertCols = "queue, kind, args, priority, state, max_attempts, run_at, deadline, unique_key, tags, metadata, created_at"

const insertColCount = 12

// Insert stores jobs in one transaction (one multi-row statement per chunk
// under the dialect's parameter limit) and returns one result per input in
// input order. Unique keys are enforced by the database: a key held by a
// live job yields that job with Duplicate=true, and a key repeated inside
// the batch yields one job, later inputs marked Duplicate.
func (s *Store) Insert(ctx context.Context, now time.Time, jobs []core.InsertParams) ([]core.InsertResult, error) {
	if len(jobs) == 0 {
		return []core.InsertResult{}, nil
	}
	var out []core.InsertResult
	err := s.tx(ctx, func(c Conn) (err error) {
		out, err = s.InsertOn(ctx, c, now, jobs)
		return err
	})
	return out, err
}

// InsertOn is Insert on a caller-supplied connection or transaction, with no
// retries (core.TxInserter uses it with the caller's transaction).
func (s *Store) InsertOn(ctx context.Context, c Conn, now time.Time, jobs []core.InsertParams) ([]core.InsertResult, error) {
	res := make([]core.InsertResult, len(jobs))
	firstByKey := make(map[string]int)
	var send []int // input indexes to send to the database
	for i, p := range jobs {
		if p.UniqueKey != "" {
			if _, dup := firstByKey[p.UniqueKey]; dup {
				continue
			}
			firstByKey[p.UniqueKey] = i
		}
		send = append(send, i)
	}
	// Rounds: a key that conflicted with a live job that then finished
	// before we could read it is sent again (not possible on SQLite, where
	// the whole call holds the write lock).
	for round := 0; len(send) > 0; round++ {
		if round == 5 {
			return nil, fmt.Errorf("sqlq: insert: unique keys kept changing state between insert and read")
		}
		var missing []int
		var err error
		if s.d.Returning(StmtInsert) {
			missing, err = s.insertReturning(ctx, c, now, jobs, send, res)
		} else {
			missing, err = s.insertEach(ctx, c, now, jobs, send, res)
		}
		if err != nil {
			return nil, err
		}
		if len(missing) == 0 {
			break
		}
		send, err = s.fillDuplicates(ctx, c, jobs, missing, res)
		if err != nil {
			return nil, err
		}
	}
	for i, p := range jobs {
		if res[i].Job == nil && p.UniqueKey != "" {
			first := res[firstByKey[p.UniqueKey]].Job
			cp := *first
			res[i] = core.InsertResult{Job: &cp, Duplicate: true}
		}
	}
	return res, nil
}

// insertValues binds one row's values.
func (s *Store) insertValues(b *builder, now time.Time, p *core.InsertParams) error {
	tags, err := EncodeTags(p.Tags)
	if err != nil {
		return err
	}
	meta, err := EncodeMetadata(p.Metadata)
	if err != nil {
		return err
	}
	state := core.StateAvailable
	if p.RunAt.After(now) {
		state = core.StateScheduled
	}
	var key any
	if p.UniqueKey != "" {
		key = p.UniqueKey
	}
	b.w("(", b.argT(p.Queue, TypeText), ",", b.argT(p.Kind, TypeText), ",", b.argT(string(p.Args), TypeJSON), ",",
		b.argT(int64(p.Priority), TypeInt), ",", b.argT(string(state), TypeText), ",", b.argT(int64(p.MaxAttempts), TypeInt), ",",
		b.argT(s.d.Time(p.RunAt), TypeTime), ",", b.argT(s.d.Time(p.Deadline), TypeTime), ",", b.argT(key, TypeText), ",",
		b.argT(tags, TypeJSON), ",", b.argT(meta, TypeJSON), ",", b.argT(s.d.Time(now), TypeTime), ")")
	return nil
}

// insertReturning inserts the send rows with multi-row INSERT … RETURNING
// and fills res; it returns the indexes whose unique key conflicted.
func (s *Store) insertReturning(ctx context.Context, c Conn, now time.Time, jobs []core.InsertParams, send []int, res []core.InsertResult) ([]int, error) {
	verb, suffix := s.d.InsertIgnore()
	chunk := max(1, min(1000, s.d.MaxParams()/insertColCount))
	var missing []int
	for start := 0; start < len(send); start += chunk {
		part := send[start:min(len(send), start+chunk)]
		b := newBuilder(s.d, len(part)*insertColCount)
		b.w(verb, " ", s.t.Jobs, " (", insertCols, ") VALUES ")
		for k, i := range part {
			if k > 0 {
				b.w(",")
			}
			if err := s.insertValues(b, now, &jobs[i]); err != nil {
				return nil, err
			}
		}
		b.w(suffix, " RETURNING ", JobColumns)
		got, err := scanJobs(c.Query(ctx, b.String(), b.args...))
		if err != nil {
			return nil, err
		}
		// Keyed rows are matched by key (unique among the rows sent);
		// key-less rows by id order, which is insert order.
		byKey := make(map[string]*core.Job)
		var plain []*core.Job
		for _, j := range got {
			if j.UniqueKey != "" {
				byKey[j.UniqueKey] = j
			} else {
				plain = append(plain, j)
			}
		}
		slices.SortFunc(plain, func(a, b *core.Job) int { return cmp.Compare(a.ID, b.ID) })
		for _, i := range part {
			p := &jobs[i]
			if p.UniqueKey != "" {
				if j, ok := byKey[p.UniqueKey]; ok {
					res[i] = core.InsertResult{Job: j}
				} else {
					missing = append(missing, i)
				}
				continue
			}
			if len(plain) == 0 {
				return nil, fmt.Errorf("sqlq: insert returned fewer rows than it inserted")
			}
			res[i] = core.InsertResult{Job: plain[0]}
			plain = plain[1:]
		}
	}
	return missing, nil
}

// insertEach inserts the send rows one statement at a time (dialects without
// INSERT … RETURNING) and fills res; it returns the conflicted indexes.
func (s *Store) insertEach(ctx context.Context, c Conn, now time.Time, jobs []core.InsertParams, send []int, res []core.InsertResult) ([]int, error) {
	verb, suffix := s.d.InsertIgnore()
	var missing []int
	var ids []int64
	var idx []int
	for _, i := range send {
		b := newBuilder(s.d, insertColCount)
		b.w(verb, " ", s.t.Jobs, " (", insertCols, ") VALUES ")
		if err := s.insertValues(b, now, &jobs[i]); err != nil {
			return nil, err
		}
		b.w(suffix)
		r, err := c.Exec(ctx, b.String(), b.args...)
		if err != nil {
			return nil, err
		}
		n, err := r.RowsAffected()
		if err != nil {
			return nil, err
		}
		if n == 0 {
			missing = append(missing, i)
			continue
		}
		id, err := r.LastInsertId()
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
		idx = append(idx, i)
	}
	got, err := s.getManyOn(ctx, c, ids)
	if err != nil {
		return nil, err
	}
	if len(got) != len(ids) {
		return nil, fmt.Errorf("sqlq: inserted jobs vanished before they could be read")
	}
	for k, i := range idx {
		res[i] = core.InsertResult{Job: got[k]}
	}
	return missing, nil
}

// fillDuplicates reads the live jobs holding the keys of the missing inputs
// and marks those results Duplicate. It returns the inputs whose key is no
// longer held (to be inserted again).
func (s *Store) fillDuplicates(ctx context.Context, c Conn, jobs []core.InsertParams, missing []int, res []core.InsertResult) ([]int, error) {
	b := newBuilder(s.d, len(missing))
	b.w("SELECT ", JobColumns, " FROM ", s.t.Jobs, " WHERE unique_key IN (")
	for k, i := range missing {
		if k > 0 {
			b.w(",")
		}
		b.w(b.arg(jobs[i].UniqueKey))
	}
	b.w(") AND state NOT IN ", finalIn)
	got, err := scanJobs(c.Query(ctx, b.String(), b.args...))
	if err != nil {
		return nil, err
	}
	byKey := make(map[string]*core.Job, len(got))
	for _, j := range got {
		byKey[j.UniqueKey] = j
	}
	var again []int
	for _, i := range missing {
		if j, ok := byKey[jobs[i].UniqueKey]; ok {
			res[i] = core.InsertResult{Job: j, Duplicate: true}
		} else {
			again = append(again, i)
		}
	}
	return again, nil
}
