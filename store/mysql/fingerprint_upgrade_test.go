package mysql

import (
	"testing"

	"github.com/backlogq/backlog/store/internal/upgradetest"
)

// TestMigrateUpgradeUniqueFingerprint runs
// upgradetest.RunUniqueFingerprint from the schema below version 12:
// holds taken before the upgrade stay held (with no fingerprint), and
// holds taken after it keep the fingerprint of their insert.
func TestMigrateUpgradeUniqueFingerprint(t *testing.T) {
	upgradetest.RunUniqueFingerprint(t, upgradeBackend(t), 12)
}
