package core

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// This file holds the claim policies a queue's record may carry besides
// its concurrency limits (QueueLimits): rate limits, priority aging and
// the fair claim across partition keys, and the parts of ClaimRoom that
// apply them. Stores that implement QueueLimiter take the same limited
// claim path for all of them; see QueueLimiter.

// MaxRatePer is the longest period a RateLimit may have.
const MaxRatePer = 366 * 24 * time.Hour

// RateLimit bounds how many jobs may start (be claimed) per period: at
// most Starts in any window of length Per, with bursts of up to Starts
// when the group was idle. Zero (Starts 0) means no rate limit.
//
// It is enforced with the generic cell rate algorithm (GCRA, from ATM
// traffic shaping; the form rate limiters such as redis-cell use): each
// limited group keeps one instant in the store, its theoretical arrival
// time (TAT). A start at now is allowed when max(TAT, now) + Per/Starts
// − now ≤ Per, and moves TAT to max(TAT, now) + Per/Starts. Instants are
// kept to the microsecond, rounded up, so a rate is never exceeded by
// rounding.
//
// In JSON it is {"starts": 10, "per_seconds": 60}; per_seconds may have
// a fraction (0.5 = 500 ms).
type RateLimit struct {
	Starts int           // jobs that may start per Per; 0 = no limit
	Per    time.Duration // the period, 1 ms … MaxRatePer
}

// IsZero reports whether r sets no rate.
func (r RateLimit) IsZero() bool { return r.Starts <= 0 }

// Validate returns an error wrapping ErrInvalidJob when Starts is
// negative, or positive with Per outside 1 ms … MaxRatePer, or more
// starts than Per has nanoseconds.
func (r RateLimit) Validate() error {
	if r.Starts < 0 || r.Per < 0 {
		return invalid("rate limit %d per %s must not be negative", r.Starts, r.Per)
	}
	if r.Starts == 0 {
		if r.Per != 0 {
			return invalid("rate limit per %s needs a number of starts", r.Per)
		}
		return nil
	}
	if r.Per < time.Millisecond || r.Per > MaxRatePer {
		return invalid("rate limit period %s must be 1ms … %s", r.Per, MaxRatePer)
	}
	if time.Duration(r.Starts) > r.Per {
		return invalid("rate limit %d per %s: more than one start per nanosecond", r.Starts, r.Per)
	}
	return nil
}

// interval is the GCRA emission interval: the time one start uses up.
func (r RateLimit) interval() time.Duration { return r.Per / time.Duration(r.Starts) }

// String formats r as "10/1m0s", or "" when zero.
func (r RateLimit) String() string {
	if r.IsZero() {
		return ""
	}
	return fmt.Sprintf("%d/%s", r.Starts, r.Per)
}

type rateLimitJSON struct {
	Starts     int     `json:"starts"`
	PerSeconds float64 `json:"per_seconds"`
}

// MarshalJSON encodes r as {"starts": n, "per_seconds": s}.
func (r RateLimit) MarshalJSON() ([]byte, error) {
	return json.Marshal(rateLimitJSON{Starts: r.Starts, PerSeconds: r.Per.Seconds()})
}

// UnmarshalJSON decodes {"starts": n, "per_seconds": s}; a period that
// does not fit a time.Duration is an error (Validate then bounds it).
func (r *RateLimit) UnmarshalJSON(b []byte) error {
	var v rateLimitJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	per, err := jsonSeconds("rate limit per_seconds", v.PerSeconds)
	if err != nil {
		return err
	}
	*r = RateLimit{Starts: v.Starts, Per: per}
	return nil
}

// jsonSeconds turns a JSON number of seconds into a duration, rounded to
// the nanosecond; NaN or a value beyond twice MaxRatePer is an error
// wrapping ErrInvalidJob naming field (Validate bounds the rest).
func jsonSeconds(field string, v float64) (time.Duration, error) {
	if math.IsNaN(v) || math.Abs(v) > MaxRatePer.Seconds()*2 {
		return 0, invalid("%s %v is out of range", field, v)
	}
	return time.Duration(math.Round(v * float64(time.Second))), nil
}

