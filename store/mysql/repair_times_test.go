package mysql

import (
	"testing"

	"github.com/backlogq/backlog/store/internal/upgradetest"
)

// TestMigrateRepairsTimesOutOfRange runs upgradetest.RunTimeRepair: jobs
// stored with times outside core's range before it was enforced (this
// store stored the zero date through INSERT IGNORE (DATETIME(6) ends at 9999)) read back within it after Migrate, and encode as JSON.
func TestMigrateRepairsTimesOutOfRange(t *testing.T) {
	upgradetest.RunTimeRepair(t, upgradeBackend(t), true)
}
