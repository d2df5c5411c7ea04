package storekit

import (
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/backlogq/backlog/core/contract"
)

// CheckSetting returns an error (naming the bound) when key or value is
// out of the bounds of the Settings capability, and nil otherwise. Stores
// call it before touching the database.
func CheckSetting(key string, value []byte) error {
	switch {
	case key == "" || len(key) > contract.MaxSettingKeyBytes || !utf8.ValidString(key):
		return fmt.Errorf("backlog: setting key must be 1..%d bytes of UTF-8", contract.MaxSettingKeyBytes)
	case len(value) > contract.MaxSettingValueBytes:
		return fmt.Errorf("backlog: setting %q: value is %d bytes, over the limit of %d", key, len(value), contract.MaxSettingValueBytes)
	}
	return nil
}

// CheckQueueSamples returns an error wrapping ErrInvalidJob, naming the
// sample, when one has an invalid queue name (ValidateQueueName), a zero
// At, negative counts, or a negative gauge. Stores call it before
// touching the database.
func CheckQueueSamples(samples []contract.QueueSample) error {
	for i, s := range samples {
		if err := contract.ValidateQueueName(s.Queue); err != nil {
			return fmt.Errorf("queue sample %d: %w", i, err)
		}
		switch {
		case s.At.IsZero():
			return invalid("queue sample %d (%s): At is zero", i, s.Queue)
		case s.Completed < 0 || s.Failed < 0:
			return invalid("queue sample %d (%s): counts must not be negative (completed %d, failed %d)", i, s.Queue, s.Completed, s.Failed)
		case s.Depth < 0 || s.OldestAge < 0:
			return invalid("queue sample %d (%s): gauges must not be negative (depth %d, oldest age %s)", i, s.Queue, s.Depth, s.OldestAge)
		}
	}
	return nil
}

// MergeQueueSamples returns one sample per bucket of samples, ordered by
// queue, then minute, with At truncated to its minute unless the sample
// carries a gauge: counts summed, and the gauge of the latest At (of
// equal ones, the last in input order). A store writes the result as
// the samples' effect (and in that order, so concurrent writers lock
// buckets in one order). Samples must have passed CheckQueueSamples.
func MergeQueueSamples(samples []contract.QueueSample) []contract.QueueSample {
	type key struct {
		queue  string
		minute int64
	}
	idx := map[key]int{}
	var out []contract.QueueSample
	for _, s := range samples {
		s.At = contract.UTC(s.At)
		k := key{s.Queue, contract.HistoryMinute(s.At).Unix()}
		i, ok := idx[k]
		if !ok {
			if !s.Gauge {
				s.At, s.Depth, s.OldestAge = contract.HistoryMinute(s.At), 0, 0
			}
			idx[k] = len(out)
			out = append(out, s)
			continue
		}
		m := &out[i]
		m.Completed += s.Completed
		m.Failed += s.Failed
		if s.Gauge && (!m.Gauge || !s.At.Before(m.At)) {
			m.Gauge, m.At, m.Depth, m.OldestAge = true, s.At, s.Depth, s.OldestAge
		}
	}
	slices.SortFunc(out, func(a, b contract.QueueSample) int {
		if a.Queue != b.Queue {
			if a.Queue < b.Queue {
				return -1
			}
			return 1
		}
		return contract.HistoryMinute(a.At).Compare(contract.HistoryMinute(b.At))
	})
	return out
}

// ClaimRoom counts the room a claim of a queue with QueueLimits has left:
// a store that enforces limits fills it with the queue's running jobs
// (AddRunning), then asks Take for each due job in claim order, under
// whatever makes its claims of the queue one at a time (a lock on the
// queue's record). It is not safe for concurrent use.
type ClaimRoom struct {
	limits contract.QueueLimits
	now    time.Time
	total  int            // running jobs of the queue
	kinds  map[string]int // running jobs per limited kind
	parts  map[string]int // running jobs per partition key

	tats        map[string]time.Time // rate group → GCRA instant (see RateLimit)
	dirty       map[string]bool      // rate groups Take moved
	cursor      string               // fair claims: partition key read up to
	cursorMoved bool
}

// NewClaimRoom returns the room of a queue with limits l at now (the
// claim's time, which rate limits and aging are judged at), with no
// running jobs and no rate used yet.
func NewClaimRoom(l contract.QueueLimits, now time.Time) *ClaimRoom {
	return &ClaimRoom{limits: l.Normalized(), now: contract.UTC(now), kinds: map[string]int{}, parts: map[string]int{},
		tats: map[string]time.Time{}, dirty: map[string]bool{}}
}

// AddRunning counts n running jobs of kind with partition key partition
// ("" = none).
func (r *ClaimRoom) AddRunning(kind, partition string, n int) {
	r.total += n
	if _, ok := r.limits.MaxRunningPerKind[kind]; ok {
		r.kinds[kind] += n
	}
	if partition != "" && (r.limits.MaxRunningPerPartition > 0 || r.limits.Fair) {
		r.parts[partition] += n
	}
}

// Fits reports whether one more running job of kind and partition stays
// within every limit.
func (r *ClaimRoom) Fits(kind, partition string) bool {
	if r.limits.MaxRunning > 0 && r.total >= r.limits.MaxRunning {
		return false
	}
	if n, ok := r.limits.MaxRunningPerKind[kind]; ok && r.kinds[kind] >= n {
		return false
	}
	if partition != "" && r.limits.MaxRunningPerPartition > 0 && r.parts[partition] >= r.limits.MaxRunningPerPartition {
		return false
	}
	return r.ratesFit(kind, partition)
}

// Take counts one more running job of kind and partition and reports
// true when it fits (Fits); otherwise it counts nothing and reports false.
func (r *ClaimRoom) Take(kind, partition string) bool {
	if !r.Fits(kind, partition) {
		return false
	}
	r.AddRunning(kind, partition, 1)
	r.ratesTake(kind, partition)
	return true
}

// Left returns how many more jobs the queue-wide limits (MaxRunning and
// Rate) allow, or math.MaxInt when neither is set.
func (r *ClaimRoom) Left() int {
	left := r.rateLeft(contract.RateGroupQueue, r.limits.Rate)
	if r.limits.MaxRunning <= 0 {
		return left
	}
	return min(left, max(0, r.limits.MaxRunning-r.total))
}

// FullKinds returns the limited kinds with no room left, sorted: a claim
// may leave their jobs out of its candidate read.
func (r *ClaimRoom) FullKinds() []string {
	var out []string
	for k, n := range r.limits.MaxRunningPerKind {
		if r.kinds[k] >= n {
			out = append(out, k)
		}
	}
	for k, rl := range r.limits.RatePerKind {
		if r.rateLeft(contract.RateGroupKind(k), rl) == 0 && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// FullPartitions returns the partition keys with no room left, sorted.
func (r *ClaimRoom) FullPartitions() []string {
	var out []string
	if r.limits.MaxRunningPerPartition > 0 {
		for p, n := range r.parts {
			if n >= r.limits.MaxRunningPerPartition {
				out = append(out, p)
			}
		}
	}
	if rl := r.limits.RatePerPartition; !rl.IsZero() {
		for g := range r.tats {
			if len(g) > len(rateGroupPartPfx) && g[:len(rateGroupPartPfx)] == rateGroupPartPfx && r.rateLeft(g, rl) == 0 {
				if p := g[len(rateGroupPartPfx):]; !slices.Contains(out, p) {
					out = append(out, p)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}
