package mysql

import (
	"testing"

	"github.com/backlogq/backlog/store/internal/upgradetest"
)

// TestMigrateUpgradeProgress runs upgradetest.RunProgress from the schema
// below version 13: jobs written before the upgrade read back unchanged
// with no progress and no checkpoint, a job running since before it
// records both, and the next claim clears the progress and returns the
// checkpoint.
func TestMigrateUpgradeProgress(t *testing.T) {
	upgradetest.RunProgress(t, upgradeBackend(t), 13)
}
