package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/store/internal/sqlq"
)

// insertSQL adds jobs, one insertRowSQL per job in its VALUES list (%s);
// the columns it leaves out take their defaults. IGNORE skips a row whose
// unique_live collides in unique_idx with a live job's (or with an earlier
// row of the statement) instead of failing the statement. On MariaDB it
// ends in RETURNING id, unique_key; on MySQL the rows are read back with
// insertedSQL.
const insertSQL = `
INSERT IGNORE INTO {jobs}
    (queue, kind, args, priority, state, max_attempts, run_at, deadline, unique_key, tags, metadata, created_at)
VALUES %s`

// insertRowSQL is one job's row of insertSQL.
const insertRowSQL = "(?,?,?,?,?,?,?,?,?,?,?,?)"

// insertedSQL reads back the rows one insertSQL added, on MySQL: the ids
// from LAST_INSERT_ID() on, a primary-key range.
//
// Arguments: the first id, the number of rows inserted.
const insertedSQL = `SELECT id, unique_key FROM {jobs} WHERE id >= ? ORDER BY id LIMIT ?`

// liveByKeysSQL reads the live jobs holding the unique keys (%s) through
// unique_idx, with a current read (LOCK IN SHARE MODE), so it sees the row
// an insert collided with even when that row committed after this
// transaction's first read.
const liveByKeysSQL = `SELECT {columns} FROM {jobs} WHERE unique_live IN (%s) LOCK IN SHARE MODE`

// Statement size bounds of a batch insert: rows and bytes of payload per
// INSERT (well under the 16 MiB default max_allowed_packet of MariaDB;
// MySQL's is 64 MiB).
const (
	insertMaxRows  = 1000
	insertMaxBytes = 4 << 20
)

// Insert stores jobs in one transaction, one multi-row INSERT IGNORE per
// chunk of up to 1000 rows, and returns one result per input in input
// order. Unique keys are enforced by the unique index on unique_live: a key
// held by a live job yields that job with Duplicate=true, and a key
// repeated inside the batch yields one job, later inputs marked Duplicate.
// Deadlocks and lock wait timeouts are retried inside.
func (s *Store) Insert(ctx context.Context, now time.Time, jobs []core.InsertParams) ([]core.InsertResult, error) {
	if len(jobs) == 0 {
		return []core.InsertResult{}, nil
	}
	var out []core.InsertResult
	err := s.inTx(ctx, func(c sqlq.Conn) (err error) {
		out, err = s.InsertOn(ctx, c, now, jobs)
		return err
	})
	return out, err
}

