package sqlq

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/core/storekit"
)

// Concurrency limits (contract.QueueLimiter) live in the queues table, in the
// record PauseQueue writes, as the columns
//
//	limited                   true when any limit is set: the claims'
//	                          one-column test of "take the limited path"
//	max_running               core.QueueLimits.MaxRunning (0 = none)
//	max_running_per_kind      MaxRunningPerKind as a JSON object, NULL = none
//	max_running_per_partition MaxRunningPerPartition (0 = none)
//	limits_at                 when the limits were last set, NULL = never
//	                          (InitQueueLimits stores only then)
//	workers_per_node          QueueLimits.WorkersPerNode, NULL = 0 (each
//	                          node's own MaxWorkers)
//	policy                    the rest of the claim policy (rate limits,
//	                          Fair, Aging) as JSON (policyJSON), NULL = none
//	fair_cursor               the partition key the last fair claim read
//	                          up to (NULL = from the first)
//
// and the rates table keeps one GCRA instant per rate-limited group
// (queue, grp, tat; see core.RateLimit), written by the limited claim
// under the queue's lock.
//
// A claim of a queue whose record says limited locks that record (FOR
// UPDATE; SQLite's write transaction excludes every other writer already),
// so the limited claims of one queue run one at a time, counts the queue's
// running jobs per kind and partition key (through the lease index, which
// holds running jobs only), and takes due jobs in claim order within the room left
// (storekit.ClaimLimited). It commits before it lets the record go, so the next
// claim counts what it claimed.

// limitCols are the queue record's limit columns, in the order
// scanLimits reads them.
const limitCols = "limited, max_running, max_running_per_kind, max_running_per_partition, limits_at, policy, workers_per_node"

// scanLimits reads one row of limitCols (after the extra destinations
// given, which come first in the row).
func scanLimits(rows Rows, extra ...any) (l contract.QueueLimits, limited, set bool, err error) {
	var (
		lim          any
		maxRun, per  int64
		kinds, polic []byte
		at           time.Time
		perNode      sql.NullInt64
	)
	if err := rows.Scan(append(extra, &lim, &maxRun, bytesDest{&kinds}, &per, timeDest{&at}, bytesDest{&polic}, &perNode)...); err != nil {
		return l, false, false, err
	}
	l.MaxRunning, l.MaxRunningPerPartition, l.WorkersPerNode = int(maxRun), int(per), int(perNode.Int64)
	if len(kinds) > 0 {
		if err := json.Unmarshal(kinds, &l.MaxRunningPerKind); err != nil {
			return l, false, false, fmt.Errorf("sqlq: queue limits: decode max_running_per_kind: %w", err)
		}
	}
	if len(polic) > 0 {
		var pj policyJSON
		if err := json.Unmarshal(polic, &pj); err != nil {
			return l, false, false, fmt.Errorf("sqlq: queue limits: decode policy: %w", err)
		}
		pj.apply(&l)
	}
	return l.Normalized(), truthy(lim), !at.IsZero(), nil
}

// policyJSON is the policy column: the claim policy besides the
// concurrency limits, durations in nanoseconds so they read back exactly.
type policyJSON struct {
	Rate             *rateJSON           `json:"rate,omitempty"`
	RatePerKind      map[string]rateJSON `json:"rate_per_kind,omitempty"`
	RatePerPartition *rateJSON           `json:"rate_per_partition,omitempty"`
	Fair             bool                `json:"fair,omitempty"`
	AgingEveryNS     int64               `json:"aging_every_ns,omitempty"`
	AgingMaxSteps    int                 `json:"aging_max_steps,omitempty"`
}

type rateJSON struct {
	Starts int   `json:"starts"`
	PerNS  int64 `json:"per_ns"`
}

func toRateJSON(r contract.RateLimit) *rateJSON {
	if r.IsZero() {
		return nil
	}
	return &rateJSON{Starts: r.Starts, PerNS: int64(r.Per)}
}

