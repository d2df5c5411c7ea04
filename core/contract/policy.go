package contract

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

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

// Interval is the GCRA emission interval: the time one start uses up (Per / Starts).
func (r RateLimit) Interval() time.Duration { return r.Per / time.Duration(r.Starts) }

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

const (
	RateGroupQueue   = "queue"
	rateGroupKindPfx = "kind:"
	rateGroupPartPfx = "partition:"
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
		next := st.TAT.Add(rl.Interval() - rl.Per)
		if next.After(now) {
			out = append(out, RateWait{Group: st.Group, NextStart: UTC(next)})
		}
	}
	slices.SortFunc(out, func(a, b RateWait) int { return strings.Compare(a.Group, b.Group) })
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

// HasRates reports whether l sets any rate limit.
func (l QueueLimits) HasRates() bool {
	return !l.Rate.IsZero() || !l.RatePerPartition.IsZero() || len(l.RatePerKind) > 0
}
