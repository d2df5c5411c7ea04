package core

// Claim-ahead settings of QueueConfig.ClaimAhead.
const (
	// NoClaimAhead (0, the default) never claims ahead: a claim asks only
	// for the slots free at that moment, one claim at a time.
	NoClaimAhead = 0
	// AutoClaimAhead (any negative value) claims up to MaxWorkers jobs
	// ahead while the queue's jobs are short: their running mean run time
	// is under AutoClaimAheadRatio times the running mean of the queue's
	// claim round trips on this node. Until both are measured it claims
	// none ahead.
	AutoClaimAhead = -1
	// AutoClaimAheadRatio is how many claim round trips a queue's mean
	// job may last for AutoClaimAhead to claim ahead. A job claimed ahead
	// waits for a slot about one job's run time: at most a few claim
	// round trips (milliseconds) for the jobs this serves, while their
	// slots would otherwise sit idle for a round trip per turn.
	AutoClaimAheadRatio = 4
)

// runCostWeight is the weight of the newest run time in a producer's
// running mean of its jobs' run times (1/runCostWeight).
const runCostWeight = 16

// aheadLocked is how many claimed jobs the queue may hold waiting now
// (QueueConfig.ClaimAhead, adapted under AutoClaimAhead). p.mu is held.
func (p *producer) aheadLocked() int {
	switch {
	case p.ahead > 0:
		return p.ahead
	case p.ahead == NoClaimAhead:
		return 0
	}
	run, claim := p.runMean.Load(), p.claimMean.Load()
	if run <= 0 || claim <= 0 || run >= AutoClaimAheadRatio*claim {
		return 0
	}
	return p.max
}

// claimsAtOnce is how many claims the loop may have in flight: two while
// the queue may hold jobs ahead (slots freed during one claim are refilled
// from its jobs while the next commits), else one.
func (p *producer) claimsAtOnce() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.aheadLocked() > 0 {
		return 2
	}
	return 1
}

// observeRun adds one handler's run time (ns) to the queue's running mean.
func (p *producer) observeRun(ns int64) {
	ns = max(ns, 1)
	for {
		old := p.runMean.Load()
		next := ns
		if old > 0 {
			next = old + (ns-old)/runCostWeight
		}
		if p.runMean.CompareAndSwap(old, max(next, 1)) {
			return
		}
	}
}
