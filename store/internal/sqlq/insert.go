package sqlq

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/backlogq/backlog/core"
)

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
