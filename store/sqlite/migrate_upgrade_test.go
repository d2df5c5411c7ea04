package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/backlogq/backlog/store/internal/upgradetest"
)

// TestMigrateUpgradeFromVersion1 runs upgradetest.Run on a SQLite file:
// jobs written into a version-1 schema with raw SQL must survive Migrate
// unchanged, read back with ClaimSeq 0 and be claimed and finished across
// the upgrade.
func TestMigrateUpgradeFromVersion1(t *testing.T) {
	upgradetest.Run(t, upgradeBackend(t))
}

// TestMigrateUpgradeFromVersion2 runs upgradetest.RunFromVersion2: the
// settings table arrives without touching the jobs, and contract.Settings
// works after the upgrade.
func TestMigrateUpgradeFromVersion2(t *testing.T) {
	upgradetest.RunFromVersion2(t, upgradeBackend(t))
}

// TestMigrateUpgradeUniqueKeys runs upgradetest.RunUniqueKeys from schema
// version 4: the keys of live jobs stay held after the unique index gives
// way to the holds table.
func TestMigrateUpgradeUniqueKeys(t *testing.T) {
	upgradetest.RunUniqueKeys(t, upgradeBackend(t), 5)
}

// TestMigrateUpgradeQueueLimits runs upgradetest.RunQueueLimits from
// schema version 5: jobs and pauses are kept, partition keys and
// limits arrive empty, and limits set afterwards count the jobs running
// across the upgrade.
func TestMigrateUpgradeQueueLimits(t *testing.T) {
	upgradetest.RunQueueLimits(t, upgradeBackend(t), 6)
}

// TestMigrateUpgradeClaimPolicy runs upgradetest.RunClaimPolicy from
// schema version 7: jobs and pauses are kept, no queue has a policy,
// and rate limits and fair claims work on the upgraded schema.
func TestMigrateUpgradeClaimPolicy(t *testing.T) {
	upgradetest.RunClaimPolicy(t, upgradeBackend(t), 8)
}

// upgradeBackend opens an unmigrated store on a file of its own.
func upgradeBackend(t *testing.T) upgradetest.Backend {
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "upgrade.db"), WithPrefix("up_"), WithMigrate(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	// Times as unix microseconds; no error history as the empty array.
	return upgradetest.Prefixed(s, s.DB(), s.Prefix(), migrationFiles, goose.DialectSQLite3,
		"SELECT COUNT(*) FROM pragma_table_info(?) WHERE name = 'claim_seq'",
		dialect{}.Time, "[]")
}
