package mysql

import (
	"testing"

	"github.com/backlogq/backlog/store/internal/upgradetest"
)

// TestMigrateUpgradeQueueHistory runs upgradetest.RunQueueHistory from
// the schema below version 10: jobs are kept, the queue history starts
// empty and works at once, and due jobs written before the upgrade are
// counted.
func TestMigrateUpgradeQueueHistory(t *testing.T) {
	upgradetest.RunQueueHistory(t, upgradeBackend(t), 10)
}
