package upgradetest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/backlogq/backlog/core/contract"
)

// RunDependencyEdges migrates b's store to every migration numbered below
// version (the migration that forgets the dependency edges of jobs already
// gone), writes there with raw SQL a pending, a running and a completed
// job, an edge of the pending job (it waits for the completed one) and
// two edges of a job id no row holds any more, as earlier versions left
// them behind a pruned job; then it runs Migrate and checks that only the
// pending job's edge is left, that the jobs read back unchanged, and that
// Migrate is then a no-op. The dependency table is named as b.Jobs with
// "jobs" replaced by "job_deps" at its end.
func RunDependencyEdges(t *testing.T, b Backend, version int64) {
	deps := strings.TrimSuffix(b.Jobs, "jobs") + "job_deps"
	exec := func(q string) {
		t.Helper()
		if _, err := b.DB.ExecContext(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	const goneID = 1_000_000_000
	var pendingID int64
	upgradeBelowWith(t, b, version, func(pending, _, completed *contract.Job) {
		pendingID = pending.ID
		exec(fmt.Sprintf("INSERT INTO %s (dep_id, job_id, settled) VALUES (%d, %d, true), (%d, %d, true), (%d, %d, false)",
			deps, completed.ID, pending.ID, completed.ID, goneID, pending.ID, goneID))
	})
	var n, lo, hi int64
	if err := b.DB.QueryRowContext(context.Background(), "SELECT COUNT(*), MIN(job_id), MAX(job_id) FROM "+deps).Scan(&n, &lo, &hi); err != nil {
		t.Fatal(err)
	}
	if n != 1 || lo != pendingID || hi != pendingID {
		t.Fatalf("%d dependency edges after the upgrade, of jobs %d to %d; want only the edge of job %d (the edges of job %d, gone, forgotten)", n, lo, hi, pendingID, goneID)
	}
	migrateAgainIsNoop(t, b)
}
