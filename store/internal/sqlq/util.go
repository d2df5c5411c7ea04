package sqlq

import (
	"cmp"
	"slices"

	"github.com/backlogq/backlog/core"
)

func sortStats(s []core.QueueStats) {
	slices.SortFunc(s, func(a, b core.QueueStats) int { return cmp.Compare(a.Queue, b.Queue) })
}

// SortClaimOrder sorts jobs by priority, run_at, id: claim order.
func SortClaimOrder(jobs []*core.Job) {
	slices.SortFunc(jobs, func(a, b *core.Job) int {
		if c := cmp.Compare(a.Priority, b.Priority); c != 0 {
			return c
		}
		if c := a.RunAt.Compare(b.RunAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
}
