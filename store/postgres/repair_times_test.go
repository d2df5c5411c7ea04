package postgres

import (
	"testing"

	"github.com/backlogq/backlog/store/internal/upgradetest"
)

// TestMigrateRepairsTimesOutOfRange runs upgradetest.RunTimeRepair: jobs
// stored with times outside core's range before it was enforced (this
// store keeps timestamptz, which holds year 10000) read back within it after Migrate, and encode as JSON.
func TestMigrateRepairsTimesOutOfRange(t *testing.T) {
	upgradetest.RunTimeRepair(t, upgradeBackend(t), false)
}
