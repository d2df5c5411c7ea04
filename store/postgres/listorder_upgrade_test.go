package postgres

import (
	"testing"

	"github.com/backlogq/backlog/store/internal/upgradetest"
)

// TestMigrateUpgradeListOrder runs upgradetest.RunListOrder from the
// schema below version 11 (jobs_run_at, built concurrently): jobs are kept and are listed in
// run_at order across pages after the upgrade.
func TestMigrateUpgradeListOrder(t *testing.T) {
	upgradetest.RunListOrder(t, upgradeBackend(t), 11)
}

// TestMigrateUpgradeRunAtIdle runs upgradetest.RunListOrder from the
// schema below version 14 (jobs_run_at_idle replaces jobs_run_at, built
// and dropped concurrently): the running job written before the upgrade,
// which the new index leaves out, is still listed in its run_at place.
func TestMigrateUpgradeRunAtIdle(t *testing.T) {
	upgradetest.RunListOrder(t, upgradeBackend(t), 14)
}