// PriorityAging raises the effective priority of a queue's waiting jobs
// by one step (toward PriorityHighest) for every Every they have been
// due, at most MaxSteps steps (0 = as far as PriorityHighest), so a
// low-priority job under a constant stream of higher-priority work still
// runs. The priority the job was given is kept and shown; only the claim
// order uses the effective one: (effective priority, run_at, id). Aging
// rewrites no rows: a claim reads each priority level's oldest due jobs
// and merges them.
//
// In JSON it is {"every_seconds": 60, "max_steps": 3}.
type PriorityAging struct {
	Every    time.Duration // one step per Every due; 0 = no aging; ≥ 1 s
	MaxSteps int           // 0 … PriorityLowest−PriorityHighest; 0 = unbounded
}

// IsZero reports whether a sets no aging.
func (a PriorityAging) IsZero() bool { return a.Every <= 0 }

// Validate returns an error wrapping ErrInvalidJob when Every is
// negative or under a second (but not 0), or MaxSteps is out of range.
func (a PriorityAging) Validate() error {
	if a.Every < 0 || (a.Every > 0 && a.Every < time.Second) || a.Every > MaxRatePer {
		return invalid("priority aging every %s must be 0 (off) or 1s … %s", a.Every, MaxRatePer)
	}
	if a.MaxSteps < 0 || a.MaxSteps > PriorityLowest-PriorityHighest {
		return invalid("priority aging max steps %d must be 0 … %d", a.MaxSteps, PriorityLowest-PriorityHighest)
	}
	return nil
}

// Effective returns the priority a job of priority that was due at runAt
// has at now under a: priority less one step per Every since runAt,
// bounded by MaxSteps and PriorityHighest.
func (a PriorityAging) Effective(priority int, runAt, now time.Time) int {
	if a.IsZero() || !now.After(runAt) {
		return priority
	}
	steps := int64(now.Sub(runAt) / a.Every)
	if a.MaxSteps > 0 && steps > int64(a.MaxSteps) {
		steps = int64(a.MaxSteps)
	}
	if steps >= int64(priority-PriorityHighest) {
		return PriorityHighest
	}
	return priority - int(steps)
}

type agingJSON struct {
	EverySeconds float64 `json:"every_seconds"`
	MaxSteps     int     `json:"max_steps,omitempty"`
}

// MarshalJSON encodes a as {"every_seconds": s, "max_steps": n}.
func (a PriorityAging) MarshalJSON() ([]byte, error) {
	return json.Marshal(agingJSON{EverySeconds: a.Every.Seconds(), MaxSteps: a.MaxSteps})
}

// UnmarshalJSON decodes {"every_seconds": s, "max_steps": n}.
func (a *PriorityAging) UnmarshalJSON(b []byte) error {
	var v agingJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	every, err := jsonSeconds("priority aging every_seconds", v.EverySeconds)
	if err != nil {
		return err
	}
	*a = PriorityAging{Every: every, MaxSteps: v.MaxSteps}
	return nil
}

// FairPartitions is how many partition keys a fair claim reads at most:
// it takes due jobs from up to this many partitions, in turn after the
// last one the queue served, so with more partitions than this the turn
// goes round over several claims.
const FairPartitions = 32

// Rate-limited groups, as stores key their GCRA instants: the queue as a
// whole, one kind, one partition key.
const (
	RateGroupQueue     = "queue"
	rateGroupKindPfx   = "kind:"
	rateGroupPartPfx   = "partition:"
	rateInstantRounder = time.Microsecond
)

// RateGroupKind returns the rate group of kind.
func RateGroupKind(kind string) string { return rateGroupKindPfx + kind }

// RateGroupPartition returns the rate group of partition key p.
func RateGroupPartition(p string) string { return rateGroupPartPfx + p }