// InsertOn is Insert on a caller-supplied connection or transaction, with
// no retries (InsertTx uses it with the caller's transaction).
func (s *Store) InsertOn(ctx context.Context, c sqlq.Conn, now time.Time, jobs []core.InsertParams) ([]core.InsertResult, error) {
	now = core.UTC(now)
	res := make([]core.InsertResult, len(jobs))
	err := sqlq.InsertRounds("mysql", jobs, res, func(send []int) ([]int, error) {
		return s.insertRows(ctx, c, now, jobs, send, res)
	}, func(keys []string) ([]*core.Job, error) {
		return s.liveByKeys(ctx, c, keys)
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// insertRows inserts the send rows, chunked, and fills res with the jobs
// inserted; it returns the indexes whose unique key conflicted.
func (s *Store) insertRows(ctx context.Context, c sqlq.Conn, now time.Time, jobs []core.InsertParams, send []int, res []core.InsertResult) ([]int, error) {
	var missing []int
	for start := 0; start < len(send); {
		end, size := start, 0
		for end < len(send) && end-start < insertMaxRows && (end == start || size < insertMaxBytes) {
			p := &jobs[send[end]]
			size += len(p.Args) + len(p.UniqueKey) + 256
			end++
		}
		m, err := s.insertChunk(ctx, c, now, jobs, send[start:end], res)
		if err != nil {
			return nil, err
		}
		missing = append(missing, m...)
		start = end
	}
	return missing, nil
}

// insertChunk runs one insertSQL. On MariaDB it returns the inserted ids
// with RETURNING; on MySQL it reads the rows from LAST_INSERT_ID() on
// (insertedSQL), within the same transaction (a multi-row insert of a
// known number of rows gets its ids as one block under every
// innodb_autoinc_lock_mode, and the rows read are checked against the
// inputs).
func (s *Store) insertChunk(ctx context.Context, c sqlq.Conn, now time.Time, jobs []core.InsertParams, part []int, res []core.InsertResult) ([]int, error) {
	args := make([]any, 0, 12*len(part))
	for _, i := range part {
		var err error
		if args, err = sqlq.AppendInsertRow(args, s.d, &jobs[i], now); err != nil {
			return nil, err
		}
	}
	type row struct {
		id  int64
		key sql.NullString
	}
	var got []row
	scan := func(rows sqlq.Rows, err error) error {
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var r row
			if err := rows.Scan(&r.id, &r.key); err != nil {
				return err
			}
			got = append(got, r)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		return rows.Close()
	}
	values := strings.Repeat(insertRowSQL+",", len(part)-1) + insertRowSQL
	if s.d.Returning(sqlq.StmtInsert) {
		if err := scan(c.Query(ctx, fmt.Sprintf(s.q.insertReturning, values), args...)); err != nil {
			return nil, err
		}
	} else {
		r, err := c.Exec(ctx, fmt.Sprintf(s.q.insert, values), args...)
		if err != nil {
			return nil, err
		}
		n, err := r.RowsAffected()
		if err != nil {
			return nil, err
		}
		if n > 0 {
			first, err := r.LastInsertId()
			if err != nil {
				return nil, err
			}
			if err := scan(c.Query(ctx, s.q.inserted, first, n)); err != nil {
				return nil, err
			}
		}
	}
	// Keyed rows are matched by key (unique among the rows sent), key-less
	// rows by id order, which is insert order.
	byKey := make(map[string]int64)
	var plain []int64
	for _, r := range got {
		if r.key.Valid {
			byKey[r.key.String] = r.id
		} else {
			plain = append(plain, r.id)
		}
	}
	slices.Sort(plain)
	var missing []int
	for _, i := range part {
		p := &jobs[i]
		if p.UniqueKey != "" {
			if id, ok := byKey[p.UniqueKey]; ok {
				res[i] = core.InsertResult{Job: insertedJob(id, p, now)}
				delete(byKey, p.UniqueKey)
			} else {
				missing = append(missing, i)
			}
			continue
		}
		if len(plain) == 0 {
			return nil, fmt.Errorf("mysql: insert: the server reported fewer inserted rows than were sent without a unique key")
		}
		res[i] = core.InsertResult{Job: insertedJob(plain[0], p, now)}
		plain = plain[1:]
	}
	if len(plain) > 0 || len(byKey) > 0 {
		return nil, fmt.Errorf("mysql: insert: rows read back after the insert do not match the rows sent (is innodb_autoinc_lock_mode giving one statement non-consecutive ids?)")
	}
	return missing, nil
}

// insertedJob is the job a fresh insert of p with id stored, as Get would
// return it.
func insertedJob(id int64, p *core.InsertParams, now time.Time) *core.Job {
	return &core.Job{
		ID:          id,
		Queue:       p.Queue,
		Kind:        p.Kind,
		Args:        slices.Clone(p.Args),
		Priority:    p.Priority,
		State:       sqlq.InsertState(p, now),
		MaxAttempts: p.MaxAttempts,
		RunAt:       core.UTC(p.RunAt),
		Deadline:    core.UTC(p.Deadline),
		UniqueKey:   p.UniqueKey,
		Tags:        slices.Clone(p.Tags),
		Metadata:    maps.Clone(p.Metadata),
		CreatedAt:   now,
	}
}

// liveByKeys reads the live jobs holding keys (liveByKeysSQL).
func (s *Store) liveByKeys(ctx context.Context, c sqlq.Conn, keys []string) ([]*core.Job, error) {
	args := make([]any, len(keys))
	for k, key := range keys {
		args[k] = key
	}
	return sqlq.ScanJobs(c.Query(ctx, fmt.Sprintf(s.q.liveByKeys, marks(len(keys))), args...))
}
