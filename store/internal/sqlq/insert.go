package sqlq

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

// MatchInserted fills res[i] for each input index i in send from the rows
// an INSERT … RETURNING of jobs[send] returned, matched by id order, which
// is insert order (every row sent is inserted: the jobs table has no
// unique index; unique keys are held in their own table, InsertKeyed).
// name prefixes the error.
func MatchInserted(name string, jobs []contract.InsertParams, send []int, got []*contract.Job, res []contract.InsertResult) error {
	if len(got) != len(send) {
		return fmt.Errorf("%s: insert returned %d rows for the %d it inserted", name, len(got), len(send))
	}
	slices.SortFunc(got, func(a, b *contract.Job) int { return cmp.Compare(a.ID, b.ID) })
	for k, i := range send {
		res[i] = contract.InsertResult{Job: got[k]}
	}
	return nil
}

// InsertState is the state a newly inserted job starts in: scheduled when
// its RunAt is after now, else available.
func InsertState(p *contract.InsertParams, now time.Time) contract.State {
	if p.RunAt.After(now) {
		return contract.StateScheduled
	}
	return contract.StateAvailable
}

// AppendInsertRow appends to args the values a store's insert statement
// binds for p, one row of its VALUES list, in the order queue, kind, args,
// priority, state (InsertState), max_attempts, run_at, deadline, unique_key
// (NULL when empty), tags, metadata (JSON, NULL when nil), created_at
// (now), partition_key (NULL when empty); d encodes the times.
func AppendInsertRow(args []any, d Dialect, p *contract.InsertParams, now time.Time) ([]any, error) {
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
	var part any
	if p.PartitionKey != "" {
		part = p.PartitionKey
	}
	return append(args, p.Queue, p.Kind, string(p.Args), int64(p.Priority), string(InsertState(p, now)), int64(p.MaxAttempts),
		d.Time(p.RunAt), d.Time(p.Deadline), key, tags, meta, d.Time(now), part), nil
}
