package sqlq

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/backlogq/backlog/core/contract"
)

// RecordProgress implements contract.ProgressRecorder: one UPDATE by
// primary key, in a write transaction of its own, writes u's progress (JSON text) and checkpoint (NULL for
// the JSON null) on its job, fenced like Finish (still running, held by
// u.WorkerID at u.ClaimSeq), and bumps its version like every change of
// a job. No row changed means the fence failed: the error wraps
// contract.ErrLeaseLost. An update out of its bounds wraps
// contract.ErrInvalidArgument and reaches no database.
func (s *Store) RecordProgress(ctx context.Context, u contract.ProgressUpdate) error {
	if err := u.Validate(); err != nil {
		return fmt.Errorf("%s: %w", s.d.Name(), err)
	}
	b := newBuilder(s.d, 5)
	b.w("UPDATE ", s.t.Jobs, " SET version = version + 1")
	if u.Progress != nil {
		p := *u.Progress
		p.At = contract.UTC(p.At)
		raw, err := json.Marshal(&p)
		if err != nil {
			return fmt.Errorf("%s: job %d: encode progress: %w", s.d.Name(), u.JobID, err)
		}
		b.w(", progress = ", b.argT(string(raw), TypeJSON))
	}
	if u.Checkpoint != nil {
		var cp any
		if !contract.IsNullJSON(u.Checkpoint) {
			cp = string(u.Checkpoint)
		}
		b.w(", checkpoint = ", b.argT(cp, TypeJSON))
	}
	b.w(" WHERE id = ", b.argT(u.JobID, TypeInt), " AND state = 'running' AND worker_id = ", b.argT(u.WorkerID, TypeText),
		" AND claim_seq = ", b.argT(u.ClaimSeq, TypeInt))
	var n int64
	err := s.tx(ctx, func(c Conn) error {
		res, err := c.Exec(ctx, b.String(), b.args...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return fmt.Errorf("%s: record progress of job %d: %w", s.d.Name(), u.JobID, err)
	}
	if n == 0 {
		return fmt.Errorf("%s: record progress of job %d: %w", s.d.Name(), u.JobID, contract.ErrLeaseLost)
	}
	return nil
}
