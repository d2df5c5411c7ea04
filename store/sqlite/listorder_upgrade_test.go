package sqlite

import (
	"testing"

	"github.com/backlogq/backlog/store/internal/upgradetest"
)

// TestMigrateUpgradeListOrder runs upgradetest.RunListOrder from the
// schema below version 10 (jobs_run_at): jobs are kept and are listed
// in run_at order across pages after the upgrade.
func TestMigrateUpgradeListOrder(t *testing.T) {
	upgradetest.RunListOrder(t, upgradeBackend(t), 10)
}