// RateState is one rate-limited group's GCRA instant (its theoretical
// arrival time, UTC, to the microsecond), as a store keeps it.
type RateState struct {
	Group string    `json:"group"` // RateGroupQueue, RateGroupKind(k) or RateGroupPartition(p)
	TAT   time.Time `json:"tat"`
}

// RateWait is a rate-limited group whose next start must wait: jobs of
// the group start again at NextStart (UTC).
type RateWait struct {
	Group     string    `json:"group"`
	NextStart time.Time `json:"next_start"`
}

// RateWaits returns, of the states given, the groups of l whose next
// start is after now, with when it is; sorted by group.
func (l QueueLimits) RateWaits(states []RateState, now time.Time) []RateWait {
	var out []RateWait
	for _, st := range states {
		rl, ok := l.rateOf(st.Group)
		if !ok {
			continue
		}
		next := st.TAT.Add(rl.interval() - rl.Per)
		if next.After(now) {
			out = append(out, RateWait{Group: st.Group, NextStart: UTC(next)})
		}
	}
	slices.SortFunc(out, func(a, b RateWait) int {
		if a.Group < b.Group {
			return -1
		}
		if a.Group > b.Group {
			return 1
		}
		return 0
	})
	return out
}

// rateOf returns the rate limit of group under l.
func (l QueueLimits) rateOf(group string) (RateLimit, bool) {
	switch {
	case group == RateGroupQueue:
		return l.Rate, !l.Rate.IsZero()
	case len(group) > len(rateGroupKindPfx) && group[:len(rateGroupKindPfx)] == rateGroupKindPfx:
		r, ok := l.RatePerKind[group[len(rateGroupKindPfx):]]
		return r, ok && !r.IsZero()
	case len(group) > len(rateGroupPartPfx) && group[:len(rateGroupPartPfx)] == rateGroupPartPfx:
		return l.RatePerPartition, !l.RatePerPartition.IsZero()
	}
	return RateLimit{}, false
}

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
	r.tats[group] = UTC(tat)
}

// RateUpdates returns the groups whose instant Take moved, for the store
// to write back (in the claim's transaction), sorted by group.
func (r *ClaimRoom) RateUpdates() []RateState {
	out := make([]RateState, 0, len(r.dirty))
	for g := range r.dirty {
		out = append(out, RateState{Group: g, TAT: r.tats[g]})
	}
	slices.SortFunc(out, func(a, b RateState) int {
		if a.Group < b.Group {
			return -1
		}
		if a.Group > b.Group {
			return 1
		}
		return 0
	})
	return out
}

// rateLeft returns how many starts group may still make at r.now under
// rl.
func (r *ClaimRoom) rateLeft(group string, rl RateLimit) int {
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
	return int(room / rl.interval())
}

// rateTake uses one start of group under rl.
func (r *ClaimRoom) rateTake(group string, rl RateLimit) {
	if rl.IsZero() {
		return
	}
	tat := r.tats[group]
	if tat.Before(r.now) {
		tat = r.now
	}
	tat = tat.Add(rl.interval())
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
	if r.rateLeft(RateGroupQueue, l.Rate) == 0 {
		return false
	}
	if rl, ok := l.RatePerKind[kind]; ok && r.rateLeft(RateGroupKind(kind), rl) == 0 {
		return false
	}
	if partition != "" && r.rateLeft(RateGroupPartition(partition), l.RatePerPartition) == 0 {
		return false
	}
	return true
}

// ratesTake uses one start of every rate group a job of kind and
// partition belongs to.
func (r *ClaimRoom) ratesTake(kind, partition string) {
	l := r.limits
	r.rateTake(RateGroupQueue, l.Rate)
	if rl, ok := l.RatePerKind[kind]; ok {
		r.rateTake(RateGroupKind(kind), rl)
	}
	if partition != "" {
		r.rateTake(RateGroupPartition(partition), l.RatePerPartition)
	}
}

// Fair reports whether the room's queue claims fairly across partition
// keys (QueueLimits.Fair).
func (r *ClaimRoom) Fair() bool { return r.limits.Fair }

