package storetest

import (
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

// Claim policies besides concurrency limits (core.QueueLimits: Rate,
// RatePerKind, RatePerPartition, Fair, Aging); see contract.QueueLimiter.
var policyTests = []test{
	{"policy/round-trip-and-validation", testPolicyRoundTrip},
	{"policy/queue-rate", testPolicyQueueRate},
	{"policy/kind-and-partition-rate-skip-never-block", testPolicyGroupRates},
	{"policy/rate-across-handles", testPolicyRateConcurrent},
	{"policy/fair-partitions-take-turns", testPolicyFair},
	{"policy/fair-turn-goes-round", testPolicyFairRound},
	{"policy/aging-orders-by-effective-priority", testPolicyAging},
	{"policy/aging-ends-starvation", testPolicyStarvation},
	{"policy/workers-per-node-kept-limits-nothing", testPolicyWorkersPerNode},
	{"policy/rate-states-sorted-by-group", testRateStatesSorted},
}

func testPolicyRoundTrip(e *env) {
	ql := e.limiter(e.s)
	l := contract.QueueLimits{
		MaxRunning:       4,
		Rate:             contract.RateLimit{Starts: 7, Per: 1500*time.Millisecond + 7},
		RatePerKind:      map[string]contract.RateLimit{"mail": {Starts: 1, Per: time.Hour}, "off": {}},
		RatePerPartition: contract.RateLimit{Starts: 2, Per: time.Minute},
		Fair:             true,
		Aging:            contract.PriorityAging{Every: 90 * time.Second, MaxSteps: 3},
	}
	e.setLimits("pol", l)
	got, err := ql.QueueLimits(e.ctx, "pol")
	want := l.Normalized()
	if err != nil || got.MaxRunning != 4 || got.Rate != want.Rate || got.RatePerPartition != want.RatePerPartition ||
		!maps.Equal(got.RatePerKind, want.RatePerKind) || !got.Fair || got.Aging != want.Aging {
		e.Fatalf("QueueLimits after SetQueueLimits(%+v) returned %+v, %v; want %+v (policies read back exactly, zero rates dropped)", l, got, err, want)
	}
	only := contract.QueueLimits{Fair: true}
	e.setLimits("fair-only", only)
	if got, _ := ql.QueueLimits(e.ctx, "fair-only"); !got.Fair || got.IsZero() {
		e.Fatalf("QueueLimits of a queue with only Fair returned %+v; want Fair set (a policy alone is a limit)", got)
	}
	e.setLimits("pol", contract.QueueLimits{})
	if got, _ := ql.QueueLimits(e.ctx, "pol"); !got.IsZero() {
		e.Fatalf("QueueLimits after zero limits returned %+v; want every policy lifted", got)
	}
	for _, bad := range []contract.QueueLimits{
		{Rate: contract.RateLimit{Starts: -1, Per: time.Second}},
		{Rate: contract.RateLimit{Starts: 1}},
		{Rate: contract.RateLimit{Starts: 1, Per: time.Microsecond}},
		{RatePerPartition: contract.RateLimit{Per: time.Second}},
		{RatePerKind: map[string]contract.RateLimit{"": {Starts: 1, Per: time.Second}}},
		{Aging: contract.PriorityAging{Every: time.Millisecond}},
		{Aging: contract.PriorityAging{Every: time.Minute, MaxSteps: 10}},
	} {
		if err := ql.SetQueueLimits(e.ctx, "bad", bad, e.now); !errors.Is(err, contract.ErrInvalidJob) {
			e.Fatalf("SetQueueLimits(%+v) returned %v; want an error wrapping core.ErrInvalidJob", bad, err)
		}
	}
}

func testPolicyQueueRate(e *env) {
	ql := e.limiter(e.s)
	e.setLimits("rate", contract.QueueLimits{Rate: contract.RateLimit{Starts: 3, Per: time.Minute}})
	for range 10 {
		e.insertOne(e.job("rate", "k"))
	}
	if got := e.claim("rate", "w", 10); len(got) != 3 {
		e.Fatalf("first claim of a queue limited to 3 starts a minute returned %d jobs; want the burst of 3", len(got))
	}
	if got := e.claim("rate", "w", 10); len(got) != 0 {
		e.Fatalf("second claim at the same instant returned %d jobs; want 0 (the rate is used up)", len(got))
	}
	states, err := ql.QueueRateStates(e.ctx, "rate", e.now)
	if err != nil || len(states) != 1 || states[0].Group != contract.RateGroupQueue {
		e.Fatalf("QueueRateStates after the burst returned %+v, %v; want the queue group's instant", states, err)
	}
	l, _ := ql.QueueLimits(e.ctx, "rate")
	waits := l.RateWaits(states, e.now)
	if len(waits) != 1 || !waits[0].NextStart.Equal(e.now.Add(20*time.Second)) {
		e.Fatalf("RateWaits after the burst = %+v; want the queue waiting until now+20s (one start per 20 s)", waits)
	}
	e.advance(20 * time.Second)
	if got := e.claim("rate", "w", 10); len(got) != 1 {
		e.Fatalf("claim 20 s later returned %d jobs; want 1 (one start per 20 s)", len(got))
	}
	e.advance(10 * time.Minute)
	if got := e.claim("rate", "w", 10); len(got) != 3 {
		e.Fatalf("claim after a long idle returned %d jobs; want 3 (a full burst, no more)", len(got))
	}
	if states, _ := ql.QueueRateStates(e.ctx, "rate", e.now.Add(2*time.Minute)); len(states) != 0 {
		e.Fatalf("QueueRateStates long after the last start returned %+v; want none in use", states)
	}
}

func testPolicyGroupRates(e *env) {
	e.setLimits("gr", contract.QueueLimits{
		RatePerKind:      map[string]contract.RateLimit{"slow": {Starts: 1, Per: time.Minute}},
		RatePerPartition: contract.RateLimit{Starts: 2, Per: time.Minute},
	})
	var slow, fast []*contract.Job
	for range 3 {
		slow = append(slow, e.insertOne(e.job("gr", "slow")))
	}
	for range 3 {
		fast = append(fast, e.insertOne(e.job("gr", "fast")))
	}
	got := e.claim("gr", "w", 10)
	want := []*contract.Job{slow[0], fast[0], fast[1], fast[2]}
	if !sameIDSet(got, want) {
		e.Fatalf("claim with kind slow limited to 1 start a minute returned %v; want %v (the other slow jobs skipped, the fast jobs behind them taken)", ids(got), ids(want))
	}
	var a []*contract.Job
	for range 4 {
		a = append(a, e.insertOne(e.jobIn("gr", "fast", "tenant-a")))
	}
	b := e.insertOne(e.jobIn("gr", "fast", "tenant-b"))
	got = e.claim("gr", "w", 10)
	want = []*contract.Job{a[0], a[1], b}
	if !sameIDSet(got, want) {
		e.Fatalf("claim with 2 starts a minute per partition returned %v; want %v", ids(got), ids(want))
	}
	e.advance(30 * time.Second)
	got = e.claim("gr", "w", 10)
	want = []*contract.Job{a[2]}
	if !sameIDSet(got, want) {
		e.Fatalf("claim 30 s later returned %v; want %v (one more start for tenant-a, none yet for kind slow)", ids(got), ids(want))
	}
	e.advance(30 * time.Second)
	got = e.claim("gr", "w", 10)
	want = []*contract.Job{a[3], slow[1]}
	if !sameIDSet(got, want) {
		e.Fatalf("claim a minute after the first returned %v; want %v (tenant-a's last job and one more of kind slow)", ids(got), ids(want))
	}
}

func testPolicyRateConcurrent(e *env) {
	const claimers = 8
	e.setLimits("rc", contract.QueueLimits{Rate: contract.RateLimit{Starts: 5, Per: time.Hour}, RatePerPartition: contract.RateLimit{Starts: 2, Per: time.Hour}})
	parts := []string{"p1", "p2", "p3", ""}
	for i := range 40 {
		e.insertOne(e.jobIn("rc", "k", parts[i%len(parts)]))
	}
	stores := []contract.Store{e.s}
	if e.f.Reopen != nil {
		stores = append(stores, e.f.Reopen(e.T, e.s))
	}
	var (
		wg    sync.WaitGroup
		total atomic.Int64
		mu    sync.Mutex
		per   = map[string]int{}
		errs  = make(chan error, claimers)
	)
	for c := range claimers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := stores[c%len(stores)]
			for range 4 {
				jobs, err := s.Claim(e.ctx, contract.ClaimParams{Queue: "rc", WorkerID: fmt.Sprint("w", c), Limit: 2, Now: e.now, LeaseUntil: e.now.Add(lease)})
				if err != nil {
					errs <- err
					return
				}
				total.Add(int64(len(jobs)))
				mu.Lock()
				for _, j := range jobs {
					per[j.PartitionKey]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		e.Fatalf("concurrent Claim: unexpected error: %v", err)
	}
	if n := total.Load(); n != 5 {
		e.Fatalf("%d claimers on %d handles started %d jobs at one instant; want exactly 5 (the queue's rate)", claimers, len(stores), n)
	}
	for p, n := range per {
		if p != "" && n > 2 {
			e.Fatalf("partition %q started %d jobs; want at most 2 (its rate)", p, n)
		}
	}
}

func testPolicyFair(e *env) {
	e.setLimits("fair", contract.QueueLimits{Fair: true})
	var a []*contract.Job
	for range 60 {
		a = append(a, e.insertOne(e.jobIn("fair", "k", "tenant-a")))
	}
	e.advance(time.Second)
	var b []*contract.Job
	for range 5 {
		b = append(b, e.insertOne(e.jobIn("fair", "k", "tenant-b")))
	}
	got := e.claim("fair", "w", 10)
	nb := 0
	for _, j := range got {
		if j.PartitionKey == "tenant-b" {
			nb++
		}
	}
	if len(got) != 10 || nb != 5 {
		e.Fatalf("fair claim of 10 with 60 jobs of tenant-a ahead of 5 of tenant-b returned %d jobs, %d of tenant-b; want 10 with all 5 of tenant-b (partitions take turns)", len(got), nb)
	}
	// tenant-a has 5 running, tenant-b 5 and nothing left: the next
	// claims take tenant-a's jobs, and a job without a key gets its turn
	// as the queue's head reaches it.
	loose := e.insertOne(e.job("fair", "k"))
	seen := map[int64]bool{}
	for range 20 {
		for _, j := range e.claim("fair", "w", 10) {
			seen[j.ID] = true
		}
	}
	if !seen[loose.ID] || !seen[a[len(a)-1].ID] {
		e.Fatalf("fair claims never took the job without a partition key (%v) or tenant-a's last job (%v); every due job must be claimed in the end", seen[loose.ID], seen[a[len(a)-1].ID])
	}
	// The partition with fewer running jobs goes first.
	e.setLimits("fair2", contract.QueueLimits{Fair: true})
	for range 3 {
		e.insertOne(e.jobIn("fair2", "k", "x"))
	}
	e.claim("fair2", "w", 3) // x: 3 running
	e.advance(time.Second)
	for range 3 {
		e.insertOne(e.jobIn("fair2", "k", "x"))
	}
	y := e.insertOne(e.jobIn("fair2", "k", "y"))
	got = e.claim("fair2", "w", 1)
	if len(got) != 1 || got[0].ID != y.ID {
		e.Fatalf("fair claim of 1 with partition x holding 3 running returned %v; want partition y's job %d (fewest running first)", ids(got), y.ID)
	}
}

func testPolicyFairRound(e *env) {
	const parts = contract.FairPartitions + 8
	e.setLimits("round", contract.QueueLimits{Fair: true, MaxRunningPerPartition: 1})
	for i := range parts {
		for range 2 {
			e.insertOne(e.jobIn("round", "k", fmt.Sprintf("p%03d", i)))
		}
	}
	seen := map[string]int{}
	for range 3 {
		for _, j := range e.claim("round", "w", parts) {
			seen[j.PartitionKey]++
		}
	}
	if len(seen) != parts {
		e.Fatalf("fair claims over %d partitions reached %d of them; want every partition served (the turn goes round past %d)", parts, len(seen), contract.FairPartitions)
	}
	for p, n := range seen {
		if n != 1 {
			e.Fatalf("partition %s has %d running under a limit of 1 per partition", p, n)
		}
	}
}

func testPolicyAging(e *env) {
	low := e.job("age", "k")
	low.Priority, low.RunAt = 9, e.now.Add(-10*time.Minute)
	high := e.job("age", "k")
	high.Priority, high.RunAt = 1, e.now.Add(-time.Minute)
	jl, jh := e.insertOne(low), e.insertOne(high)

	e.setLimits("age", contract.QueueLimits{Aging: contract.PriorityAging{Every: time.Minute, MaxSteps: 2}})
	if got := e.claim("age", "w", 1); len(got) != 1 || got[0].ID != jh.ID {
		e.Fatalf("claim with aging bounded to 2 steps returned %v; want the priority-1 job %d (9 ages to 7 only)", ids(got), jh.ID)
	}
	e.setLimits("age2", contract.QueueLimits{Aging: contract.PriorityAging{Every: time.Minute}})
	low.Queue, high.Queue = "age2", "age2"
	jl, jh = e.insertOne(low), e.insertOne(high)
	got := e.claim("age2", "w", 1)
	if len(got) != 1 || got[0].ID != jl.ID {
		e.Fatalf("claim with aging of one step a minute returned %v; want the priority-9 job %d due 10 min ago (effective priority 1, due before the priority-1 job)", ids(got), jl.ID)
	}
	if got[0].Priority != 9 {
		e.Fatalf("the aged job was claimed with priority %d; want the priority it was given (9) kept", got[0].Priority)
	}
	if got := e.claim("age2", "w", 1); len(got) != 1 || got[0].ID != jh.ID {
		e.Fatalf("second claim returned %v; want job %d", ids(got), jh.ID)
	}
}

// testPolicyStarvation feeds a queue two priority-1 jobs a minute while
// it claims one a minute: without aging the priority-10 job waits for
// ever; with one step a minute it is claimed within ten minutes.
func testPolicyStarvation(e *env) {
	run := func(queue string, aging contract.PriorityAging) int {
		if !aging.IsZero() {
			e.setLimits(queue, contract.QueueLimits{Aging: aging})
		}
		low := e.job(queue, "k")
		low.Priority = contract.PriorityLowest
		jl := e.insertOne(low)
		for minute := 1; minute <= 20; minute++ {
			for range 2 {
				p := e.job(queue, "k")
				p.Priority = contract.PriorityHighest
				e.insertOne(p)
			}
			for _, j := range e.claim(queue, "w", 1) {
				if j.ID == jl.ID {
					return minute
				}
			}
			e.advance(time.Minute)
		}
		return 0
	}
	if m := run("starve", contract.PriorityAging{}); m != 0 {
		e.Fatalf("without aging the low-priority job was claimed at minute %d; the test expects it starved", m)
	}
	if m := run("aged", contract.PriorityAging{Every: time.Minute}); m == 0 || m > 11 {
		e.Fatalf("with one aging step a minute the low-priority job was claimed at minute %d; want it claimed within 11 minutes", m)
	}
}

// sameIDSet reports whether got and want hold the same job ids, in any
// order.
func sameIDSet(got, want []*contract.Job) bool {
	if len(got) != len(want) {
		return false
	}
	m := map[int64]bool{}
	for _, j := range want {
		m[j.ID] = true
	}
	for _, j := range got {
		if !m[j.ID] {
			return false
		}
	}
	return true
}

func testPolicyWorkersPerNode(e *env) {
	ql := e.limiter(e.s)
	e.setLimits("wpn", contract.QueueLimits{WorkersPerNode: 3})
	got, err := ql.QueueLimits(e.ctx, "wpn")
	if err != nil || got.WorkersPerNode != 3 || !got.IsZero() {
		e.Fatalf("QueueLimits after WorkersPerNode 3 returned %+v, %v; want it kept, and no claim limit", got, err)
	}
	for range 5 {
		e.insertOne(e.job("wpn", "k"))
	}
	if jobs := e.claim("wpn", "w", 10); len(jobs) != 5 {
		e.Fatalf("claim of a queue with only WorkersPerNode returned %d jobs; want all 5 (it limits no claim)", len(jobs))
	}
	e.setLimits("wpn", contract.QueueLimits{MaxRunning: 9, WorkersPerNode: 2})
	if got, _ := ql.QueueLimits(e.ctx, "wpn"); got.WorkersPerNode != 2 || got.MaxRunning != 9 {
		e.Fatalf("QueueLimits = %+v; want WorkersPerNode 2 with MaxRunning 9", got)
	}
	e.setLimits("wpn", contract.QueueLimits{})
	if got, _ := ql.QueueLimits(e.ctx, "wpn"); got.WorkersPerNode != 0 {
		e.Fatalf("QueueLimits after zero limits = %+v; want WorkersPerNode back to 0", got)
	}
	if err := ql.SetQueueLimits(e.ctx, "wpn", contract.QueueLimits{WorkersPerNode: -1}, e.now); !errors.Is(err, contract.ErrInvalidJob) {
		e.Fatalf("SetQueueLimits with WorkersPerNode -1 returned %v; want ErrInvalidJob", err)
	}
}
