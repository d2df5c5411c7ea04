package storekit

import (
	"math"
	"slices"
	"strings"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

const (
	rateGroupPartPfx   = "partition:"
	rateInstantRounder = time.Microsecond
)

// ClaimCandidate is a due job a limited claim may take, as a store read
// it: enough for ClaimRoom.Pick to order and count it.
type ClaimCandidate struct {
	ID        int64
	Kind      string
	Partition string // "" = none
	Priority  int
	RunAt     time.Time
}

// LoadRate gives the room the stored instant of a rate-limited group;
// groups never loaded start with a full burst.
func (r *ClaimRoom) LoadRate(group string, tat time.Time) {
	r.tats[group] = contract.UTC(tat)
}

// RateUpdates returns the groups whose instant Take moved, for the store
// to write back (in the claim's transaction), sorted by group.
func (r *ClaimRoom) RateUpdates() []contract.RateState {
	out := make([]contract.RateState, 0, len(r.dirty))
	for g := range r.dirty {
		out = append(out, contract.RateState{Group: g, TAT: r.tats[g]})
	}
	slices.SortFunc(out, func(a, b contract.RateState) int { return strings.Compare(a.Group, b.Group) })
	return out
}

// rateLeft returns how many starts group may still make at r.now under
// rl.
func (r *ClaimRoom) rateLeft(group string, rl contract.RateLimit) int {
	if rl.IsZero() {
		return math.MaxInt
	}
	tat := r.tats[group]
	if tat.Before(r.now) {
		tat = r.now
	}
	room := r.now.Add(rl.Per).Sub(tat)
	if room <= 0 {
		return 0
	}
	return int(room / rl.Interval())
}

// rateTake uses one start of group under rl.
func (r *ClaimRoom) rateTake(group string, rl contract.RateLimit) {
	if rl.IsZero() {
		return
	}
	tat := r.tats[group]
	if tat.Before(r.now) {
		tat = r.now
	}
	tat = tat.Add(rl.Interval())
	if t := tat.Truncate(rateInstantRounder); !t.Equal(tat) {
		tat = t.Add(rateInstantRounder)
	}
	r.tats[group] = tat
	r.dirty[group] = true
}

// ratesFit reports whether a job of kind and partition may start now
// under every rate limit.
func (r *ClaimRoom) ratesFit(kind, partition string) bool {
	l := r.limits
	if r.rateLeft(contract.RateGroupQueue, l.Rate) == 0 {
		return false
	}
	if rl, ok := l.RatePerKind[kind]; ok && r.rateLeft(contract.RateGroupKind(kind), rl) == 0 {
		return false
	}
	if partition != "" && r.rateLeft(contract.RateGroupPartition(partition), l.RatePerPartition) == 0 {
		return false
	}
	return true
}

// ratesTake uses one start of every rate group a job of kind and
// partition belongs to.
func (r *ClaimRoom) ratesTake(kind, partition string) {
	l := r.limits
	r.rateTake(contract.RateGroupQueue, l.Rate)
	if rl, ok := l.RatePerKind[kind]; ok {
		r.rateTake(contract.RateGroupKind(kind), rl)
	}
	if partition != "" {
		r.rateTake(contract.RateGroupPartition(partition), l.RatePerPartition)
	}
}

// Fair reports whether the room's queue claims fairly across partition
// keys (QueueLimits.Fair).
func (r *ClaimRoom) Fair() bool { return r.limits.Fair }

// Aging returns the room's queue's priority aging.
func (r *ClaimRoom) Aging() contract.PriorityAging { return r.limits.Aging }

// FairCursor returns the partition key the queue's last fair claim read
// up to ("" = start from the first).
func (r *ClaimRoom) FairCursor() string { return r.cursor }

// SetFairCursor sets where the next fair claim starts reading partition
// keys (after p; "" = from the first), for the store to write back.
func (r *ClaimRoom) SetFairCursor(p string) {
	if p != r.cursor {
		r.cursor, r.cursorMoved = p, true
	}
}

// LoadFairCursor gives the room the stored cursor.
func (r *ClaimRoom) LoadFairCursor(p string) { r.cursor = p }

// FairCursorMoved reports whether SetFairCursor changed the cursor.
func (r *ClaimRoom) FairCursorMoved() bool { return r.cursorMoved }

// Pick orders cands by the queue's policy and takes (Take) up to want of
// them in that order, returning those taken and whether any was left out
// because a limit had no room for it.
//
// The order: by effective priority under Aging (then run_at, id); with
// Fair, partitions take turns (jobs without a partition key form one
// more), the partition with the fewest running jobs first, ties in the
// order of their first candidate; each partition's own jobs keep the
// order above. Stores pass candidates in the order they read them: for a
// fair claim, partition by partition from the cursor.
func (r *ClaimRoom) Pick(cands []ClaimCandidate, want int) (picked []ClaimCandidate, skipped bool) {
	order := slices.Clone(cands)
	aging := r.limits.Aging
	eff := func(c ClaimCandidate) int { return aging.Effective(c.Priority, c.RunAt, r.now) }
	cmp := func(a, b ClaimCandidate) int {
		if x, y := eff(a), eff(b); x != y {
			return x - y
		}
		if c := a.RunAt.Compare(b.RunAt); c != 0 {
			return c
		}
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	}
	if r.limits.Fair {
		order = r.fairOrder(order, cmp)
	} else {
		slices.SortStableFunc(order, cmp)
	}
	for _, c := range order {
		if len(picked) == want {
			break
		}
		if r.Take(c.Kind, c.Partition) {
			picked = append(picked, c)
		} else {
			skipped = true
		}
	}
	return picked, skipped
}

// fairOrder interleaves cands partition by partition (see Pick).
func (r *ClaimRoom) fairOrder(cands []ClaimCandidate, cmp func(a, b ClaimCandidate) int) []ClaimCandidate {
	var keys []string
	groups := map[string][]ClaimCandidate{}
	for _, c := range cands {
		if _, ok := groups[c.Partition]; !ok {
			keys = append(keys, c.Partition)
		}
		groups[c.Partition] = append(groups[c.Partition], c)
	}
	slices.SortStableFunc(keys, func(a, b string) int { return r.parts[a] - r.parts[b] })
	for _, k := range keys {
		slices.SortStableFunc(groups[k], cmp)
	}
	out := make([]ClaimCandidate, 0, len(cands))
	for i := 0; len(out) < len(cands); i++ {
		for _, k := range keys {
			if g := groups[k]; i < len(g) {
				out = append(out, g[i])
			}
		}
	}
	return out
}

// Ample reports whether any n due jobs of the queue fit the room at
// once, whatever their kinds and partition keys, and need no ordering
// beyond claim order (no Fair, no Aging): a store may then claim the
// first n due jobs in one statement and count them with Take, instead of
// reading candidates and picking.
func (r *ClaimRoom) Ample(n int) bool {
	l := r.limits
	if l.Fair || !l.Aging.IsZero() || n > r.Left() {
		return false
	}
	for k, max := range l.MaxRunningPerKind {
		if max-r.kinds[k] < n {
			return false
		}
	}
	if l.MaxRunningPerPartition > 0 {
		if l.MaxRunningPerPartition < n {
			return false
		}
		for _, c := range r.parts {
			if l.MaxRunningPerPartition-c < n {
				return false
			}
		}
	}
	for k, rl := range l.RatePerKind {
		if r.rateLeft(contract.RateGroupKind(k), rl) < n {
			return false
		}
	}
	if rl := l.RatePerPartition; !rl.IsZero() {
		if rl.Starts < n {
			return false
		}
		for g := range r.tats {
			if strings.HasPrefix(g, rateGroupPartPfx) && r.rateLeft(g, rl) < n {
				return false
			}
		}
	}
	return true
}
