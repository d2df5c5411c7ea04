package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/core/storekit"
	"github.com/backlogq/backlog/store/memory"
)

func TestRateLimitGCRA(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	l := core.QueueLimits{Rate: core.RateLimit{Starts: 4, Per: time.Second}}
	r := storekit.NewClaimRoom(l, now)
	if got := r.Left(); got != 4 {
		t.Fatalf("Left of a fresh room with 4 starts a second = %d; want 4 (a full burst)", got)
	}
	for i := range 4 {
		if !r.Take("k", "") {
			t.Fatalf("Take %d of the burst refused", i+1)
		}
	}
	if r.Take("k", "") || r.Left() != 0 {
		t.Fatalf("a fifth start within the same instant was allowed (Left %d)", r.Left())
	}
	ups := r.RateUpdates()
	if len(ups) != 1 || ups[0].Group != contract.RateGroupQueue || !ups[0].TAT.Equal(now.Add(time.Second)) {
		t.Fatalf("RateUpdates = %+v; want the queue group at now+1s", ups)
	}
	// A room 250 ms later, loaded with that instant, allows one start.
	r2 := storekit.NewClaimRoom(l, now.Add(250*time.Millisecond))
	r2.LoadRate(ups[0].Group, ups[0].TAT)
	if got := r2.Left(); got != 1 {
		t.Fatalf("Left 250 ms after the burst = %d; want 1", got)
	}
	waits := l.RateWaits(ups, now)
	if len(waits) != 1 || !waits[0].NextStart.Equal(now.Add(250*time.Millisecond)) {
		t.Fatalf("RateWaits = %+v; want the next start at now+250ms", waits)
	}
}

func TestRateInstantRoundsUp(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	r := storekit.NewClaimRoom(core.QueueLimits{Rate: core.RateLimit{Starts: 3, Per: time.Microsecond * 10}}, now)
	r.Take("k", "")
	tat := r.RateUpdates()[0].TAT
	if tat.Nanosecond()%1000 != 0 || tat.Before(now.Add(10*time.Microsecond/3)) {
		t.Fatalf("instant %s: want it rounded up to the microsecond", tat.Format(time.RFC3339Nano))
	}
}

func TestPriorityAgingEffective(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	a := core.PriorityAging{Every: time.Minute}
	for _, c := range []struct {
		prio  int
		ago   time.Duration
		steps int
		want  int
	}{
		{9, 0, 0, 9},
		{9, 59 * time.Second, 0, 9},
		{9, time.Minute, 0, 8},
		{9, 30 * time.Minute, 0, 1},
		{9, 30 * time.Minute, 3, 6},
		{1, time.Hour, 0, 1},
		{5, -time.Hour, 0, 5}, // not due yet
	} {
		a.MaxSteps = c.steps
		if got := a.Effective(c.prio, now.Add(-c.ago), now); got != c.want {
			t.Errorf("Effective(%d, due %s ago, max %d) = %d; want %d", c.prio, c.ago, c.steps, got, c.want)
		}
	}
}

