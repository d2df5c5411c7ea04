package postgres

import (
	"slices"
	"testing"

	"github.com/backlogq/backlog/store/internal/upgradetest"
)

// TestMigrateUpgradeClaimNoSeqscan upgrades a schema below version 13
// holding jobs: they are kept and claimed, and both claim functions then
// plan with enable_seqscan = off (TestPlansCachedWhileSmall says why).
func TestMigrateUpgradeClaimNoSeqscan(t *testing.T) {
	b := upgradeBackend(t)
	s := b.Store.(*Store)
	upgradetest.RunFrom(t, b, 13, func(t *testing.T) {
		for _, fn := range []string{"claim_skip_locked", "claim_candidates"} {
			var config []string
			if err := s.pool.QueryRow(t.Context(), "SELECT proconfig FROM pg_proc WHERE proname = $1 AND pronamespace = $2::regnamespace", fn, s.Schema()).Scan(&config); err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(config, "enable_seqscan=off") {
				t.Errorf("%s plans with %v; want enable_seqscan=off among them", fn, config)
			}
		}
	})
}
