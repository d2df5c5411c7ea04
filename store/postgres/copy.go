package postgres

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/backlogq/backlog/core/contract"

	"github.com/jackc/pgx/v5"
)

// copyMin is the smallest key-less batch Insert writes with COPY instead of
// INSERT … SELECT FROM unnest: below it the extra round trips (BEGIN, id
// reservation, COPY, notify, COMMIT) cost more than COPY saves.
const copyMin = 256

// copyInsert inserts key-less jobs with COPY in one transaction on tx:
// reserve ids from the table's identity sequence (in input order), copy the
// rows with those ids, notify the queues that received due jobs, and build
// the results from the inputs (what the database would return: attempt 0,
// no errors, UTC microsecond times).
func (s *Store) copyInsert(ctx context.Context, tx pgx.Tx, now time.Time, jobs []contract.InsertParams) ([]contract.InsertResult, error) {
	now = contract.UTC(now)
	rows, err := tx.Query(ctx, s.q.reserveIDs, len(jobs))
	if err != nil {
		return nil, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, err
	}
	if len(ids) != len(jobs) {
		return nil, fmt.Errorf("postgres: reserved %d ids for %d jobs", len(ids), len(jobs))
	}
	slices.Sort(ids)
	res := make([]contract.InsertResult, len(jobs))
	src := make([][]any, len(jobs))
	var due []string
	for i := range jobs {
		p := &jobs[i]
		j := &contract.Job{ID: ids[i], Queue: p.Queue, Kind: p.Kind, Args: append([]byte(nil), p.Args...), Priority: p.Priority,
			State: contract.StateAvailable, MaxAttempts: p.MaxAttempts, RunAt: contract.UTC(p.RunAt), Deadline: contract.UTC(p.Deadline),
			Tags: p.Tags, Metadata: p.Metadata, CreatedAt: now, PartitionKey: p.PartitionKey}
		if j.RunAt.After(now) {
			j.State = contract.StateScheduled
		} else if !slices.Contains(due, p.Queue) {
			due = append(due, p.Queue)
		}
		tags, err := jsonText(encodeTags(p.Tags))
		if err != nil {
			return nil, err
		}
		meta, err := jsonText(encodeMetadata(p.Metadata))
		if err != nil {
			return nil, err
		}
		var deadline *time.Time
		if !j.Deadline.IsZero() {
			deadline = &j.Deadline
		}
		var part *string
		if p.PartitionKey != "" {
			part = &p.PartitionKey
		}
		src[i] = []any{j.ID, j.Queue, j.Kind, string(p.Args), int16(j.Priority), string(j.State), int32(j.MaxAttempts), j.RunAt, deadline, tags, meta, now, part}
		res[i] = contract.InsertResult{Job: j}
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{s.schema, "jobs"}, copyCols, pgx.CopyFromRows(src)); err != nil {
		return nil, err
	}
	if s.notify && len(due) > 0 {
		if _, err := tx.Exec(ctx, s.q.notifyQueues, s.channel, due); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// copyCols are the columns copyInsert writes; the rest take their defaults.
var copyCols = []string{"id", "queue", "kind", "args", "priority", "state", "max_attempts", "run_at", "deadline", "tags", "metadata", "created_at", "partition_key"}
