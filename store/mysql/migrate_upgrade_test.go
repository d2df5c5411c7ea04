package mysql

import (
	"context"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/backlogq/backlog/store/internal/upgradetest"
	"github.com/backlogq/backlog/storetest/dbtest"
)

// TestMigrateUpgradeFromVersion1 runs upgradetest.Run on MySQL or MariaDB:
// jobs written into a version-1 schema with raw SQL must survive Migrate
// unchanged, read back with ClaimSeq 0 and be claimed and finished across
// the upgrade.
func TestMigrateUpgradeFromVersion1(t *testing.T) {
	upgradetest.Run(t, upgradeBackend(t))
}

// TestMigrateUpgradeFromVersion2 runs upgradetest.RunFromVersion2: the
// settings table arrives without touching the jobs, and core.Settings
// works after the upgrade.
func TestMigrateUpgradeFromVersion2(t *testing.T) {
	upgradetest.RunFromVersion2(t, upgradeBackend(t))
}

// upgradeBackend opens an unmigrated store on a database of its own.
func upgradeBackend(t *testing.T) upgradetest.Backend {
	s, err := Open(context.Background(), dbtest.MySQLDSN(t), WithPrefix("up_"), WithMigrate(false), WithMaxOpenConns(4))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	// Times as UTC DATETIME(6) text; no error history as NULL, as Insert
	// leaves it.
	return upgradetest.Prefixed(s, s.DB(), s.Prefix(), migrationFiles, goose.DialectMySQL,
		"SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = ? AND column_name = 'claim_seq'",
		dialect{}.Time, nil)
}
