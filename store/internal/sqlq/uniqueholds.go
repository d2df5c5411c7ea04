package sqlq

import (
	"context"
	"fmt"
	"time"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/core/storekit"
)

// UniqueHolds implements contract.UniqueHolder: it reads the holds table in
// scoped-key order after p.After, p.Limit+1 rows at a time (at most
// contract.UniqueHoldsScan in all), reads the holders' state and finished_at,
// and keeps the holds held at p.Now (HoldHeld). Each page is two
// statements: the holds by primary key, their jobs by id.
func (s *Store) UniqueHolds(ctx context.Context, p contract.UniqueHoldsParams) ([]contract.UniqueHold, string, error) {
	if err := storekit.CheckUniqueHoldsParams(&p); err != nil {
		return nil, "", err
	}
	var out []contract.UniqueHold
	after, scanned := p.After, 0
	for len(out) < p.Limit && scanned < contract.UniqueHoldsScan {
		n := min(p.Limit+1, contract.UniqueHoldsScan-scanned)
		var holds []holdRow
		var jobs map[int64]*contract.Job
		err := s.retry(ctx, func() (err error) {
			holds, jobs, err = s.readHolds(ctx, s.db, after, n)
			return err
		})
		if err != nil {
			return nil, "", err
		}
		for _, h := range holds {
			if len(out) == p.Limit {
				return out, after, nil
			}
			after = h.ukey
			scanned++
			j := jobs[h.jobID]
			if HoldHeld(j, h.uniqueFor, h.heldUntil, p.Now) {
				out = append(out, uniqueHold(h, j))
			}
		}
		if len(holds) < n {
			return out, "", nil
		}
	}
	return out, after, nil
}

// readHolds reads, on c, up to n holds with a scoped key after `after`, in
// key order, and the state and finished_at of their jobs that still exist.
func (s *Store) readHolds(ctx context.Context, c Conn, after string, n int) ([]holdRow, map[int64]*contract.Job, error) {
	b := newBuilder(s.d, 2)
	b.w("SELECT ", holdColumns, " FROM ", s.t.Holds, " WHERE ukey > ", b.argT(after, TypeText), " ORDER BY ukey LIMIT ", b.arg(n))
	holds, err := scanHolds(c.Query(ctx, b.String(), b.args...))
	if err != nil || len(holds) == 0 {
		return holds, nil, err
	}
	jobs, err := s.holders(ctx, c, holds, "")
	return holds, jobs, err
}

// holders reads, on c, the id, state and finished_at of the jobs of holds
// that still exist, by id; suffix ends the statement (a lock clause or "").
func (s *Store) holders(ctx context.Context, c Conn, holds []holdRow, suffix string) (map[int64]*contract.Job, error) {
	b := newBuilder(s.d, len(holds))
	b.w("SELECT id, state, finished_at FROM ", s.t.Jobs, " WHERE id IN (")
	for n, h := range holds {
		if n > 0 {
			b.w(",")
		}
		b.w(b.argT(h.jobID, TypeInt))
	}
	b.w(")", suffix)
	rows, err := c.Query(ctx, b.String(), b.args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	jobs := make(map[int64]*contract.Job, len(holds))
	for rows.Next() {
		j := &contract.Job{}
		var state string
		if err := rows.Scan(&j.ID, &state, TimeDest(&j.FinishedAt)); err != nil {
			return nil, err
		}
		j.State = contract.State(state)
		jobs[j.ID] = j
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return jobs, rows.Close()
}

// uniqueHold describes hold h whose holder is j (nil when its row is gone).
func uniqueHold(h holdRow, j *contract.Job) contract.UniqueHold {
	scope, _ := storekit.ScopeOfScopedKey(h.ukey)
	u := contract.UniqueHold{
		ScopedKey: h.ukey, Key: h.key, Scope: scope, Queue: h.queue, Kind: h.kind, JobID: h.jobID,
		UniqueFor: h.uniqueFor, Fingerprint: h.fingerprint, JobGone: j == nil,
		Until: storekit.UniqueHoldUntil(j, h.uniqueFor, h.heldUntil),
	}
	if j != nil {
		u.State = j.State
	}
	return u
}

// ReleaseUniqueHold implements contract.UniqueHolder. In one transaction it
// locks the hold on scopedKey, then its holder's row (the order Delete
// takes them in), and deletes the hold when it is held at now and its
// holder is final or gone.
func (s *Store) ReleaseUniqueHold(ctx context.Context, scopedKey string, now time.Time) (contract.UniqueHold, error) {
	now = contract.UTC(now)
	var u contract.UniqueHold
	err := s.tx(ctx, func(c Conn) error {
		b := newBuilder(s.d, 1)
		b.w("SELECT ", holdColumns, " FROM ", s.t.Holds, " WHERE ukey = ", b.argT(scopedKey, TypeText), s.d.LockSuffix(false))
		holds, err := scanHolds(c.Query(ctx, b.String(), b.args...))
		if err != nil {
			return err
		}
		if len(holds) == 0 {
			return fmt.Errorf("release unique hold %q: no hold is held: %w", scopedKey, contract.ErrNotFound)
		}
		h := holds[0]
		jobs, err := s.holders(ctx, c, holds, s.d.LockSuffix(false))
		if err != nil {
			return err
		}
		j := jobs[h.jobID]
		if h.jobID == 0 || !HoldHeld(j, h.uniqueFor, h.heldUntil, now) {
			return fmt.Errorf("release unique hold %q: no hold is held: %w", scopedKey, contract.ErrNotFound)
		}
		if j != nil && !j.State.Final() {
			return fmt.Errorf("release unique hold %q: job %d holding it is %s (cancel it first): %w", scopedKey, j.ID, j.State, contract.ErrInvalidState)
		}
		b = newBuilder(s.d, 2)
		b.w("DELETE FROM ", s.t.Holds, " WHERE ukey = ", b.argT(scopedKey, TypeText), " AND job_id = ", b.argT(h.jobID, TypeInt))
		if _, err := c.Exec(ctx, b.String(), b.args...); err != nil {
			return err
		}
		u = uniqueHold(h, j)
		return nil
	})
	if err != nil {
		return contract.UniqueHold{}, fmt.Errorf("%s: %w", s.d.Name(), err)
	}
	return u, nil
}
