package postgres

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/core/storekit"
	"github.com/backlogq/backlog/store/internal/sqlq"
	"github.com/jackc/pgx/v5"
)

// Insert stores jobs with one statement (INSERT … SELECT FROM unnest …
// RETURNING) and returns one result per input in input order. The same
// statement notifies each queue that received due jobs. A key-less batch
// of copyMin jobs or more is written with COPY in one transaction instead
// (about 1.4× faster at 1000 jobs). A batch with unique keys runs in one
// transaction with the holds protocol (sqlq.InsertKeyed, on the
// unique_keys table): a held scoped key yields its holder with
// Duplicate=true, and a scoped key repeated inside the batch yields one
// job, later inputs marked Duplicate. A batch that names dependencies,
// steps or workflows runs in one transaction (insertWithDependencies).
func (s *Store) Insert(ctx context.Context, now time.Time, jobs []contract.InsertParams) ([]contract.InsertResult, error) {
	if len(jobs) == 0 {
		return []contract.InsertResult{}, nil
	}
	var out []contract.InsertResult
	if usesDependencies(jobs) {
		if err := storekit.CheckDependencies(jobs); err != nil {
			return nil, fmt.Errorf("postgres: %w", err)
		}
		err := s.inTx(ctx, func(tx pgx.Tx) (err error) {
			out, err = s.insertWithDependencies(ctx, pgConn{tx}, now, jobs)
			return err
		})
		return out, err
	}
	keyed := slices.ContainsFunc(jobs, func(p contract.InsertParams) bool { return p.UniqueKey != "" })
	if !keyed && len(jobs) >= copyMin {
		err := s.inTx(ctx, func(tx pgx.Tx) (err error) {
			out, err = s.copyInsert(ctx, tx, now, jobs)
			return err
		})
		return out, err
	}
	if !keyed {
		err := s.retry(ctx, func() (err error) {
			out, err = s.insertOn(ctx, s.db, now, jobs)
			return err
		})
		return out, err
	}
	err := s.inTx(ctx, func(tx pgx.Tx) (err error) {
		out, err = s.insertOn(ctx, pgConn{tx}, now, jobs)
		return err
	})
	return out, err
}

// insertOn is Insert on q (the pool for key-less batches, else a
// transaction), without retries.
func (s *Store) insertOn(ctx context.Context, q sqlq.Conn, now time.Time, jobs []contract.InsertParams) ([]contract.InsertResult, error) {
	now = contract.UTC(now)
	res := make([]contract.InsertResult, len(jobs))
	err := s.InsertKeyed(ctx, q, now, jobs, res, func(send []int) error {
		return s.insertRows(ctx, q, now, jobs, send, res)
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// insertRows inserts jobs[send] in one statement and fills res.
func (s *Store) insertRows(ctx context.Context, q sqlq.Conn, now time.Time, jobs []contract.InsertParams, send []int, res []contract.InsertResult) error {
	n := len(send)
	var (
		queue, kind, args, state = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		prio, maxAtt             = make([]int16, n), make([]int32, n)
		runAt                    = make([]time.Time, n)
		deadline                 = make([]*time.Time, n)
		key, tags, meta          = make([]*string, n), make([]*string, n), make([]*string, n)
		part                     = make([]*string, n)
	)
	for k, i := range send {
		p := &jobs[i]
		queue[k], kind[k], args[k] = p.Queue, p.Kind, string(p.Args)
		prio[k], maxAtt[k] = int16(p.Priority), int32(p.MaxAttempts)
		runAt[k] = contract.UTC(p.RunAt)
		state[k] = string(contract.StateAvailable)
		if runAt[k].After(now) {
			state[k] = string(contract.StateScheduled)
		}
		if !p.Deadline.IsZero() {
			d := contract.UTC(p.Deadline)
			deadline[k] = &d
		}
		if p.UniqueKey != "" {
			key[k] = &p.UniqueKey
		}
		if p.PartitionKey != "" {
			part[k] = &p.PartitionKey
		}
		var err error
		if tags[k], err = jsonText(encodeTags(p.Tags)); err != nil {
			return err
		}
		if meta[k], err = jsonText(encodeMetadata(p.Metadata)); err != nil {
			return err
		}
	}
	params := []any{queue, kind, args, prio, state, maxAtt, runAt, deadline, key, tags, meta, now, part}
	query, extra := s.q.insert, 0
	if s.notify {
		query, extra = s.q.insertNotify, 1
		params = append(params, s.channel)
	}
	rows, err := q.Query(ctx, query, params...)
	got, err := scanJobsExtra(rows, err, extra)
	if err != nil {
		return err
	}
	return sqlq.MatchInserted("postgres", jobs, send, got, res)
}

var (
	encodeTags     = sqlq.EncodeTags
	encodeMetadata = sqlq.EncodeMetadata
)

// jsonText turns sqlq's encoded JSON (a string or nil) into a nullable
// text parameter.
func jsonText(v any, err error) (*string, error) {
	if err != nil || v == nil {
		return nil, err
	}
	s := v.(string)
	return &s, nil
}
