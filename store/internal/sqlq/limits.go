package sqlq

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/backlogq/backlog/core"
)

// Concurrency limits (core.QueueLimiter) live in the queues table, in the
// record PauseQueue writes, as the columns
//
//	limited                   true when any limit is set: the claims'
//	                          one-column test of "take the limited path"
//	max_running               core.QueueLimits.MaxRunning (0 = none)
//	max_running_per_kind      MaxRunningPerKind as a JSON object, NULL = none
//	max_running_per_partition MaxRunningPerPartition (0 = none)
//	limits_at                 when the limits were last set, NULL = never
//	                          (InitQueueLimits stores only then)
//	workers_per_node          reserved for a per-node worker count set by
//	                          operators; NULL, read by nothing yet
//
// A claim of a queue whose record says limited locks that record (FOR
// UPDATE; SQLite's write transaction excludes every other writer already),
// so the limited claims of one queue run one at a time, counts the queue's
// running jobs per kind and partition key (through the lease index, which
// holds running jobs only), and takes due jobs in claim order within the room left
// (ClaimLimited). It commits before it lets the record go, so the next
// claim counts what it claimed.

// limitCols are the queue record's limit columns, in the order
// scanLimits reads them.
const limitCols = "limited, max_running, max_running_per_kind, max_running_per_partition, limits_at"

// scanLimits reads one row of limitCols.
func scanLimits(rows Rows) (l core.QueueLimits, limited, set bool, err error) {
	var (
		lim         any
		maxRun, per int64
		kinds       []byte
		at          time.Time
	)
	if err := rows.Scan(&lim, &maxRun, bytesDest{&kinds}, &per, timeDest{&at}); err != nil {
		return l, false, false, err
	}
	l.MaxRunning, l.MaxRunningPerPartition = int(maxRun), int(per)
	if len(kinds) > 0 {
		if err := json.Unmarshal(kinds, &l.MaxRunningPerKind); err != nil {
			return l, false, false, fmt.Errorf("sqlq: queue limits: decode max_running_per_kind: %w", err)
		}
	}
	return l.Normalized(), truthy(lim), !at.IsZero(), nil
}

// truthy decodes a boolean column (bool, or an integer on SQLite and
// MySQL).
func truthy(v any) bool {
	switch b := v.(type) {
	case bool:
		return b
	case int64:
		return b != 0
	case []byte:
		return len(b) > 0 && b[0] != '0'
	case string:
		return b != "" && b != "0"
	}
	return false
}

// SetQueueLimits implements core.QueueLimiter.
func (s *Store) SetQueueLimits(ctx context.Context, queue string, limits core.QueueLimits, now time.Time) error {
	if err := limits.Validate(); err != nil {
		return err
	}
	return s.tx(ctx, func(c Conn) error { return s.writeLimits(ctx, c, queue, limits.Normalized(), now) })
}

// InitQueueLimits implements core.QueueLimiter: the record is created if
// needed and locked, and the limits are written only when limits_at is
// NULL.
func (s *Store) InitQueueLimits(ctx context.Context, queue string, limits core.QueueLimits, now time.Time) (core.QueueLimits, bool, error) {
	if err := limits.Validate(); err != nil {
		return core.QueueLimits{}, false, err
	}
	limits = limits.Normalized()
	var (
		out     core.QueueLimits
		created bool
	)
	err := s.tx(ctx, func(c Conn) error {
		if err := s.ensureQueue(ctx, c, queue, now); err != nil {
			return err
		}
		cur, _, set, found, err := s.readLimits(ctx, c, queue, true)
		if err != nil {
			return err
		}
		if found && set {
			out, created = cur, false
			return nil
		}
		out, created = limits, true
		return s.writeLimits(ctx, c, queue, limits, now)
	})
	return out, created, err
}

// QueueLimits implements core.QueueLimiter.
func (s *Store) QueueLimits(ctx context.Context, queue string) (core.QueueLimits, error) {
	var out core.QueueLimits
	err := s.retry(ctx, func() (err error) {
		out, _, _, _, err = s.readLimits(ctx, s.db, queue, false)
		return err
	})
	return out, err
}

// ensureQueue creates the record of queue (not paused, no limits) unless
// it exists, and locks it where the database has row locks.
func (s *Store) ensureQueue(ctx context.Context, c Conn, queue string, now time.Time) error {
	verb, suffix := s.d.InsertOrLock("name")
	b := newBuilder(s.d, 3)
	b.w(verb, " ", s.t.Queues, " (name, paused, updated_at) VALUES (", b.arg(queue), ", ", b.arg(false), ", ", b.arg(s.d.Time(now)), ")", suffix)
	_, err := c.Exec(ctx, b.String(), b.args...)
	return err
}

