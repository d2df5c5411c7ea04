package sqlite

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/internal/sqlq"
)

// insertSQL adds jobs, one insertRowSQL per job in its VALUES list (%s),
// and returns the ids it gave them; the columns it leaves out take their
// defaults. Unique keys are held in <prefix>unique_keys
// (sqlq.InsertKeyed), so every row sent is inserted. The rest of each
// row is what was sent (sqlq.InsertedJob): returning every column cost
// the single writer a conversion per column and job.
const insertSQL = `
INSERT INTO {jobs}
    (queue, kind, args, priority, state, max_attempts, run_at, deadline, unique_key, tags, metadata, created_at, partition_key)
VALUES %s
RETURNING id`

// insertRowSQL is one job's row of insertSQL.
const insertRowSQL = "(?,?,?,?,?,?,?,?,?,?,?,?,?)"

// insertChunk is the most rows one insertSQL carries (13 parameters each,
// well under SQLite's 32766).
const insertChunk = 1000

// Insert stores jobs in one write transaction, one insertSQL per 1000, and
// returns one result per input in input order. Unique keys are held in
// <prefix>unique_keys under its primary key (sqlq.InsertKeyed): a held key
// yields its holder with Duplicate=true, and a scoped key repeated inside
// the batch yields one job, later inputs marked Duplicate. A key-less
// batch runs insertSQL alone.
func (s *Store) Insert(ctx context.Context, now time.Time, jobs []contract.InsertParams) ([]contract.InsertResult, error) {
	if len(jobs) == 0 {
		return []contract.InsertResult{}, nil
	}
	return inTx(ctx, s, func(c sqlq.Conn) ([]contract.InsertResult, error) { return s.InsertOn(ctx, c, now, jobs) })
}

// InsertOn is Insert on a caller-supplied connection or transaction, with
// no retries (InsertTx uses it with the caller's transaction).
func (s *Store) InsertOn(ctx context.Context, c sqlq.Conn, now time.Time, jobs []contract.InsertParams) ([]contract.InsertResult, error) {
	if usesDependencies(jobs) {
		return s.insertWithDependencies(ctx, c, now, jobs)
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

// insertRows inserts jobs[send] with insertSQL and fills res.
func (s *Store) insertRows(ctx context.Context, c sqlq.Conn, now time.Time, jobs []contract.InsertParams, send []int, res []contract.InsertResult) error {
	for start := 0; start < len(send); start += insertChunk {
		part := send[start:min(len(send), start+insertChunk)]
		args := make([]any, 0, 13*len(part))
		for _, i := range part {
			var err error
			if args, err = sqlq.AppendInsertRow(args, dialect{}, &jobs[i], now); err != nil {
				return err
			}
		}
		got, err := sqlq.ScanIDs(c.Query(ctx, fmt.Sprintf(s.sql.insert, rows(insertRowSQL, len(part))), args...))
		if err != nil {
			return err
		}
		// Ids are matched by their order, which is insert order.
		if len(got) != len(part) {
			return fmt.Errorf("sqlite: insert returned %d rows for the %d it inserted", len(got), len(part))
		}
		slices.Sort(got)
		for k, i := range part {
			res[i] = contract.InsertResult{Job: sqlq.InsertedJob(got[k], &jobs[i], now)}
		}
	}
	return nil
}
