package sqlq

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/core/storekit"
)

// DuplicateKeyUpserter is implemented by dialects whose upsert is INSERT
// … ON DUPLICATE KEY UPDATE with VALUES(col) naming the row that was to
// be inserted (MySQL, MariaDB); other dialects get INSERT … ON CONFLICT
// (cols) DO UPDATE with excluded.col (SQLite, PostgreSQL).
type DuplicateKeyUpserter interface {
	DuplicateKeyUpdate() bool
}

// historyTables returns the contract.QueueHistory tables, which sit beside
// the holds table (the same prefix or schema): <…>queue_history and
// <…>queue_totals. ok is false when the Tables name no holds table of
// that form.
func (s *Store) historyTables() (history, totals string, ok bool) {
	base, found := strings.CutSuffix(s.t.Holds, "unique_keys")
	if !found {
		return "", "", false
	}
	return base + "queue_history", base + "queue_totals", true
}

var errNoHistoryTables = fmt.Errorf("sqlq: no queue history tables: %w", contract.ErrUnsupported)

// upsertDuplicateKey reports whether the dialect upserts with ON
// DUPLICATE KEY UPDATE.
func (s *Store) upsertDuplicateKey() bool {
	u, ok := s.d.(DuplicateKeyUpserter)
	return ok && u.DuplicateKeyUpdate()
}

// AddQueueHistory implements contract.QueueHistory: in one transaction, one
// additive upsert of the merged samples into the history table (counts
// added to the stored ones, the gauge replaced only by one of a later or
// equal gauge_at) and one into the totals, rows in (queue, minute)
// order so that concurrent writers lock them in one order.
func (s *Store) AddQueueHistory(ctx context.Context, samples []contract.QueueSample) error {
	if err := storekit.CheckQueueSamples(samples); err != nil {
		return err
	}
	hist, tot, ok := s.historyTables()
	if !ok {
		return errNoHistoryTables
	}
	merged := storekit.MergeQueueSamples(samples)
	if len(merged) == 0 {
		return nil
	}
	// Totals: one row per queue with counts.
	type total struct {
		queue             string
		completed, failed int64
	}
	var totals []total
	for _, x := range merged {
		if x.Completed == 0 && x.Failed == 0 {
			continue
		}
		if n := len(totals); n > 0 && totals[n-1].queue == x.Queue {
			totals[n-1].completed += x.Completed
			totals[n-1].failed += x.Failed
			continue
		}
		totals = append(totals, total{x.Queue, x.Completed, x.Failed})
	}
	dup := s.upsertDuplicateKey()
	const perRow = 7
	chunk := max(1, s.d.MaxParams()/perRow)
	return s.tx(ctx, func(c Conn) error {
		for rows := range slices.Chunk(merged, chunk) {
			b := newBuilder(s.d, len(rows)*perRow)
			b.w("INSERT INTO ", hist)
			if !dup {
				b.w(" AS h")
			}
			b.w(" (queue, minute, completed, failed, gauge_at, depth, oldest_age_ms) VALUES ")
			for i, x := range rows {
				if i > 0 {
					b.w(", ")
				}
				var gaugeAt time.Time
				if x.Gauge {
					gaugeAt = x.At
				}
				b.w("(", b.argT(x.Queue, TypeText), ", ", b.argT(s.d.Time(contract.HistoryMinute(x.At)), TypeTime), ", ",
					b.argT(x.Completed, TypeInt), ", ", b.argT(x.Failed, TypeInt), ", ", b.argT(s.d.Time(gaugeAt), TypeTime), ", ",
					b.argT(x.Depth, TypeInt), ", ", b.argT(x.OldestAge.Milliseconds(), TypeInt), ")")
			}
			if dup {
				// Assignments run left to right and see the columns
				// already assigned: gauge_at goes last.
				newer := "(VALUES(gauge_at) IS NOT NULL AND (gauge_at IS NULL OR VALUES(gauge_at) >= gauge_at))"
				b.w(" ON DUPLICATE KEY UPDATE completed = completed + VALUES(completed), failed = failed + VALUES(failed),",
					" depth = IF(", newer, ", VALUES(depth), depth),",
					" oldest_age_ms = IF(", newer, ", VALUES(oldest_age_ms), oldest_age_ms),",
					" gauge_at = IF(", newer, ", VALUES(gauge_at), gauge_at)")
			} else {
				newer := "excluded.gauge_at IS NOT NULL AND (h.gauge_at IS NULL OR excluded.gauge_at >= h.gauge_at)"
				b.w(" ON CONFLICT (queue, minute) DO UPDATE SET completed = h.completed + excluded.completed, failed = h.failed + excluded.failed,",
					" depth = CASE WHEN ", newer, " THEN excluded.depth ELSE h.depth END,",
					" oldest_age_ms = CASE WHEN ", newer, " THEN excluded.oldest_age_ms ELSE h.oldest_age_ms END,",
					" gauge_at = CASE WHEN ", newer, " THEN excluded.gauge_at ELSE h.gauge_at END")
			}
			if _, err := c.Exec(ctx, b.String(), b.args...); err != nil {
				return err
			}
		}
		for rows := range slices.Chunk(totals, chunk) {
			b := newBuilder(s.d, len(rows)*3)
			b.w("INSERT INTO ", tot)
			if !dup {
				b.w(" AS t")
			}
			b.w(" (queue, completed, failed) VALUES ")
			for i, x := range rows {
				if i > 0 {
					b.w(", ")
				}
				b.w("(", b.argT(x.queue, TypeText), ", ", b.argT(x.completed, TypeInt), ", ", b.argT(x.failed, TypeInt), ")")
			}
			if dup {
				b.w(" ON DUPLICATE KEY UPDATE completed = completed + VALUES(completed), failed = failed + VALUES(failed)")
			} else {
				b.w(" ON CONFLICT (queue) DO UPDATE SET completed = t.completed + excluded.completed, failed = t.failed + excluded.failed")
			}
			if _, err := c.Exec(ctx, b.String(), b.args...); err != nil {
				return err
			}
		}
		return nil
	})
}

