package memory_test

import (
	"testing"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/memory"
	"github.com/backlogq/backlog/storetest"
)

// TestConformance runs the shared conformance suite against the memory
// store.
func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Factory{
		New: func(t testing.TB, _ contract.ClaimStrategy) contract.Store {
			s := memory.New()
			t.Cleanup(func() { s.Close() })
			return s
		},
	})
}
