package postgres

import (
	"testing"

	"github.com/backlogq/backlog/store/internal/upgradetest"
)

// TestMigrateUpgradeArchive runs upgradetest.RunArchive from the schema
// below version 16 (jobs_archive): jobs written before the upgrade read
// back unchanged and move into the new archive intact.
func TestMigrateUpgradeArchive(t *testing.T) {
	upgradetest.RunArchive(t, upgradeBackend(t), 16)
}
