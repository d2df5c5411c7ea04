package sqlq

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

const workerCols = "id, host, pid, queues, tags, metadata, started_at, heartbeat_at"

// RegisterWorker inserts or updates (heartbeat) the record of w.ID.
func (s *Store) RegisterWorker(ctx context.Context, w contract.WorkerInfo) error {
	queues, err := json.Marshal(w.Queues)
	if err != nil {
		return err
	}
	tags, err := EncodeTags(w.Tags)
	if err != nil {
		return err
	}
	meta, err := EncodeMetadata(w.Metadata)
	if err != nil {
		return err
	}
	return s.tx(ctx, func(c Conn) error {
		verb, suffix := s.d.InsertIgnore()
		b := newBuilder(s.d, 8)
		b.w(verb, " ", s.t.Workers, " (", workerCols, ") VALUES (", b.arg(w.ID), ", ", b.arg(w.Host), ", ", b.arg(int64(w.PID)), ", ",
			b.argT(string(queues), TypeJSON), ", ", b.argT(tags, TypeJSON), ", ", b.argT(meta, TypeJSON), ", ",
			b.arg(s.d.Time(w.StartedAt)), ", ", b.arg(s.d.Time(w.HeartbeatAt)), ")", suffix)
		res, err := c.Exec(ctx, b.String(), b.args...)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n > 0 {
			return err
		}
		u := newBuilder(s.d, 8)
		u.w("UPDATE ", s.t.Workers, " SET host = ", u.arg(w.Host), ", pid = ", u.arg(int64(w.PID)), ", queues = ", u.argT(string(queues), TypeJSON),
			", tags = ", u.argT(tags, TypeJSON), ", metadata = ", u.argT(meta, TypeJSON), ", started_at = ", u.arg(s.d.Time(w.StartedAt)),
			", heartbeat_at = ", u.arg(s.d.Time(w.HeartbeatAt)), " WHERE id = ", u.arg(w.ID))
		_, err = c.Exec(ctx, u.String(), u.args...)
		return err
	})
}

// DeregisterWorker removes one worker record; a missing one is not an
// error.
func (s *Store) DeregisterWorker(ctx context.Context, id string) error {
	return s.tx(ctx, func(c Conn) error {
		b := newBuilder(s.d, 1)
		b.w("DELETE FROM ", s.t.Workers, " WHERE id = ", b.arg(id))
		_, err := c.Exec(ctx, b.String(), b.args...)
		return err
	})
}

// Workers lists the worker records ordered by id.
func (s *Store) Workers(ctx context.Context) ([]contract.WorkerInfo, error) {
	var out []contract.WorkerInfo
	err := s.retry(ctx, func() (err error) {
		out, err = scanWorkers(s.db.Query(ctx, "SELECT "+workerCols+" FROM "+s.t.Workers+" ORDER BY id"))
		return err
	})
	return out, err
}

// Worker returns the record of worker id (a primary-key lookup), or an
// error wrapping core.ErrNotFound.
func (s *Store) Worker(ctx context.Context, id string) (contract.WorkerInfo, error) {
	var out []contract.WorkerInfo
	err := s.retry(ctx, func() (err error) {
		b := newBuilder(s.d, 1)
		b.w("SELECT ", workerCols, " FROM ", s.t.Workers, " WHERE id = ", b.arg(id))
		out, err = scanWorkers(s.db.Query(ctx, b.String(), b.args...))
		return err
	})
	switch {
	case err != nil:
		return contract.WorkerInfo{}, err
	case len(out) == 0:
		return contract.WorkerInfo{}, fmt.Errorf("worker %q: %w", id, contract.ErrNotFound)
	}
	return out[0], nil
}

// scanWorkers reads rows of workerCols and closes them.
func scanWorkers(rows Rows, err error) ([]contract.WorkerInfo, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []contract.WorkerInfo
	for rows.Next() {
		var w contract.WorkerInfo
		var pid int64
		var queues, tags, meta []byte
		if err := rows.Scan(&w.ID, &w.Host, &pid, bytesDest{&queues}, bytesDest{&tags}, bytesDest{&meta},
			TimeDest(&w.StartedAt), TimeDest(&w.HeartbeatAt)); err != nil {
			return nil, err
		}
		w.PID = int(pid)
		for _, f := range []struct {
			b []byte
			v any
		}{{queues, &w.Queues}, {tags, &w.Tags}, {meta, &w.Metadata}} {
			if f.b != nil {
				if err := json.Unmarshal(f.b, f.v); err != nil {
					return nil, fmt.Errorf("sqlq: worker %s: %w", w.ID, err)
				}
			}
		}
		out = append(out, w)
	}
	return out, rows.Err()
}

// RemoveDeadWorkers deletes the records whose heartbeat is before before
// and returns how many.
func (s *Store) RemoveDeadWorkers(ctx context.Context, before time.Time) (int, error) {
	var n int64
	err := s.tx(ctx, func(c Conn) error {
		b := newBuilder(s.d, 1)
		b.w("DELETE FROM ", s.t.Workers, " WHERE heartbeat_at < ", b.arg(s.d.Time(before)))
		res, err := c.Exec(ctx, b.String(), b.args...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}