// QueueHistory implements contract.QueueHistory: the rows of queue (every
// queue when "") from since's minute on, through the (queue, minute)
// unique index or the minute index.
func (s *Store) QueueHistory(ctx context.Context, queue string, since time.Time) ([]contract.QueueBucket, error) {
	hist, _, ok := s.historyTables()
	if !ok {
		return nil, errNoHistoryTables
	}
	var out []contract.QueueBucket
	err := s.retry(ctx, func() error {
		out = nil
		b := newBuilder(s.d, 2)
		b.w("SELECT queue, minute, completed, failed, gauge_at, depth, oldest_age_ms FROM ", hist, " WHERE ")
		if queue != "" {
			b.w("queue = ", b.arg(queue), " AND ")
		}
		b.w("minute >= ", b.arg(s.d.Time(contract.HistoryMinute(since))), " ORDER BY queue, minute")
		rows, err := s.db.Query(ctx, b.String(), b.args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				q  contract.QueueBucket
				ms int64
			)
			if err := rows.Scan(&q.Queue, timeDest{&q.Minute}, &q.Completed, &q.Failed, timeDest{&q.GaugeAt}, &q.Depth, &ms); err != nil {
				return err
			}
			q.Minute = q.Minute.UTC()
			if q.Gauge = !q.GaugeAt.IsZero(); q.Gauge {
				q.GaugeAt = q.GaugeAt.UTC()
				q.OldestAge = time.Duration(ms) * time.Millisecond
			} else {
				q.Depth = 0
			}
			out = append(out, q)
		}
		return rows.Err()
	})
	// Byte order of queue names, whatever the database's collation.
	slices.SortStableFunc(out, func(a, b contract.QueueBucket) int {
		return cmp.Or(cmp.Compare(a.Queue, b.Queue), a.Minute.Compare(b.Minute))
	})
	return out, err
}

// QueueTotals implements contract.QueueHistory.
func (s *Store) QueueTotals(ctx context.Context) ([]contract.QueueTotals, error) {
	_, tot, ok := s.historyTables()
	if !ok {
		return nil, errNoHistoryTables
	}
	var out []contract.QueueTotals
	err := s.retry(ctx, func() error {
		out = nil
		rows, err := s.db.Query(ctx, "SELECT queue, completed, failed FROM "+tot)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var t contract.QueueTotals
			if err := rows.Scan(&t.Queue, &t.Completed, &t.Failed); err != nil {
				return err
			}
			out = append(out, t)
		}
		return rows.Err()
	})
	slices.SortFunc(out, func(a, b contract.QueueTotals) int { return cmp.Compare(a.Queue, b.Queue) })
	return out, err
}

// DueJobs implements contract.QueueHistory with one grouped read of the
// pending jobs due at now (the states of the claim index).
func (s *Store) DueJobs(ctx context.Context, now time.Time) ([]contract.QueueDue, error) {
	var out []contract.QueueDue
	err := s.retry(ctx, func() error {
		out = nil
		b := newBuilder(s.d, 1)
		b.w("SELECT queue, COUNT(*), MIN(run_at) FROM ", s.t.Jobs, " WHERE ", s.pending(),
			" AND run_at <= ", b.arg(s.d.Time(now)), " GROUP BY queue")
		rows, err := s.db.Query(ctx, b.String(), b.args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var d contract.QueueDue
			if err := rows.Scan(&d.Queue, &d.Count, timeDest{&d.OldestRunAt}); err != nil {
				return err
			}
			d.OldestRunAt = d.OldestRunAt.UTC()
			out = append(out, d)
		}
		return rows.Err()
	})
	slices.SortFunc(out, func(a, b contract.QueueDue) int { return cmp.Compare(a.Queue, b.Queue) })
	return out, err
}

// PruneQueueHistory implements contract.QueueHistory: one bounded DELETE of
// the oldest rows before `before`, by id.
func (s *Store) PruneQueueHistory(ctx context.Context, before time.Time, limit int) (int, error) {
	if limit < 1 {
		return 0, errors.New("sqlq: PruneQueueHistory needs a limit of at least 1")
	}
	hist, _, ok := s.historyTables()
	if !ok {
		return 0, errNoHistoryTables
	}
	var n int
	err := s.tx(ctx, func(c Conn) error {
		b := newBuilder(s.d, 2)
		where := "minute < " + b.arg(s.d.Time(before))
		res, err := c.Exec(ctx, s.d.DeleteLimit(hist, where, "minute, id", b.arg(limit)), b.args...)
		if err != nil {
			return err
		}
		m, err := res.RowsAffected()
		n = int(m)
		return err
	})
	return n, err
}

var _ contract.QueueHistory = (*Store)(nil)
