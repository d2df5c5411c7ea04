package sqlq

import (
	"context"
	"fmt"
	"time"

	"github.com/backlogq/backlog/core"
)

// Prune deletes up to limit jobs in the final state state whose FinishedAt
// is before before, and returns how many. A non-final state is an error
// wrapping core.ErrInvalidState.
func (s *Store) Prune(ctx context.Context, state core.State, before time.Time, limit int) (int, error) {
	if !state.Final() {
		return 0, fmt.Errorf("prune: state %q is not final: %w", state, core.ErrInvalidState)
	}
	if limit <= 0 {
		return 0, nil
	}
	var n int64
	err := s.tx(ctx, func(c Conn) error {
		b := newBuilder(s.d, 3)
		where := "state = " + b.arg(string(state)) + " AND finished_at < " + b.arg(s.d.Time(before))
		q := s.d.DeleteLimit(s.t.Jobs, where, "finished_at, id", b.arg(limit))
		res, err := c.Exec(ctx, q, b.args...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}