// Aging returns the room's queue's priority aging.
func (r *ClaimRoom) Aging() PriorityAging { return r.limits.Aging }

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

// ParseRateLimit parses a rate written "N/PERIOD": N starts per PERIOD,
// a Go duration ("100/1m", "5/1.5s") or a bare unit ("10/s", "600/m",
// "1000/h" mean one second, minute, hour). "" and "0" mean no rate. It
// returns an error wrapping ErrInvalidJob for anything else or a rate
// RateLimit.Validate refuses.
func ParseRateLimit(s string) (RateLimit, error) {
	if s == "" || s == "0" {
		return RateLimit{}, nil
	}
	n, per, ok := strings.Cut(s, "/")
	if !ok {
		return RateLimit{}, invalid("rate %q must be N/PERIOD, like 10/s or 100/1m", s)
	}
	starts, err := strconv.Atoi(strings.TrimSpace(n))
	if err != nil {
		return RateLimit{}, invalid("rate %q: %q is not a number of starts", s, n)
	}
	per = strings.TrimSpace(per)
	var d time.Duration
	switch per {
	case "s":
		d = time.Second
	case "m":
		d = time.Minute
	case "h":
		d = time.Hour
	default:
		if d, err = time.ParseDuration(per); err != nil {
			return RateLimit{}, invalid("rate %q: period %q is not a duration like 1s, 1m or 1h", s, per)
		}
	}
	r := RateLimit{Starts: starts, Per: d}
	if starts == 0 {
		r = RateLimit{}
	}
	if err := r.Validate(); err != nil {
		return RateLimit{}, err
	}
	return r, nil
}

// RateWaits returns the rate-limited groups of queue whose next start is
// in the future, with when it is (see QueueLimits.RateWaits): what an
// operator sees of jobs waiting for their rate. It returns nil when the
// queue has no rate limit, and an error wrapping ErrUnsupported when the
// store is not a QueueLimiter, or ErrInvalidJob for an invalid queue
// name.
func (c *Client) RateWaits(ctx context.Context, queue string) ([]RateWait, error) {
	if err := ValidateQueueName(queue); err != nil {
		return nil, err
	}
	ql, ok := c.store.(QueueLimiter)
	if !ok {
		return nil, fmt.Errorf("backlog: queue rate limits: %w", ErrUnsupported)
	}
	return QueueRateWaits(ctx, ql, queue, c.clock.Now())
}

// QueueRateWaits reads queue's limits and, when it has a rate limit, its
// rate instants from ql, and returns the groups whose next start is after
// now (QueueLimits.RateWaits): nil for a queue without rate limits, a
// non-nil empty slice for one whose groups all may start. It is what
// Client.RateWaits and the metrics read.
func QueueRateWaits(ctx context.Context, ql QueueLimiter, queue string, now time.Time) ([]RateWait, error) {
	l, err := ql.QueueLimits(ctx, queue)
	if err != nil {
		return nil, err
	}
	if !l.hasRates() {
		return nil, nil
	}
	states, err := ql.QueueRateStates(ctx, queue, now)
	if err != nil {
		return nil, err
	}
	if w := l.RateWaits(states, now); w != nil {
		return w, nil
	}
	return []RateWait{}, nil
}

// hasRates reports whether l sets any rate limit.
func (l QueueLimits) hasRates() bool {
	return !l.Rate.IsZero() || !l.RatePerPartition.IsZero() || len(l.RatePerKind) > 0
}

// WorkersMetadataPrefix prefixes the keys of the metadata a node
// registers (WorkerInfo.Metadata) that say how many jobs of each queue it
// runs at once: "backlog.workers.<queue>" → a decimal count, its
// configured MaxWorkers or QueueLimits.WorkersPerNode when set, as of the
// node's last heartbeat.
const WorkersMetadataPrefix = "backlog.workers."

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
		if r.rateLeft(RateGroupKind(k), rl) < n {
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
