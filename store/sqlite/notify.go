package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

// DefaultNotifyInterval is how often Listen checks the database file for
// commits by other connections and processes.
const DefaultNotifyInterval = 20 * time.Millisecond

// cancelWindow is how far back Listen looks for cancellations on each
// change, to tolerate clocks of different processes that disagree a little.
const cancelWindow = 10 * time.Second

// Listen implements contract.Notifier for every connection and process sharing
// the database file. SQLite has no LISTEN/NOTIFY, so a dedicated connection
// polls PRAGMA data_version (a counter SQLite bumps when another connection
// commits; reading it costs microseconds and takes no lock) every
// WithNotifyInterval. Only after a change does it read what changed: jobs
// inserted since the last check (a primary-key range scan) give NotifyInsert
// per queue, and so do the queues of jobs their last dependency released
// since (<prefix>job_releases, one row per queue that the triggers of
// schema version 15 stamp with a sequence number: a trigger cannot reach
// this process's listeners, a committed row reaches every process's);
// the small queues table gives NotifyPause/NotifyResume, and jobs
// cancelled recently give NotifyCancel. Insert notifications may also come
// for jobs that are not yet due; they only cost a claim that finds nothing.
//
// The channel closes when ctx ends or the connection fails. Stores opened on
// ":memory:" or with WithNotifyInterval(0) return an error wrapping
// core.ErrUnsupported (a private in-memory database has no other writers).
func (s *Store) Listen(ctx context.Context) (<-chan contract.Notification, error) {
	if s.closed.Load() {
		return nil, contract.ErrClosed
	}
	if s.memory || s.notifyEvery <= 0 {
		return nil, fmt.Errorf("sqlite: notifications: %w", contract.ErrUnsupported)
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("sqlite: listen: %w", err)
	}
	w := &watcher{s: s, conn: conn, seenCancel: map[int64]int64{}}
	if err := w.init(ctx); err != nil {
		conn.Close()
		return nil, fmt.Errorf("sqlite: listen: %w", err)
	}
	ch := make(chan contract.Notification, 64)
	go w.run(ctx, ch)
	return ch, nil
}

// watcher is one Listen call's state.
type watcher struct {
	s          *Store
	conn       *sql.Conn
	version    int64
	maxID      int64
	releaseSeq int64 // the highest job_releases.seq seen
	paused     map[string]bool
	cancelFrom int64           // µs: look for cancellations finished after this
	seenCancel map[int64]int64 // job id → finished_at µs, within the window
}

func (w *watcher) init(ctx context.Context) error {
	if err := w.conn.QueryRowContext(ctx, "PRAGMA data_version").Scan(&w.version); err != nil {
		return err
	}
	t := w.s.prefix
	if err := w.conn.QueryRowContext(ctx, "SELECT COALESCE(MAX(id), 0) FROM "+t+"jobs").Scan(&w.maxID); err != nil {
		return err
	}
	if err := w.conn.QueryRowContext(ctx, "SELECT COALESCE(MAX(finished_at), 0) FROM "+t+"jobs WHERE state = 'cancelled' AND finished_at IS NOT NULL").Scan(&w.cancelFrom); err != nil {
		return err
	}
	if err := w.conn.QueryRowContext(ctx, "SELECT COALESCE(MAX(seq), 0) FROM "+t+"job_releases").Scan(&w.releaseSeq); err != nil {
		return err
	}
	var err error
	w.paused, err = w.queues(ctx)
	return err
}

func (w *watcher) run(ctx context.Context, ch chan<- contract.Notification) {
	defer close(ch)
	defer w.conn.Close()
	t := time.NewTicker(w.s.notifyEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if w.s.closed.Load() {
			return
		}
		var v int64
		if err := w.conn.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v); err != nil {
			return
		}
		if v == w.version {
			continue
		}
		w.version = v
		notes, err := w.changes(ctx)
		if err != nil {
			return
		}
		for _, n := range notes {
			select {
			case ch <- n:
			default: // a slow listener loses wake-ups, never blocks the watcher
			}
		}
	}
}

// changes reads what other connections committed since the last check.
func (w *watcher) changes(ctx context.Context) ([]contract.Notification, error) {
	t := w.s.prefix
	var notes []contract.Notification
	rows, err := w.conn.QueryContext(ctx, "SELECT queue, MAX(id) FROM "+t+"jobs WHERE id > ? GROUP BY queue", w.maxID)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var q string
		var id int64
		if err := rows.Scan(&q, &id); err != nil {
			rows.Close()
			return nil, err
		}
		w.maxID = max(w.maxID, id)
		notes = append(notes, contract.Notification{Kind: contract.NotifyInsert, Queue: q})
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows, err = w.conn.QueryContext(ctx, "SELECT queue, seq FROM "+t+"job_releases WHERE seq > ?", w.releaseSeq)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var q string
		var seq int64
		if err := rows.Scan(&q, &seq); err != nil {
			rows.Close()
			return nil, err
		}
		w.releaseSeq = max(w.releaseSeq, seq)
		if !slices.Contains(notes, contract.Notification{Kind: contract.NotifyInsert, Queue: q}) {
			notes = append(notes, contract.Notification{Kind: contract.NotifyInsert, Queue: q})
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}

	paused, err := w.queues(ctx)
	if err != nil {
		return nil, err
	}
	for q, p := range paused {
		if p != w.paused[q] {
			kind := contract.NotifyResume
			if p {
				kind = contract.NotifyPause
			}
			notes = append(notes, contract.Notification{Kind: kind, Queue: q})
		}
	}
	for q, p := range w.paused {
		if _, ok := paused[q]; !ok && p {
			notes = append(notes, contract.Notification{Kind: contract.NotifyResume, Queue: q})
		}
	}
	w.paused = paused

	from := w.cancelFrom - cancelWindow.Microseconds()
	rows, err = w.conn.QueryContext(ctx, "SELECT id, queue, finished_at FROM "+t+"jobs WHERE state = 'cancelled' AND finished_at > ?", from)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var id, fin int64
		var q string
		if err := rows.Scan(&id, &q, &fin); err != nil {
			rows.Close()
			return nil, err
		}
		w.cancelFrom = max(w.cancelFrom, fin)
		if _, seen := w.seenCancel[id]; seen {
			continue
		}
		w.seenCancel[id] = fin
		notes = append(notes, contract.Notification{Kind: contract.NotifyCancel, Queue: q, JobID: id})
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for id, fin := range w.seenCancel {
		if fin <= w.cancelFrom-2*cancelWindow.Microseconds() {
			delete(w.seenCancel, id)
		}
	}
	return notes, nil
}

func (w *watcher) queues(ctx context.Context) (map[string]bool, error) {
	rows, err := w.conn.QueryContext(ctx, "SELECT name, paused FROM "+w.s.prefix+"queues")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var name string
		var p bool
		if err := rows.Scan(&name, &p); err != nil {
			return nil, err
		}
		out[name] = p
	}
	return out, rows.Err()
}
