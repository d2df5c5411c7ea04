package sqlq

import (
	"context"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
)

// Rescue hands up to limit running jobs whose lease ended before now,
// oldest lease first, to decide and applies the outcomes it returns. It
// returns the rescued jobs as they now are.
func (s *Store) Rescue(ctx context.Context, now time.Time, limit int, decide contract.RescueFunc) ([]*contract.Job, error) {
	now = contract.UTC(now)
	return s.handBack(ctx, now, limit, decide, func(b *builder) {
		b.w("SELECT id, version, lease_until FROM ", s.t.Jobs,
			" WHERE state = 'running' AND lease_until < ", b.arg(s.d.Time(now)), " ORDER BY lease_until, id LIMIT ", b.arg(limit), s.d.LockSuffix(true))
	}, func(b *builder) {
		b.w(s.t.Jobs, ".state = 'running' AND ", s.t.Jobs, ".lease_until < ", b.arg(s.d.Time(now)))
	})
}

// RescueWorkers hands up to limit running jobs held by workers whose
// record's heartbeat is before heartbeatBefore, in id order, to decide and
// applies the outcomes it returns.
func (s *Store) RescueWorkers(ctx context.Context, heartbeatBefore, now time.Time, limit int, decide contract.RescueFunc) ([]*contract.Job, error) {
	heartbeatBefore, now = contract.UTC(heartbeatBefore), contract.UTC(now)
	return s.handBack(ctx, now, limit, decide, func(b *builder) {
		b.w("SELECT j.id, j.version, w.heartbeat_at FROM ", s.t.Jobs, " j JOIN ", s.t.Workers,
			" w ON w.id = j.worker_id WHERE j.state = 'running' AND w.heartbeat_at < ", b.arg(s.d.Time(heartbeatBefore)),
			" ORDER BY j.id LIMIT ", b.arg(limit), s.d.LockSuffix(true))
	}, func(b *builder) {
		b.w(s.t.Jobs, ".state = 'running'")
	})
}

// handBack is the body of Rescue and RescueWorkers. sel writes a locking
// SELECT of (id, version, last seen) for the jobs to rescue; each job is
// read whole and given to decide with its last-seen time, and the outcome
// is applied under a version fence (nothing changed the row since it was
// read) plus the extra condition fence writes. Outcomes other than retry
// and discard are ignored. The dependants of the jobs discarded are
// settled at now (Config.Settle).
func (s *Store) handBack(ctx context.Context, now time.Time, limit int, decide contract.RescueFunc, sel func(*builder), fence func(*builder)) ([]*contract.Job, error) {
	if limit <= 0 {
		return nil, nil
	}
	var out []*contract.Job
	err := s.tx(ctx, func(c Conn) error {
		out = nil
		b := newBuilder(s.d, 2)
		sel(b)
		rows, err := c.Query(ctx, b.String(), b.args...)
		if err != nil {
			return err
		}
		var ids []int64
		version := map[int64]int64{}
		seen := map[int64]time.Time{}
		for rows.Next() {
			var id, v int64
			var at time.Time
			if err := rows.Scan(&id, &v, TimeDest(&at)); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, id)
			version[id], seen[id] = v, at
		}
		if err := rows.Err(); err != nil {
			rows.Close()
			return err
		}
		rows.Close()
		jobs, err := s.getManyOn(ctx, c, ids)
		if err != nil {
			return err
		}
		var chs []Change
		for _, j := range jobs {
			o := decide(j, seen[j.ID])
			if o.Kind != contract.OutcomeRetry && o.Kind != contract.OutcomeDiscard {
				continue
			}
			ch, err := OutcomeChange(&o)
			if err != nil {
				return err
			}
			ch.Version = version[j.ID]
			chs = append(chs, ch)
		}
		applied, err := s.applyChanges(ctx, c, chs, fence)
		if err != nil {
			return err
		}
		var ended []Ended
		for i := range chs {
			if applied[chs[i].ID] && chs[i].State.Final() {
				ended = append(ended, Ended{ID: chs[i].ID, State: chs[i].State})
			}
		}
		if err := s.settled(ctx, c, ended, now); err != nil {
			return err
		}
		var got []int64
		for _, id := range ids {
			if applied[id] {
				got = append(got, id)
			}
		}
		out, err = s.getManyOn(ctx, c, got)
		return err
	})
	return out, err
}

// DiscardExpired moves up to limit pending or waiting jobs whose deadline
// is before now to discarded (FinishedAt=now) with a "deadline passed" error entry and
// returns how many.
func (s *Store) DiscardExpired(ctx context.Context, now time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	now = contract.UTC(now)
	var n int
	err := s.tx(ctx, func(c Conn) error {
		b := newBuilder(s.d, 2)
		b.w("SELECT id, version, attempt, deadline FROM ", s.t.Jobs, " WHERE (", s.pending(), " OR state = 'waiting')",
			" AND deadline IS NOT NULL AND deadline < ", b.arg(s.d.Time(now)), " ORDER BY deadline, id LIMIT ", b.arg(limit), s.d.LockSuffix(true))
		rows, err := c.Query(ctx, b.String(), b.args...)
		if err != nil {
			return err
		}
		var chs []Change
		for rows.Next() {
			var id, version, attempt int64
			var deadline time.Time
			if err := rows.Scan(&id, &version, &attempt, TimeDest(&deadline)); err != nil {
				rows.Close()
				return err
			}
			e, err := EncodeError(contract.AttemptError{Attempt: int(attempt), At: now, Cause: core.CauseDeadline, DiscardReason: core.ReasonDeadline,
				Error: "deadline passed: the job was not finished by " + deadline.Format(time.RFC3339Nano)})
			if err != nil {
				rows.Close()
				return err
			}
			chs = append(chs, Change{ID: id, Version: version, NewAttempt: int(attempt), Err: e,
				State: contract.StateDiscarded, FinishedAt: now})
		}
		if err := rows.Err(); err != nil {
			rows.Close()
			return err
		}
		rows.Close()
		applied, err := s.applyChanges(ctx, c, chs, func(b *builder) {
			b.w(s.t.Jobs, ".state IN ('waiting',", pendingIn[1:])
		})
		if err != nil {
			return err
		}
		n = len(applied)
		var ended []Ended
		for i := range chs {
			if applied[chs[i].ID] {
				ended = append(ended, Ended{ID: chs[i].ID, State: contract.StateDiscarded})
			}
		}
		return s.settled(ctx, c, ended, now)
	})
	return n, err
}
