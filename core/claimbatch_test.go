package core_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/memory"
)

// slowClaimStore is a store whose claims cost a fixed time whatever their
// size, as on a database where the claim's scan dominates: it records how
// many jobs each claim asked for and how many it took.
type slowClaimStore struct {
	contract.Store
	cost time.Duration

	mu     sync.Mutex
	claims []claimSize
}

type claimSize struct{ limit, n int }

func (s *slowClaimStore) Claim(ctx context.Context, p contract.ClaimParams) ([]*core.Job, error) {
	time.Sleep(s.cost)
	jobs, err := s.Store.Claim(ctx, p)
	s.mu.Lock()
	s.claims = append(s.claims, claimSize{p.Limit, len(jobs)})
	s.mu.Unlock()
	return jobs, err
}

// A queue of short jobs on a store whose claims take milliseconds fills
// its slots in big claims: the jobs a claim starts free their slots
// moments after it returns, and the loop gathers them instead of claiming
// the one or two slots free at that instant (which made every other claim
// a small one that cost as much as a full one, and left the slots idle
// while it ran).
func TestShortJobsAreClaimedInBigBatches(t *testing.T) {
	const workers, jobs = 100, 3000
	st := &slowClaimStore{Store: memory.New(), cost: 5 * time.Millisecond}
	// The default: one claim at a time (claim-ahead has its own test,
	// TestAutoClaimAhead).
	drainQueue(t, st, core.QueueConfig{MaxWorkers: workers}, jobs,
		func(context.Context, *core.Job) error { return nil })
	st.mu.Lock()
	defer st.mu.Unlock()
	// Claims that found the queue full of due jobs (they took all they
	// asked for): how many asked for fewer than nine in ten of the slots.
	full, small, took := 0, 0, 0
	for _, cl := range st.claims {
		if cl.n < cl.limit {
			continue
		}
		full++
		took += cl.n
		if cl.limit < workers*9/10 {
			small++
		}
	}
	t.Logf("%d claims, %d took all they asked for (%.1f jobs each), %d of those asked for fewer than %d jobs",
		len(st.claims), full, float64(took)/float64(max(full, 1)), small, workers*9/10)
	if full == 0 || small*10 > full {
		t.Fatalf("%d of %d claims asked for fewer than %d jobs while the queue held more: the loop claims the slots free when a claim returns instead of gathering those its jobs free moments later", small, full, workers*9/10)
	}
}

// TestAutoClaimAhead: with AutoClaimAhead a queue claims ahead (up to
// MaxWorkers jobs waiting for a slot, two claims at once) while its jobs
// are short next to its claims, and not when they are long: jobs that run
// for several claim round trips are not held back from other nodes.
func TestAutoClaimAhead(t *testing.T) {
	for _, tc := range []struct {
		name      string
		run       time.Duration
		wantAhead bool
	}{
		{"short jobs", 0, true},
		// 100 ms is 20 claim round trips of 5 ms, far from the ratio (4):
		// a loaded machine that stretches the measured round trip
		// several times over still must not claim ahead.
		{"long jobs", 100 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const workers, jobs = 20, 400
			st := &slowClaimStore{Store: memory.New(), cost: 5 * time.Millisecond}
			drainQueue(t, st, core.QueueConfig{MaxWorkers: workers, ClaimAhead: core.AutoClaimAhead}, jobs,
				func(context.Context, *core.Job) error { time.Sleep(tc.run); return nil })
			st.mu.Lock()
			defer st.mu.Unlock()
			ahead := 0 // claims that asked for more than the slots
			for _, cl := range st.claims {
				if cl.limit > workers {
					ahead++
				}
			}
			t.Logf("%d claims, %d asked for more than the %d slots", len(st.claims), ahead, workers)
			if tc.wantAhead && ahead == 0 {
				t.Fatalf("no claim asked for more than the %d slots: short jobs were not claimed ahead", workers)
			}
			if !tc.wantAhead && ahead > 0 {
				t.Fatalf("%d claims asked for more than the %d slots: jobs of 100 ms (20 claim round trips) were claimed ahead", ahead, workers)
			}
		})
	}
}

// drainQueue runs a client over st working queue "q" with qc and handler
// fn for kind "work" until jobs enqueued jobs completed, then stops it.
func drainQueue(t *testing.T, st contract.Store, qc core.QueueConfig, jobs int, fn func(context.Context, *core.Job) error) {
	t.Helper()
	var mu sync.Mutex
	done := 0
	finished := make(chan struct{})
	h := core.NewHandlers()
	h.HandleRaw("work", fn)
	c, err := core.NewClient(st, core.Config{
		Queues:              map[string]core.QueueConfig{"q": qc},
		Handlers:            h,
		Logger:              quietLogger(),
		PollInterval:        time.Hour,
		MaintenanceInterval: -1,
		Retention:           &core.Retention{Completed: 0, Cancelled: -1, Discarded: -1},
		Observers: []core.Observer{core.ObserverFunc(func(e core.Event) {
			if e.Kind != core.EventJobCompleted {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if done++; done == jobs {
				close(finished)
			}
		})},
	})
	if err != nil {
		t.Fatal(err)
	}
	enqueueN(t, c, "work", "q", jobs)
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Stop(ctx) }()
	select {
	case <-finished:
	case <-time.After(60 * time.Second):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("%d of %d jobs completed", done, jobs)
	}
}
