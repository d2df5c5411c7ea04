package sqlq

import (
	"cmp"
	"slices"

	"github.com/backlogq/backlog/core/contract"
)

func sortStats(s []contract.QueueStats) {
	slices.SortFunc(s, func(a, b contract.QueueStats) int { return cmp.Compare(a.Queue, b.Queue) })
}
