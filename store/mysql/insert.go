package mysql

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/internal/sqlq"
)

// insertSQL adds jobs, one insertRowSQL per job in its VALUES list (%s);
// the columns it leaves out take their defaults. Unique keys are held in
// <prefix>unique_keys (sqlq.InsertKeyed), so every row sent is inserted;
// IGNORE keeps what it always did for values a column cannot hold (a
// warning and the column's nearest value, not an error). On MariaDB it
// ends in RETURNING id; on MySQL the rows are read back with insertedSQL.
const insertSQL = `
INSERT IGNORE INTO {jobs}
    (queue, kind, args, priority, state, max_attempts, run_at, deadline, unique_key, tags, metadata, created_at, partition_key)
VALUES %s`

// insertRowSQL is one job's row of insertSQL.
const insertRowSQL = "(?,?,?,?,?,?,?,?,?,?,?,?,?)"

// insertedSQL reads back the rows one insertSQL added, on MySQL: the ids
// from LAST_INSERT_ID() on, a primary-key range.
//
// Arguments: the first id, the number of rows inserted.
const insertedSQL = `SELECT id FROM {jobs} WHERE id >= ? ORDER BY id LIMIT ?`

// Statement size bounds of a batch insert: rows and bytes of payload per
// INSERT (well under the 16 MiB default max_allowed_packet of MariaDB;
// MySQL's is 64 MiB).
const (
	insertMaxRows  = 1000
	insertMaxBytes = 4 << 20
)

// Insert stores jobs in one transaction, one multi-row INSERT IGNORE per
// chunk of up to 1000 rows, and returns one result per input in input
// order. Unique keys are held in <prefix>unique_keys under its primary
// key (sqlq.InsertKeyed): a held scoped key yields its holder with
// Duplicate=true, and a scoped key repeated inside the batch yields one
// job, later inputs marked Duplicate. A key-less batch runs insertSQL
// alone.
// Deadlocks and lock wait timeouts are retried inside.
func (s *Store) Insert(ctx context.Context, now time.Time, jobs []contract.InsertParams) ([]contract.InsertResult, error) {
	if len(jobs) == 0 {
		return []contract.InsertResult{}, nil
	}
	var out []contract.InsertResult
	err := s.inTx(ctx, func(c sqlq.Conn) (err error) {
		out, err = s.InsertOn(ctx, c, now, jobs)
		return err
	})
	return out, err
}

// InsertOn is Insert on a caller-supplied connection or transaction, with
// no retries (InsertTx uses it with the caller's transaction).
func (s *Store) InsertOn(ctx context.Context, c sqlq.Conn, now time.Time, jobs []contract.InsertParams) ([]contract.InsertResult, error) {
	now = contract.UTC(now)
	if needsDeps(jobs) {
		return s.insertWithDeps(ctx, c, now, jobs)
	}
	res := make([]contract.InsertResult, len(jobs))
	err := s.InsertKeyed(ctx, c, now, jobs, res, func(send []int) error {
		return s.insertRows(ctx, c, now, jobs, send, res)
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// insertRows inserts the send rows, chunked, and fills res with the jobs
// inserted.
func (s *Store) insertRows(ctx context.Context, c sqlq.Conn, now time.Time, jobs []contract.InsertParams, send []int, res []contract.InsertResult) error {
	for start := 0; start < len(send); {
		end, size := start, 0
		for end < len(send) && end-start < insertMaxRows && (end == start || size < insertMaxBytes) {
			p := &jobs[send[end]]
			size += len(p.Args) + len(p.UniqueKey) + 256
			end++
		}
		if err := s.insertChunk(ctx, c, now, jobs, send[start:end], res); err != nil {
			return err
		}
		start = end
	}
	return nil
}

// insertChunk runs one insertSQL. On MariaDB it returns the inserted ids
// with RETURNING; on MySQL it reads the rows from LAST_INSERT_ID() on
// (insertedSQL), within the same transaction (a multi-row insert of a
// known number of rows gets its ids as one block under every
// innodb_autoinc_lock_mode, and the rows read are checked against the
// inputs).
func (s *Store) insertChunk(ctx context.Context, c sqlq.Conn, now time.Time, jobs []contract.InsertParams, part []int, res []contract.InsertResult) error {
	args := make([]any, 0, 13*len(part))
	for _, i := range part {
		var err error
		if args, err = sqlq.AppendInsertRow(args, s.d, &jobs[i], now); err != nil {
			return err
		}
	}
	values := strings.Repeat(insertRowSQL+",", len(part)-1) + insertRowSQL
	got, err := s.insertStatement(ctx, c, s.q.insert, s.q.insertReturning, values, args, len(part))
	if err != nil {
		return err
	}
	for k, i := range part {
		res[i] = contract.InsertResult{Job: sqlq.InsertedJob(got[k], &jobs[i], now)}
	}
	return nil
}

// insertStatement runs an INSERT of n rows whose VALUES list is %s, filled
// with values, binding args, and returns the ids inserted, ascending (insert
// order): on MariaDB returning, the statement ending in RETURNING id; on
// MySQL plain, then insertedSQL from LAST_INSERT_ID() on.
func (s *Store) insertStatement(ctx context.Context, c sqlq.Conn, plain, returning, values string, args []any, n int) ([]int64, error) {
	var got []int64
	scan := func(rows sqlq.Rows, err error) error {
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				return err
			}
			got = append(got, id)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		return rows.Close()
	}
	if s.d.Returning(sqlq.StmtInsert) {
		if err := scan(c.Query(ctx, fmt.Sprintf(returning, values), args...)); err != nil {
			return nil, err
		}
	} else {
		r, err := c.Exec(ctx, fmt.Sprintf(plain, values), args...)
		if err != nil {
			return nil, err
		}
		affected, err := r.RowsAffected()
		if err != nil {
			return nil, err
		}
		if affected > 0 {
			first, err := r.LastInsertId()
			if err != nil {
				return nil, err
			}
			if err := scan(c.Query(ctx, s.q.inserted, first, affected)); err != nil {
				return nil, err
			}
		}
	}
	// Rows are matched by id order, which is insert order.
	if len(got) != n {
		return nil, fmt.Errorf("mysql: insert: %d rows read back after inserting %d (is innodb_autoinc_lock_mode giving one statement non-consecutive ids?)", len(got), n)
	}
	slices.Sort(got)
	return got, nil
}
