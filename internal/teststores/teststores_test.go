package teststores

import (
	"testing"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

func TestEveryBackendOpensMigrated(t *testing.T) {
	Run(t, func(t *testing.T, st contract.Store) {
		now := time.Now().UTC().Truncate(time.Microsecond)
		res, err := st.Insert(t.Context(), now, []contract.InsertParams{{Queue: "q", Kind: "k", Args: []byte(`{}`), Priority: 5, MaxAttempts: 1, RunAt: now}})
		if err != nil || len(res) != 1 || res[0].Job.ID == 0 {
			t.Fatalf("insert into a fresh store: %v %v", res, err)
		}
	})
}
