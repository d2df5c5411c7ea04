package sqlite

import (
	"strings"
	"testing"

	"github.com/backlogq/backlog/store/internal/upgradetest"
)

// TestMigrateUpgradePendingPredicate runs upgradetest.RunFrom from the
// schema below version 12: jobs written before the upgrade read back
// unchanged and the pending one is claimed, and the three partial indexes
// on pending jobs are rebuilt with their condition as an OR of equalities
// (no IN list left on the jobs table). The claim reads the rebuilt
// jobs_claim, so the job written before the upgrade is in it.
func TestMigrateUpgradePendingPredicate(t *testing.T) {
	b := upgradeBackend(t)
	upgradetest.RunFrom(t, b, 12, func(t *testing.T) {
		rows, err := b.DB.Query("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL", b.Jobs)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		rebuilt := 0
		for rows.Next() {
			var name, text string
			if err := rows.Scan(&name, &text); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(strings.ToUpper(text), " IN (") {
				t.Errorf("index %s still tests rows with an IN list: %s", name, text)
			}
			if strings.Contains(text, pendingSQL) {
				rebuilt++
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if rebuilt != 3 {
			t.Errorf("%d indexes spell pending states as %s; want 3 (claim, deadline, fair)", rebuilt, pendingSQL)
		}
	})
}
