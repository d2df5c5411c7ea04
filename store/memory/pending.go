package memory

import (
	"container/heap"
	"maps"
	"slices"
	"time"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/core/storekit"
)

// pendingIndex holds one queue's pending jobs (scheduled, available,
// retryable) in the order claims want them, so a claim costs O(limit·log n)
// instead of a scan of the backlog.
//
// Jobs are kept in one min-heap per priority, ordered by run_at then id.
// Within one priority the due jobs are exactly those at the front of that
// order, so a claim walks the priorities from 1 up and pops from each heap
// while its first job is due. A SQL store gets the same effect from an index
// on (queue, priority, run_at, id) restricted to the pending states.
type pendingIndex struct {
	byPriority map[int]*runAtHeap
	entries    map[int64]*heapEntry // job id → its heap entry, for removal
}

func newPendingIndex() *pendingIndex {
	return &pendingIndex{byPriority: make(map[int]*runAtHeap), entries: make(map[int64]*heapEntry)}
}

// add indexes j, which must be pending and not yet indexed.
func (x *pendingIndex) add(j *contract.Job) {
	h, ok := x.byPriority[j.Priority]
	if !ok {
		h = &runAtHeap{}
		x.byPriority[j.Priority] = h
	}
	e := &heapEntry{job: j}
	heap.Push(h, e)
	x.entries[j.ID] = e
}

// remove drops the job with the given id, if indexed.
func (x *pendingIndex) remove(id int64) {
	e, ok := x.entries[id]
	if !ok {
		return
	}
	heap.Remove(x.byPriority[e.job.Priority], e.index)
	delete(x.entries, id)
}

// popDue removes and returns up to limit jobs with run_at ≤ now for which
// take is true, in priority, run_at, id order. Due jobs take refuses stay.
func (x *pendingIndex) popDue(now time.Time, limit int, take func(*contract.Job) bool) []*contract.Job {
	var out []*contract.Job
	for _, p := range slices.Sorted(maps.Keys(x.byPriority)) {
		h := x.byPriority[p]
		var skipped []*heapEntry
		for len(out) < limit && h.Len() > 0 && !(*h)[0].job.RunAt.After(now) {
			e := heap.Pop(h).(*heapEntry)
			if !take(e.job) {
				skipped = append(skipped, e)
				continue
			}
			delete(x.entries, e.job.ID)
			out = append(out, e.job)
		}
		for _, e := range skipped {
			heap.Push(h, e)
		}
	}
	return out
}

// due returns up to n jobs with run_at ≤ now that match f and for which
// take is true, in priority, run_at, id order, and leaves them indexed
// (the reads of storekit.ClaimLimited).
func (x *pendingIndex) due(now time.Time, f storekit.CandidateFilter, n int, take func(*contract.Job) bool) []storekit.LimitCandidate {
	lo, hi := f.PriorityRange()
	var out []storekit.LimitCandidate
	for _, p := range slices.Sorted(maps.Keys(x.byPriority)) {
		if p < lo || p > hi {
			continue
		}
		h := x.byPriority[p]
		var popped []*heapEntry
		for len(out) < n && h.Len() > 0 && !(*h)[0].job.RunAt.After(now) {
			e := heap.Pop(h).(*heapEntry)
			popped = append(popped, e)
			j := e.job
			if !take(j) || (f.Partition != "" && j.PartitionKey != f.Partition) ||
				slices.Contains(f.FullKinds, j.Kind) || (j.PartitionKey != "" && slices.Contains(f.FullParts, j.PartitionKey)) {
				continue
			}
			out = append(out, storekit.LimitCandidate{
				ClaimCandidate: storekit.ClaimCandidate{ID: j.ID, Kind: j.Kind, Partition: j.PartitionKey, Priority: j.Priority, RunAt: j.RunAt},
				Job:            j,
			})
		}
		for _, e := range popped {
			heap.Push(h, e)
		}
	}
	return out
}

// partitions returns up to n partition keys after the one given ("" =
// from the first), in order, that pending jobs of the index carry.
func (x *pendingIndex) partitions(after string, n int) []string {
	seen := map[string]bool{}
	for _, e := range x.entries {
		if k := e.job.PartitionKey; k != "" && k > after {
			seen[k] = true
		}
	}
	keys := slices.Sorted(maps.Keys(seen))
	return keys[:min(n, len(keys))]
}

// heapEntry is one job in a runAtHeap, with its position for heap.Remove.
type heapEntry struct {
	job   *contract.Job
	index int
}

// runAtHeap is a container/heap of jobs of one priority ordered by run_at,
// then id.
type runAtHeap []*heapEntry

func (h runAtHeap) Len() int { return len(h) }

func (h runAtHeap) Less(i, j int) bool {
	a, b := h[i].job, h[j].job
	if !a.RunAt.Equal(b.RunAt) {
		return a.RunAt.Before(b.RunAt)
	}
	return a.ID < b.ID
}

func (h runAtHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}

func (h *runAtHeap) Push(x any) {
	e := x.(*heapEntry)
	e.index = len(*h)
	*h = append(*h, e)
}

func (h *runAtHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}