func TestPolicyJSONRoundTrip(t *testing.T) {
	l := core.QueueLimits{
		Rate:             core.RateLimit{Starts: 10, Per: 1500 * time.Millisecond},
		RatePerKind:      map[string]core.RateLimit{"mail": {Starts: 1, Per: time.Minute}},
		RatePerPartition: core.RateLimit{Starts: 2, Per: time.Second},
		Fair:             true,
		Aging:            core.PriorityAging{Every: time.Minute, MaxSteps: 2},
	}
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"rate":{"starts":10,"per_seconds":1.5},"rate_per_kind":{"mail":{"starts":1,"per_seconds":60}},"rate_per_partition":{"starts":2,"per_seconds":1},"fair":true,"aging":{"every_seconds":60,"max_steps":2}}`
	if string(b) != want {
		t.Fatalf("JSON = %s; want %s", b, want)
	}
	var back core.QueueLimits
	if err := json.Unmarshal(b, &back); err != nil || back.Rate != l.Rate || back.Aging != l.Aging || !back.Fair || back.RatePerKind["mail"] != l.RatePerKind["mail"] {
		t.Fatalf("round trip = %+v, %v; want %+v", back, err, l)
	}
	if b, _ := json.Marshal(core.QueueLimits{MaxRunning: 1}); string(b) != `{"max_running":1}` {
		t.Fatalf("limits without a policy encode as %s; want the policy fields left out", b)
	}
	var bad core.QueueLimits
	if err := json.Unmarshal([]byte(`{"rate":{"starts":1,"per_seconds":1e300}}`), &bad); !errors.Is(err, core.ErrInvalidJob) {
		t.Fatalf("an out-of-range period decoded with %v; want ErrInvalidJob", err)
	}
}

func TestPickFairInterleaves(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	r := storekit.NewClaimRoom(core.QueueLimits{Fair: true}, now)
	r.AddRunning("k", "a", 2)
	var cands []storekit.ClaimCandidate
	for i := range 4 {
		cands = append(cands, storekit.ClaimCandidate{ID: int64(i + 1), Kind: "k", Partition: "a", Priority: 5, RunAt: now})
	}
	cands = append(cands, storekit.ClaimCandidate{ID: 10, Kind: "k", Partition: "b", Priority: 5, RunAt: now},
		storekit.ClaimCandidate{ID: 11, Kind: "k", Partition: "b", Priority: 5, RunAt: now})
	got, _ := r.Pick(cands, 4)
	var ids []int64
	for _, c := range got {
		ids = append(ids, c.ID)
	}
	want := []int64{10, 1, 11, 2}
	if len(ids) != 4 || ids[0] != want[0] || ids[1] != want[1] || ids[2] != want[2] || ids[3] != want[3] {
		t.Fatalf("Pick = %v; want %v (b has fewer running, then turns)", ids, want)
	}
}

// QueueLimits.WorkersPerNode replaces a node's MaxWorkers at its next
// poll: lowered, no more jobs run at once than it says; raised, waiting
// jobs start and the node claims more.
func TestWorkersPerNodeAtRuntime(t *testing.T) {
	st := memory.New()
	var running, peak atomic.Int64
	release := make(chan struct{})
	h := core.NewHandlers()
	h.HandleRaw("work", func(ctx context.Context, j *core.Job) error {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	})
	c, err := core.NewClient(st, core.Config{
		Queues:       map[string]core.QueueConfig{"q": {MaxWorkers: 4}},
		Handlers:     h,
		Logger:       quietLogger(),
		PollInterval: 50 * time.Millisecond, MaintenanceInterval: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.SetQueueLimits(ctx, "q", core.QueueLimits{WorkersPerNode: 1}); err != nil {
		t.Fatal(err)
	}
	if l, _ := c.QueueLimits(ctx, "q"); l.WorkersPerNode != 1 || !l.IsZero() {
		t.Fatalf("QueueLimits = %+v; want WorkersPerNode 1 and no claim limit", l)
	}
	enqueueN(t, c, "work", "q", 10)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.StopAndCancel(ctx)
	time.Sleep(300 * time.Millisecond)
	if p := peak.Load(); p != 1 {
		t.Fatalf("with WorkersPerNode 1 the node ran %d jobs at once", p)
	}
	if err := c.SetQueueLimits(ctx, "q", core.QueueLimits{WorkersPerNode: 3}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for running.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	if r, p := running.Load(), peak.Load(); r != 3 || p != 3 {
		t.Fatalf("after WorkersPerNode 3: %d running, peak %d; want 3 and 3", r, p)
	}
	if err := c.SetQueueLimits(ctx, "q", core.QueueLimits{}); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(2 * time.Second)
	for running.Load() < 4 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if r := running.Load(); r != 4 {
		t.Fatalf("after lifting WorkersPerNode: %d running; want the configured 4", r)
	}
	close(release)
}
