package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/internal/sqlq"
)

// extendLeasesSQL sets a new lease on the named executions: by primary key
// (%[1]s), each job still running under the worker at the claim_seq the
// lease names (%[2]s binds each id's).
//
// Arguments: lease_until, the ids (%[1]s), worker_id, (id, claim_seq) per
// lease (%[2]s).
const extendLeasesSQL = `
UPDATE {jobs}
SET lease_until = ?, version = version + 1
WHERE id IN (%[1]s) AND state = 'running' AND worker_id = ?
  AND claim_seq = CASE id %[2]s END`

// leaseChunk is the most leases one extendLeasesSQL extends.
const leaseChunk = 500

// ExtendLeases sets LeaseUntil=until on the named jobs still running under
// workerID at their claim_seq and returns how many it touched: one
// extendLeasesSQL per 500 leases, each in its own write transaction.
func (s *Store) ExtendLeases(ctx context.Context, workerID string, leases []contract.Lease, until time.Time) (int, error) {
	return sqlq.Chunks(leases, leaseChunk, func(part []contract.Lease) (int64, error) {
		q := fmt.Sprintf(s.sql.extendLeases, marks(len(part)), whens(len(part)))
		args := sqlq.LeaseArgs(dialect{}.Time(until), workerID, part)
		return inTx(ctx, s, func(c sqlq.Conn) (int64, error) {
			res, err := c.Exec(ctx, q, args...)
			if err != nil {
				return 0, err
			}
			return res.RowsAffected()
		})
	})
}