func (r *rateJSON) limit() contract.RateLimit {
	if r == nil {
		return contract.RateLimit{}
	}
	return contract.RateLimit{Starts: r.Starts, Per: time.Duration(r.PerNS)}
}

// newPolicyJSON returns the policy column of l, or nil when l has no
// policy besides concurrency limits.
func newPolicyJSON(l contract.QueueLimits) *policyJSON {
	pj := &policyJSON{Rate: toRateJSON(l.Rate), RatePerPartition: toRateJSON(l.RatePerPartition), Fair: l.Fair,
		AgingEveryNS: int64(l.Aging.Every), AgingMaxSteps: l.Aging.MaxSteps}
	for k, r := range l.RatePerKind {
		if rj := toRateJSON(r); rj != nil {
			if pj.RatePerKind == nil {
				pj.RatePerKind = map[string]rateJSON{}
			}
			pj.RatePerKind[k] = *rj
		}
	}
	if pj.Rate == nil && pj.RatePerPartition == nil && !pj.Fair && pj.AgingEveryNS == 0 && pj.RatePerKind == nil {
		return nil
	}
	return pj
}

// apply copies the policy into l.
func (pj policyJSON) apply(l *contract.QueueLimits) {
	l.Rate, l.RatePerPartition, l.Fair = pj.Rate.limit(), pj.RatePerPartition.limit(), pj.Fair
	l.Aging = contract.PriorityAging{Every: time.Duration(pj.AgingEveryNS), MaxSteps: pj.AgingMaxSteps}
	for k, r := range pj.RatePerKind {
		if l.RatePerKind == nil {
			l.RatePerKind = map[string]contract.RateLimit{}
		}
		l.RatePerKind[k] = r.limit()
	}
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

// SetQueueLimits implements contract.QueueLimiter.
func (s *Store) SetQueueLimits(ctx context.Context, queue string, limits contract.QueueLimits, now time.Time) error {
	if err := limits.Validate(); err != nil {
		return err
	}
	return s.tx(ctx, func(c Conn) error { return s.writeLimits(ctx, c, queue, limits.Normalized(), now) })
}

// InitQueueLimits implements contract.QueueLimiter: the record is created if
// needed and locked, and the limits are written only when limits_at is
// NULL.
func (s *Store) InitQueueLimits(ctx context.Context, queue string, limits contract.QueueLimits, now time.Time) (contract.QueueLimits, bool, error) {
	if err := limits.Validate(); err != nil {
		return contract.QueueLimits{}, false, err
	}
	limits = limits.Normalized()
	var (
		out     contract.QueueLimits
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

// QueueLimits implements contract.QueueLimiter.
func (s *Store) QueueLimits(ctx context.Context, queue string) (contract.QueueLimits, error) {
	var out contract.QueueLimits
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
func (s *Store) writeLimits(ctx context.Context, c Conn, queue string, l contract.QueueLimits, now time.Time) error {
	if err := s.ensureQueue(ctx, c, queue, now); err != nil {
		return err
	}
	var kinds, polic any
	if len(l.MaxRunningPerKind) > 0 {
		enc, err := json.Marshal(l.MaxRunningPerKind)
		if err != nil {
			return err
		}
		kinds = string(enc)
	}
	if pj := newPolicyJSON(l); pj != nil {
		enc, err := json.Marshal(pj)
		if err != nil {
			return err
		}
		polic = string(enc)
	}
	var perNode any
	if l.WorkersPerNode > 0 {
		perNode = int64(l.WorkersPerNode)
	}
	b := newBuilder(s.d, 9)
	b.w("UPDATE ", s.t.Queues, " SET limited = ", b.arg(!l.IsZero()),
		", workers_per_node = ", b.argT(perNode, TypeInt),
		", max_running = ", b.arg(int64(l.MaxRunning)),
		", max_running_per_kind = ", b.argT(kinds, TypeText),
		", max_running_per_partition = ", b.arg(int64(l.MaxRunningPerPartition)),
		", policy = ", b.argT(polic, TypeText),
		", limits_at = ", b.argT(s.d.Time(now), TypeTime),
		", updated_at = ", b.argT(s.d.Time(now), TypeTime),
		" WHERE name = ", b.arg(queue))
	_, err := c.Exec(ctx, b.String(), b.args...)
	return err
}

// readLimits reads the limits of queue (locking its record when lock and
// the database has row locks). found is false when there is no record.
func (s *Store) readLimits(ctx context.Context, c Conn, queue string, lock bool) (l contract.QueueLimits, limited, set, found bool, err error) {
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
// paused and has limits, returns its room at now: the limits less the
// queue's running jobs, counted per kind and partition key, with the
// rate-limited groups' instants and the fair cursor loaded. It returns
// nil (and no error) when there is nothing to claim under limits: no
// record, a pause, or no limits any more. The claim ends with
// SaveClaimRoom. It runs the statements of ClaimRoomQueries one at a
// time (the rates only for a queue with a rate limit); a store that can
// pipeline them sends them together and reads the answers with
// ScanRoomRecord and RoomRecord.Room.
func (s *Store) LockClaimRoom(ctx context.Context, c Conn, queue string, now time.Time) (*storekit.ClaimRoom, error) {
	qs := s.ClaimRoomQueries(queue, now)
	lock, err := c.Query(ctx, qs[0].SQL, qs[0].Args...)
	if err != nil {
		return nil, err
	}
	rec, err := ScanRoomRecord(queue, lock)
	if err != nil || rec == nil {
		return nil, err
	}
	running, err := c.Query(ctx, qs[1].SQL, qs[1].Args...)
	if err != nil {
		return nil, err
	}
	room, err := rec.Room(now, running, nil)
	if err != nil || !rec.HasRates() {
		return room, err
	}
	states, err := s.readRates(ctx, c, queue, now)
	if err != nil {
		return nil, err
	}
	for _, st := range states {
		room.LoadRate(st.Group, st.TAT)
	}
	return room, nil
}

// RoomQuery is one statement of ClaimRoomQueries with its arguments.
type RoomQuery struct {
	SQL  string
	Args []any
}

// ClaimRoomQueries returns the statements that start a limited claim of
// queue, in the order they must run: lock the queue's record, count its
// running jobs per kind and partition key, read its rate instants after
// now. Each must run after the one before has returned its rows (the
// count after the lock is held), in one transaction.
func (s *Store) ClaimRoomQueries(queue string, now time.Time) [3]RoomQuery {
	var qs [3]RoomQuery
	b := newBuilder(s.d, 1)
	b.w("SELECT paused, fair_cursor, ", limitCols, " FROM ", s.t.Queues, " WHERE name = ", b.arg(queue), s.d.LockSuffix(false))
	qs[0] = RoomQuery{b.String(), b.args}
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
	qs[1] = RoomQuery{b.String(), b.args}
	b = newBuilder(s.d, 2)
	b.w("SELECT grp, tat FROM ", s.t.Rates, " WHERE queue = ", b.arg(queue), " AND tat > ", b.argT(s.d.Time(now), TypeTime), " ORDER BY grp")
	qs[2] = RoomQuery{b.String(), b.args}
	return qs
}

// RoomRecord is what the lock of a queue's record read (the first of
// ClaimRoomQueries): ScanRoomRecord returns it, Room completes the room.
type RoomRecord struct {
	lim    contract.QueueLimits
	cursor string
}

// ScanRoomRecord reads and closes the rows of the record's lock; nil
// when the queue has nothing to claim under limits.
func ScanRoomRecord(queue string, rows Rows) (*RoomRecord, error) {
	defer rows.Close()
	var (
		rec            RoomRecord
		limited, found bool
		paused         any
		cursor         sql.NullString
		err            error
	)
	if rows.Next() {
		found = true
		if rec.lim, limited, _, err = scanLimits(rows, &paused, &cursor); err != nil {
			return nil, fmt.Errorf("sqlq: queue %q: %w", queue, err)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	if !found || !limited || truthy(paused) || rec.lim.IsZero() {
		return nil, nil
	}
	rec.cursor = cursor.String
	return &rec, nil
}

// Room builds the claim room from the record and the rows of the
// running count and then the rate instants (nil: none), reading them in
// that order and closing them.
func (rec *RoomRecord) Room(now time.Time, running, rates Rows) (*storekit.ClaimRoom, error) {
	room := storekit.NewClaimRoom(rec.lim, now)
	room.LoadFairCursor(rec.cursor)
	err := func() error {
		defer running.Close()
		for running.Next() {
			var (
				kind string
				part sql.NullString
				n    int64
			)
			if err := running.Scan(&kind, &part, &n); err != nil {
				return err
			}
			room.AddRunning(kind, part.String, int(n))
		}
		if err := running.Err(); err != nil {
			return err
		}
		return running.Close()
	}()
	if err != nil {
		if rates != nil {
			rates.Close()
		}
		return nil, err
	}
	if rates != nil {
		states, err := ScanRates(rates)
		if err != nil {
			return nil, err
		}
		for _, st := range states {
			room.LoadRate(st.Group, st.TAT)
		}
	}
	return room, nil
}

// HasRates reports whether the record's queue has a rate limit (its
// instants are needed).
func (rec *RoomRecord) HasRates() bool {
	l := rec.lim
	return !l.Rate.IsZero() || !l.RatePerPartition.IsZero() || len(l.RatePerKind) > 0
}

// FairPartitions returns up to n partition keys of queue, in order,
// after the one given ("" = from the first), that have pending jobs: a
// skip scan of the fair index, one index seek per key (col is the
// column the index holds them in, pending the predicate that makes it
// hold only pending jobs). It backs LimitedReads.Partitions. (One
// recursive statement doing the same seeks was slower on every server:
// PostgreSQL and MariaDB planned its correlated step as a scan.)
func (s *Store) FairPartitions(ctx context.Context, c Conn, queue, col, pending, after string, n int) ([]string, error) {
	var out []string
	for len(out) < n {
		q, args := s.FairPartitionQuery(queue, col, pending, after)
		rows, err := c.Query(ctx, q, args...)
		if err != nil {
			return nil, err
		}
		var next sql.NullString
		if rows.Next() {
			if err := rows.Scan(&next); err != nil {
				rows.Close()
				return nil, err
			}
		}
		if err := rows.Err(); err != nil {
			rows.Close()
			return nil, err
		}
		rows.Close()
		if !next.Valid {
			break
		}
		out = append(out, next.String)
		after = next.String
	}
	return out, nil
}

// FairPartitionQuery returns FairPartitions' statement for the first
// partition key after the one given, and its arguments: one index seek
// of the fair index, whose order the ORDER BY asks for, so that no other
// index serves it without a sort. (Not ORDER BY queue, key: MariaDB 10.11
// then returns no row from an index on a virtual column.)
func (s *Store) FairPartitionQuery(queue, col, pending, after string) (string, []any) {
	b := newBuilder(s.d, 2)
	b.w("SELECT ", col, " FROM ", s.t.Jobs, " WHERE queue = ", b.arg(queue), " AND ", col, " > ", b.argT(after, TypeText))
	if pending != "" {
		b.w(" AND ", pending)
	}
	b.w(" ORDER BY ", col, " LIMIT 1")
	return b.String(), b.args
}

// readRates returns the stored instants of queue's rate groups after now.
func (s *Store) readRates(ctx context.Context, c Conn, queue string, now time.Time) ([]contract.RateState, error) {
	q := s.ClaimRoomQueries(queue, now)[2]
	rows, err := c.Query(ctx, q.SQL, q.Args...)
	if err != nil {
		return nil, err
	}
	return ScanRates(rows)
}

// scanRates reads and closes rows of (grp, tat).
func ScanRates(rows Rows) ([]contract.RateState, error) {
	defer rows.Close()
	var out []contract.RateState
	for rows.Next() {
		var st contract.RateState
		if err := rows.Scan(&st.Group, timeDest{&st.TAT}); err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, rows.Close()
}

// QueueRateStates implements contract.QueueLimiter.
func (s *Store) QueueRateStates(ctx context.Context, queue string, now time.Time) ([]contract.RateState, error) {
	var out []contract.RateState
	err := s.retry(ctx, func() (err error) {
		out, err = s.readRates(ctx, s.db, queue, now)
		return err
	})
	return out, err
}

// SaveClaimRoom ends a limited claim begun by LockClaimRoom, on the same
// transaction: it writes back the rate instants and the fair cursor the
// claim moved, and drops the queue's instants that are before now (a
// group without one starts with a full burst, which is what they mean).
func (s *Store) SaveClaimRoom(ctx context.Context, c Conn, queue string, room *storekit.ClaimRoom, now time.Time) error {
	if room == nil {
		return nil
	}
	ups := room.RateUpdates()
	if len(ups) > 0 {
		b := newBuilder(s.d, 2)
		b.w("DELETE FROM ", s.t.Rates, " WHERE queue = ", b.arg(queue), " AND tat <= ", b.argT(s.d.Time(now), TypeTime))
		if _, err := c.Exec(ctx, b.String(), b.args...); err != nil {
			return err
		}
	}
	// One upsert for every group the claim moved (at most the claim's
	// jobs plus two), in chunks within the dialect's parameter limit.
	for len(ups) > 0 {
		n := min(len(ups), s.d.MaxParams()/3)
		b := newBuilder(s.d, 3*n)
		b.w("INSERT INTO ", s.t.Rates, " (queue, grp, tat) VALUES ")
		for i, st := range ups[:n] {
			if i > 0 {
				b.w(", ")
			}
			b.w("(", b.arg(queue), ", ", b.arg(st.Group), ", ", b.argT(s.d.Time(st.TAT), TypeTime), ")")
		}
		if strings.HasPrefix(s.d.Name(), "mysql") || strings.HasPrefix(s.d.Name(), "mariadb") {
			b.w(" ON DUPLICATE KEY UPDATE tat = VALUES(tat)")
		} else {
			b.w(" ON CONFLICT (queue, grp) DO UPDATE SET tat = excluded.tat")
		}
		if _, err := c.Exec(ctx, b.String(), b.args...); err != nil {
			return err
		}
		ups = ups[n:]
	}
	if room.FairCursorMoved() {
		var cur any
		if p := room.FairCursor(); p != "" {
			cur = p
		}
		b := newBuilder(s.d, 2)
		b.w("UPDATE ", s.t.Queues, " SET fair_cursor = ", b.argT(cur, TypeText), " WHERE name = ", b.arg(queue))
		if _, err := c.Exec(ctx, b.String(), b.args...); err != nil {
			return err
		}
	}
	return nil
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
// (id, kind, partition_key (NULL = none), priority, run_at) and closes
// them; err is the query's.
func ScanLimitCandidates(rows Rows, err error) ([]storekit.LimitCandidate, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []storekit.LimitCandidate
	for rows.Next() {
		var (
			lc   storekit.LimitCandidate
			part sql.NullString
			prio int64
		)
		if err := rows.Scan(&lc.ID, &lc.Kind, &part, &prio, timeDest{&lc.RunAt}); err != nil {
			return nil, err
		}
		lc.Partition, lc.Priority = part.String, int(prio)
		out = append(out, lc)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, rows.Close()
}
