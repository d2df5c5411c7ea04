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
	err := InsertRounds("sqlq", jobs, res, func(send []int) ([]int, error) {
		return s.insertReturning(ctx, c, now, jobs, send, res)
	}, func(keys []string) ([]*core.Job, error) {
		return s.liveByKeys(ctx, c, keys)
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// InsertRounds runs the unique-key protocol every SQL store's Insert shares
// and fills res (one result per input). Each distinct unique key is sent
// once: insert writes jobs[send], fills res for the rows it inserted and
// returns the indexes whose unique key conflicted; live reads the live jobs
// holding those keys, which become Duplicate results. A key that conflicted
// with a job that then finished before it could be read is sent again, up
// to five rounds (not possible on SQLite, where the whole call holds the
// write lock). Later inputs repeating a key in the batch get a copy of the
// first one's job, marked Duplicate. name prefixes the error.
func InsertRounds(name string, jobs []core.InsertParams, res []core.InsertResult,
	insert func(send []int) (missing []int, err error), live func(keys []string) ([]*core.Job, error)) error {
	if len(jobs) == 0 {
		return nil
	}
	// The first round of distinct keys is what the database sees: every
	// key-less input and the first input with each unique key.
	type key struct {
		unique string
		plain  int // the input index of a key-less input, else -1
	}
	send := Rounds(len(jobs), func(i int) key {
		if k := jobs[i].UniqueKey; k != "" {
			return key{unique: k, plain: -1}
		}
		return key{plain: i}
	})[0]
	firstByKey := make(map[string]int)
	for _, i := range send {
		if k := jobs[i].UniqueKey; k != "" {
			firstByKey[k] = i
		}
	}
	for round := 0; len(send) > 0; round++ {
		if round == 5 {
			return fmt.Errorf("%s: insert: unique keys kept changing state between insert and read", name)
		}
		missing, err := insert(send)
		if err != nil {
			return err
		}
		if len(missing) == 0 {
			break
		}
		keys := make([]string, len(missing))
		for k, i := range missing {
			keys[k] = jobs[i].UniqueKey
		}
		got, err := live(keys)
		if err != nil {
			return err
		}
		byKey := make(map[string]*core.Job, len(got))
		for _, j := range got {
			byKey[j.UniqueKey] = j
		}
		send = send[:0]
		for _, i := range missing {
			if j, ok := byKey[jobs[i].UniqueKey]; ok {
				res[i] = core.InsertResult{Job: j, Duplicate: true}
			} else {
				send = append(send, i)
			}
		}
	}
	for i, p := range jobs {
		if res[i].Job == nil && p.UniqueKey != "" {
			cp := *res[firstByKey[p.UniqueKey]].Job
			res[i] = core.InsertResult{Job: &cp, Duplicate: true}
		}
	}
	return nil
}

// MatchInserted fills res[i] for each input index i in send from the rows
// an INSERT … RETURNING of jobs[send] returned: keyed rows are matched by
// key (unique among the rows sent), key-less rows by id order, which is
// insert order. It returns the keyed indexes no row came back for (their
// key conflicted). name prefixes the error.
func MatchInserted(name string, jobs []core.InsertParams, send []int, got []*core.Job, res []core.InsertResult) ([]int, error) {
	byKey := make(map[string]*core.Job)
	plain := make([]*core.Job, 0, len(got))
	for _, j := range got {
		if j.UniqueKey != "" {
			byKey[j.UniqueKey] = j
		} else {
			plain = append(plain, j)
		}
	}
	slices.SortFunc(plain, func(a, b *core.Job) int { return cmp.Compare(a.ID, b.ID) })
	var missing []int
	for _, i := range send {
		if k := jobs[i].UniqueKey; k != "" {
			if j, ok := byKey[k]; ok {
				res[i] = core.InsertResult{Job: j}
			} else {
				missing = append(missing, i)
			}
			continue
		}
		if len(plain) == 0 {
			return nil, fmt.Errorf("%s: insert returned fewer rows than it inserted", name)
		}
		res[i] = core.InsertResult{Job: plain[0]}
		plain = plain[1:]
	}
	return missing, nil
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
		got, err := ScanJobs(c.Query(ctx, b.String(), b.args...))
		if err != nil {
			return nil, err
		}
		m, err := MatchInserted("sqlq", jobs, part, got, res)
		if err != nil {
			return nil, err
		}
		missing = append(missing, m...)
	}
	return missing, nil
}

// liveByKeys reads the live jobs holding keys.
func (s *Store) liveByKeys(ctx context.Context, c Conn, keys []string) ([]*core.Job, error) {
	b := newBuilder(s.d, len(keys))
	b.w("SELECT ", JobColumns, " FROM ", s.t.Jobs, " WHERE unique_key IN (")
	for k, key := range keys {
		if k > 0 {
			b.w(",")
		}
		b.w(b.arg(key))
	}
	b.w(") AND state NOT IN ", finalIn)
	return ScanJobs(c.Query(ctx, b.String(), b.args...))
}

// InsertState is the state a newly inserted job starts in: scheduled when
// its RunAt is after now, else available.
func InsertState(p *core.InsertParams, now time.Time) core.State {
	if p.RunAt.After(now) {
		return core.StateScheduled
	}
	return core.StateAvailable
}

// AppendInsertRow appends to args the values a store's insert statement
// binds for p, one row of its VALUES list, in the order queue, kind, args,
// priority, state (InsertState), max_attempts, run_at, deadline, unique_key
// (NULL when empty), tags, metadata (JSON, NULL when nil), created_at
// (now); d encodes the times.
func AppendInsertRow(args []any, d Dialect, p *core.InsertParams, now time.Time) ([]any, error) {
	tags, err := EncodeTags(p.Tags)
	if err != nil {
		return nil, err
	}
	meta, err := EncodeMetadata(p.Metadata)
	if err != nil {
		return nil, err
	}
	var key any
	if p.UniqueKey != "" {
		key = p.UniqueKey
	}
	return append(args, p.Queue, p.Kind, string(p.Args), int64(p.Priority), string(InsertState(p, now)), int64(p.MaxAttempts),
		d.Time(p.RunAt), d.Time(p.Deadline), key, tags, meta, d.Time(now)), nil
}