// writeLimits creates the record of queue if needed and writes limits to
// it, leaving its pause as it is.
func (s *Store) writeLimits(ctx context.Context, c Conn, queue string, l core.QueueLimits, now time.Time) error {
	if err := s.ensureQueue(ctx, c, queue, now); err != nil {
		return err
	}
	var kinds any
	if len(l.MaxRunningPerKind) > 0 {
		enc, err := json.Marshal(l.MaxRunningPerKind)
		if err != nil {
			return err
		}
		kinds = string(enc)
	}
	b := newBuilder(s.d, 7)
	b.w("UPDATE ", s.t.Queues, " SET limited = ", b.arg(!l.IsZero()),
		", max_running = ", b.arg(int64(l.MaxRunning)),
		", max_running_per_kind = ", b.argT(kinds, TypeText),
		", max_running_per_partition = ", b.arg(int64(l.MaxRunningPerPartition)),
		", limits_at = ", b.argT(s.d.Time(now), TypeTime),
		", updated_at = ", b.argT(s.d.Time(now), TypeTime),
		" WHERE name = ", b.arg(queue))
	_, err := c.Exec(ctx, b.String(), b.args...)
	return err
}

// readLimits reads the limits of queue (locking its record when lock and
// the database has row locks). found is false when there is no record.
func (s *Store) readLimits(ctx context.Context, c Conn, queue string, lock bool) (l core.QueueLimits, limited, set, found bool, err error) {
	b := newBuilder(s.d, 1)
	b.w("SELECT ", limitCols, " FROM ", s.t.Queues, " WHERE name = ", b.arg(queue))
	if lock {
		b.w(s.d.LockSuffix(false))
	}
	rows, err := c.Query(ctx, b.String(), b.args...)
	if err != nil {
		return l, false, false, false, err
	}
	defer rows.Close()
	if rows.Next() {
		found = true
		if l, limited, set, err = scanLimits(rows); err != nil {
			return l, false, false, false, err
		}
	}
	if err := rows.Err(); err != nil {
		return l, false, false, false, err
	}
	return l, limited, set, found, rows.Close()
}

// QueueLimited reports whether queue's record says it has limits and is
// not paused: what a claim asks, without locks, when the claim path of
// unlimited queues (whose statements skip limited queues) claimed nothing.
func (s *Store) QueueLimited(ctx context.Context, c Conn, queue string) (bool, error) {
	b := newBuilder(s.d, 2)
	b.w("SELECT 1 FROM ", s.t.Queues, " WHERE name = ", b.arg(queue), " AND limited = ", b.arg(true), " AND paused = ", b.arg(false))
	rows, err := c.Query(ctx, b.String(), b.args...)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	found := rows.Next()
	if err := rows.Err(); err != nil {
		return false, err
	}
	return found, rows.Close()
}

