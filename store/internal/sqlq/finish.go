package sqlq

import (
	"context"
	"time"

	"github.com/backlogq/backlog/core"
)

// ExtendLeases sets lease_until=until on the named jobs still running
// under workerID at their claim_seq, and returns how many rows it touched.
// Each is a primary-key lookup. Where the database has row locks, a job
// whose row is locked at that moment (its finish or cancellation in
// flight) is skipped: it needs no longer lease, and waiting for it could
// deadlock with the same worker's Finish, which locks its rows in another
// order.
func (s *Store) ExtendLeases(ctx context.Context, workerID string, leases []core.Lease, until time.Time) (int, error) {
	var n int64
	chunk := max(1, min(500, (s.d.MaxParams()-4)/4))
	for start := 0; start < len(leases); start += chunk {
		part := leases[start:min(len(leases), start+chunk)]
		var got int64
		err := s.tx(ctx, func(c Conn) error {
			got = 0
			// fenced writes the fence: named, running, held by workerID
			// at the named claim.
			fenced := func(b *builder) {
				b.w(" WHERE id IN (")
				for k, l := range part {
					if k > 0 {
						b.w(",")
					}
					b.w(b.argT(l.JobID, TypeInt))
				}
				b.w(") AND state = 'running' AND worker_id = ", b.arg(workerID), " AND claim_seq = CASE id")
				for _, l := range part {
					b.w(" WHEN ", b.argT(l.JobID, TypeInt), " THEN ", b.argT(l.ClaimSeq, TypeInt))
				}
				b.w(" END")
			}
			b := newBuilder(s.d, 2+3*len(part))
			b.w("UPDATE ", s.t.Jobs, " SET lease_until = ", b.arg(s.d.Time(until)), ", version = version + 1")
			if lock := s.d.LockSuffix(true); lock != "" {
				sel := newBuilder(s.d, 1+3*len(part))
				sel.w("SELECT id FROM ", s.t.Jobs)
				fenced(sel)
				sel.w(lock)
				ids, err := ScanIDs(c.Query(ctx, sel.String(), sel.args...))
				if err != nil || len(ids) == 0 {
					return err
				}
				b.w(" WHERE id IN (")
				for k, id := range ids {
					if k > 0 {
						b.w(",")
					}
					b.w(b.arg(id))
				}
				b.w(")")
			} else {
				fenced(b)
			}
			res, err := c.Exec(ctx, b.String(), b.args...)
			if err != nil {
				return err
			}
			got, err = res.RowsAffected()
			return err
		})
		if err != nil {
			return int(n), err
		}
		n += got
	}
	return int(n), nil
}
