package bench

import (
	"slices"
	"sync"
	"time"
)

// batchArgs are the arguments of the steady run's jobs: the run and the
// number of the insert call (batch) that wrote them, so a handler can be
// matched with the time that call returned (and jobs an earlier run left
// in the queue are told apart).
type batchArgs struct {
	R int64 `json:"r"`
	B int64 `json:"b"`
}

// batchStamps records when each insert call returned (its commit, as the
// producer sees it) and when each job's handler started, and pairs them at
// the end: the latency of a job is its handler start minus its batch's
// commit. A handler may start before its producer sees the commit return
// (the commit is visible to the workers first); such a job counts as 0
// and is counted in Early.
type batchStamps struct {
	mu      sync.Mutex
	next    int64
	commits []time.Time // by batch number; zero = the call did not return
	starts  []batchStart
}

type batchStart struct {
	batch int64
	at    time.Time
}

// batch reserves the number of the next insert call.
func (s *batchStamps) batch() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.next
	s.next++
	return n
}

// committed records that insert call n returned at t.
func (s *batchStamps) committed(n int64, t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for int64(len(s.commits)) <= n {
		s.commits = append(s.commits, time.Time{})
	}
	s.commits[n] = t
}

// started records that a job of insert call n started at t.
func (s *batchStamps) started(n int64, t time.Time) {
	s.mu.Lock()
	s.starts = append(s.starts, batchStart{n, t})
	s.mu.Unlock()
}

// result pairs the starts with their commits. Jobs of a call that never
// returned (cut off by the end of the run) are left out.
func (s *batchStamps) result() (LatencyResult, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	lat := make([]time.Duration, 0, len(s.starts))
	early := 0
	for _, st := range s.starts {
		if st.batch >= int64(len(s.commits)) || s.commits[st.batch].IsZero() {
			continue
		}
		d := st.at.Sub(s.commits[st.batch])
		if d < 0 {
			d, early = 0, early+1
		}
		lat = append(lat, d)
	}
	return percentiles(lat), early
}

// percentiles summarises latencies (sorting lat in place); the zero
// LatencyResult when lat is empty.
func percentiles(lat []time.Duration) LatencyResult {
	if len(lat) == 0 {
		return LatencyResult{}
	}
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	return LatencyResult{Jobs: len(lat), P50: pct(0.50), P90: pct(0.90), P99: pct(0.99), Max: lat[len(lat)-1]}
}