// LockClaimRoom starts the limited claim of queue on c, a write
// transaction: it locks the queue's record and, when the queue is not
// paused and has limits, returns its room: the limits less the queue's
// running jobs, counted per kind and partition key. It returns nil (and
// no error) when there is nothing to claim under limits: no record, a
// pause, or no limits any more.
func (s *Store) LockClaimRoom(ctx context.Context, c Conn, queue string) (*core.ClaimRoom, error) {
	b := newBuilder(s.d, 1)
	b.w("SELECT paused, ", limitCols, " FROM ", s.t.Queues, " WHERE name = ", b.arg(queue), s.d.LockSuffix(false))
	rows, err := c.Query(ctx, b.String(), b.args...)
	if err != nil {
		return nil, err
	}
	var (
		lim            core.QueueLimits
		limited, found bool
		paused         any
	)
	if rows.Next() {
		found = true
		var (
			lv          any
			maxRun, per int64
			kinds       []byte
			at          time.Time
		)
		if err := rows.Scan(&paused, &lv, &maxRun, bytesDest{&kinds}, &per, timeDest{&at}); err != nil {
			rows.Close()
			return nil, err
		}
		limited = truthy(lv)
		lim.MaxRunning, lim.MaxRunningPerPartition = int(maxRun), int(per)
		if len(kinds) > 0 {
			if err := json.Unmarshal(kinds, &lim.MaxRunningPerKind); err != nil {
				rows.Close()
				return nil, fmt.Errorf("sqlq: queue %q limits: decode max_running_per_kind: %w", queue, err)
			}
		}
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return nil, err
	}
	rows.Close()
	if !found || !limited || truthy(paused) || lim.IsZero() {
		return nil, nil
	}
	room := core.NewClaimRoom(lim)
	b = newBuilder(s.d, 1)
	// Read through the lease index: state = 'running' spelt literally so
	// the partial jobs_lease index matches (PostgreSQL, SQLite), and
	// lease_until IS NOT NULL, true of every running row (a claim sets
	// the lease, only outcomes that leave running clear it), for MySQL's
	// lease_idx. The running jobs are as many as the cluster's workers, so
	// reading all of them is cheap; an index of its own would cost every
	// claim and finish of every queue an index entry.
	b.w("SELECT kind, partition_key, COUNT(*) FROM ", s.t.Jobs, " WHERE queue = ", b.arg(queue),
		" AND state = 'running' AND lease_until IS NOT NULL GROUP BY kind, partition_key")
	rows, err = c.Query(ctx, b.String(), b.args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			kind string
			part sql.NullString
			n    int64
		)
		if err := rows.Scan(&kind, &part, &n); err != nil {
			return nil, err
		}
		room.AddRunning(kind, part.String, int(n))
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return room, rows.Close()
}

// LimitCandidate is a due job a limited claim may take: its id, kind and
// partition key ("" = none), and, when the store read it whole, the job.
type LimitCandidate struct {
	ID        int64
	Kind      string
	Partition string
	Job       *core.Job
}

// limitRounds bounds the candidate reads of one limited claim. Each round
// after the first runs only because candidates of groups that filled up
// were skipped, and it leaves those groups out.
const limitRounds = 8

// ClaimLimited takes up to limit jobs within room, in claim order. read
// returns up to n due candidates in claim order, leaving out the kinds
// and partition keys given (they are full); take claims the candidates
// given (all of them, unless some were taken by a writer outside the
// queue's lock, which it then skips) and returns them as they now are.
// Both run in the transaction that holds the queue's lock.
func ClaimLimited(limit int, room *core.ClaimRoom,
	read func(fullKinds, fullParts []string, n int) ([]LimitCandidate, error),
	take func([]LimitCandidate) ([]*core.Job, error),
) ([]*core.Job, error) {
	var out []*core.Job
	for round := 0; round < limitRounds; round++ {
		want := min(limit-len(out), room.Left())
		if want <= 0 {
			break
		}
		cands, err := read(room.FullKinds(), room.FullPartitions(), want)
		if err != nil {
			return nil, err
		}
		var pick []LimitCandidate
		skipped := false
		for _, c := range cands {
			if len(pick) == want {
				break
			}
			if room.Take(c.Kind, c.Partition) {
				pick = append(pick, c)
			} else {
				skipped = true
			}
		}
		if len(pick) > 0 {
			got, err := take(pick)
			if err != nil {
				return nil, err
			}
			out = append(out, got...)
		}
		if !skipped {
			break // every candidate fitted: the read reached the end, or limit is met
		}
	}
	SortClaimOrder(out)
	return out, nil
}

// LimitedHint reports whether this process last found queue limited: a
// claim then asks QueueLimited first instead of running the claim path of
// unlimited queues, which passes over a limited queue only after reading
// its due jobs (SQLite checks the queue's record for every due row it
// reads; a queue with a long backlog would pay for all of it).
func (s *Store) LimitedHint(queue string) bool {
	_, ok := s.limitedSeen.Load(queue)
	return ok
}

// SetLimitedHint records whether queue was found limited.
func (s *Store) SetLimitedHint(queue string, limited bool) {
	if limited {
		s.limitedSeen.Store(queue, struct{}{})
	} else {
		s.limitedSeen.Delete(queue)
	}
}

// ScanLimitCandidates reads the rows of a limited claim's candidate read
// (id, kind, partition_key; NULL = none) and closes them; err is the
// query's.
func ScanLimitCandidates(rows Rows, err error) ([]LimitCandidate, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []LimitCandidate
	for rows.Next() {
		var (
			lc   LimitCandidate
			part sql.NullString
		)
		if err := rows.Scan(&lc.ID, &lc.Kind, &part); err != nil {
			return nil, err
		}
		lc.Partition = part.String
		out = append(out, lc)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, rows.Close()
}
