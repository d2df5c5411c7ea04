package storetest

import (
	"slices"
	"strings"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
)

var routingTests = []test{
	{"routing/untagged-worker-takes-only-untagged-jobs", testRoutingUntaggedWorker},
	{"routing/job-tags-must-be-a-subset-of-worker-tags", testRoutingSubset},
	{"routing/skipped-jobs-do-not-hold-back-later-jobs", testRoutingSkipDoesNotBlock},
	{"routing/tags-compare-byte-for-byte", testRoutingByteWise},
}

var deadWorkerTests = []test{
	{"dead-workers/rescue-takes-only-jobs-of-workers-past-the-heartbeat-cutoff", testRescueWorkersOnlyDead},
	{"dead-workers/rescued-job-is-retried-with-no-heartbeat-error", testRescueWorkersAvailable},
	{"dead-workers/discards-when-attempts-are-used-up", testRescueWorkersDiscard},
	{"dead-workers/respects-limit", testRescueWorkersLimit},
	{"dead-workers/takes-jobs-in-id-order", testRescueWorkersIDOrder},
}

// tagged returns insert parameters for a due job with the given tags.
func (e *env) tagged(queue string, tags ...string) contract.InsertParams {
	p := e.job(queue, "k")
	p.Tags = tags
	return p
}

// claimTags claims up to limit jobs of queue for worker with capabilities.
func (e *env) claimTags(queue, worker string, limit int, tags ...string) []*contract.Job {
	e.Helper()
	return e.claimWith(contract.ClaimParams{Queue: queue, WorkerID: worker, Limit: limit, Now: e.now, LeaseUntil: e.now.Add(lease), Tags: tags})
}

func sameIDs(got []*contract.Job, want ...*contract.Job) bool {
	return slices.Equal(ids(got), ids(want))
}

func testRoutingUntaggedWorker(e *env) {
	gpu := e.insertOne(e.tagged("q", "gpu"))
	plain := e.insertOne(e.tagged("q"))
	empty := e.insertOne(e.tagged("q", []string{}...))
	got := e.claimTags("q", "w", 10)
	if !sameIDs(got, plain, empty) {
		e.Fatalf("a claim with no tags returned %v; want the untagged jobs %d and %d only (job %d needs tag \"gpu\")", ids(got), plain.ID, empty.ID, gpu.ID)
	}
	e.expectState(gpu.ID, contract.StateAvailable, "no claimer so far had its tag")
}

func testRoutingSubset(e *env) {
	both := e.insertOne(e.tagged("q", "gpu", "eu"))
	gpu := e.insertOne(e.tagged("q", "gpu"))
	eu := e.insertOne(e.tagged("q", "eu"))
	plain := e.insertOne(e.tagged("q"))

	got := e.claimTags("q", "w-gpu", 10, "gpu", "cuda")
	if !sameIDs(got, gpu, plain) {
		e.Fatalf("a claim with tags [gpu cuda] returned %v; want %d (tags [gpu]) and %d (no tags): a job's tags must all be among the worker's", ids(got), gpu.ID, plain.ID)
	}
	got = e.claimTags("q", "w-all", 10, "eu", "x", "gpu")
	if !sameIDs(got, both, eu) {
		e.Fatalf("a claim with tags [eu x gpu] returned %v; want %d (tags [gpu eu]) and %d (tags [eu])", ids(got), both.ID, eu.ID)
	}
	for _, j := range got {
		if j.WorkerID != "w-all" || j.State != contract.StateRunning {
			e.Errorf("job %d claimed by tags is %q for %q; want running for \"w-all\"", j.ID, j.State, j.WorkerID)
		}
	}
}

func testRoutingSkipDoesNotBlock(e *env) {
	// The tagged jobs come first in claim order: higher priority, older.
	var first []*contract.Job
	for range 5 {
		p := e.tagged("q", "special")
		p.Priority = 1
		first = append(first, e.insertOne(p))
	}
	e.advance(time.Second)
	later := e.insert(e.job("q", "k"), e.job("q", "k"))
	got := e.claimTags("q", "w", 2, "other")
	if !sameIDs(got, later...) {
		e.Fatalf("a claim of 2 with tags [other] returned %v; want the untagged jobs %v behind the 5 jobs it may not take (%v)", ids(got), ids(later), ids(first))
	}
	got = e.claimTags("q", "w2", 10, "special")
	if !sameIDs(got, first...) {
		e.Fatalf("a claim with tags [special] returned %v; want %v, left behind by the other claim", ids(got), ids(first))
	}
}

func testRoutingByteWise(e *env) {
	upper := e.insertOne(e.tagged("q", "GPU"))
	uni := e.insertOne(e.tagged("q", "région=ü"))
	if got := e.claimTags("q", "w", 10, "gpu", "région=u"); len(got) != 0 {
		e.Fatalf("a claim with tags [gpu région=u] returned %v; tags compare byte for byte, so jobs with [GPU] and [région=ü] are not its", ids(got))
	}
	got := e.claimTags("q", "w", 10, "région=ü", "GPU")
	if !sameIDs(got, upper, uni) {
		e.Fatalf("a claim with the exact tags returned %v; want %d and %d", ids(got), upper.ID, uni.ID)
	}
}

// rescueWorkers calls RescueWorkers at e.now and fails on error.
func (e *env) rescueWorkers(heartbeatBefore time.Time, limit int) []*contract.Job {
	e.Helper()
	got, err := e.s.RescueWorkers(e.ctx, heartbeatBefore, e.now, limit, e.decide(core.CauseWorkerDead))
	if err != nil {
		e.Fatalf("RescueWorkers(heartbeat before %s, now %s, limit %d): unexpected error: %v", ts(heartbeatBefore), ts(e.now), limit, err)
	}
	if len(got) > limit {
		e.Fatalf("RescueWorkers with limit %d returned %d jobs", limit, len(got))
	}
	return got
}

func testRescueWorkersOnlyDead(e *env) {
	e.register(e.worker("dead"))
	deadJob := e.claimJob(e.job("q", "k"), "dead")
	e.advance(time.Minute)
	e.register(e.worker("alive")) // heartbeat one minute later
	aliveJob := e.claimJob(e.job("q", "k"), "alive")
	ghostJob := e.claimJob(e.job("q", "k"), "never-registered")
	done := e.claimJob(e.job("q", "k"), "dead")
	e.apply(e.outcome(done, contract.OutcomeComplete))
	pending := e.insertOne(e.job("q", "k"))
	keep := []*contract.Job{e.get(aliveJob.ID), e.get(ghostJob.ID), e.get(done.ID), e.get(pending.ID)}

	// A heartbeat exactly at the cutoff is not before it.
	if got := e.rescueWorkers(start, 10); len(got) != 0 {
		e.Fatalf("RescueWorkers with the cutoff equal to the dead worker's heartbeat returned %v; only heartbeats before the cutoff count", ids(got))
	}
	got := e.rescueWorkers(start.Add(time.Second), 10)
	if !sameIDs(got, deadJob) {
		e.Fatalf("RescueWorkers returned %v; want only job %d, held by the worker whose heartbeat is before the cutoff", ids(got), deadJob.ID)
	}
	for _, j := range keep {
		e.expectUnchanged(j, "RescueWorkers (jobs of live or unregistered workers, final and pending jobs are not its business)")
	}
	if ws := e.workers(); len(ws) != 2 {
		e.Errorf("RescueWorkers changed the worker registry: %d records; want 2 (removing records is RemoveDeadWorkers' job)", len(ws))
	}
}

func testRescueWorkersAvailable(e *env) {
	w := e.worker("w-dead")
	e.register(w)
	j := e.claimJob(e.job("q", "k"), "w-dead")
	e.advance(5 * time.Minute) // lease long expired too: either rescue may take it
	got := e.rescueWorkers(e.now.Add(-2*time.Minute), 10)
	if len(got) != 1 {
		e.Fatalf("RescueWorkers returned %d jobs; want 1", len(got))
	}
	checkHandedBack(e, got[0], j, contract.StateRetryable, core.CauseWorkerDead, w.HeartbeatAt)
	checkHandedBack(e, e.get(j.ID), j, contract.StateRetryable, core.CauseWorkerDead, w.HeartbeatAt)
	msg := e.get(j.ID).Errors[0].Error
	if !strings.Contains(msg, w.HeartbeatAt.Format("2006-01-02T15:04:05")) {
		e.Errorf("the error entry reads %q; want it to name the last heartbeat, %s", msg, w.HeartbeatAt.Format(time.RFC3339Nano))
	}
	again := e.claimOne("q", "w2")
	if again.ID != j.ID || again.Attempt != 2 {
		e.Fatalf("claim after RescueWorkers returned job %d at attempt %d; want job %d at attempt 2", again.ID, again.Attempt, j.ID)
	}
	if got := e.rescueWorkers(e.now.Add(-2*time.Minute), 10); len(got) != 0 {
		e.Fatalf("a second RescueWorkers returned %v; the job now belongs to a live worker", ids(got))
	}
}

func testRescueWorkersDiscard(e *env) {
	w := e.worker("w")
	e.register(w)
	p := e.job("q", "k")
	p.MaxAttempts = 1
	j := e.claimJob(p, "w")
	e.advance(time.Hour)
	got := e.rescueWorkers(e.now, 10)
	if len(got) != 1 {
		e.Fatalf("RescueWorkers returned %d jobs; want 1", len(got))
	}
	checkHandedBack(e, got[0], j, contract.StateDiscarded, core.CauseWorkerDead, w.HeartbeatAt)
}

func testRescueWorkersLimit(e *env) {
	e.register(e.worker("w"))
	insertMany(e, "q", 5)
	if n := len(e.claim("q", "w", 10)); n != 5 {
		e.Fatalf("setup: claimed %d of 5", n)
	}
	e.advance(time.Hour)
	var sizes []int
	for range 3 {
		sizes = append(sizes, len(e.rescueWorkers(e.now, 2)))
	}
	if !slices.Equal(sizes, []int{2, 2, 1}) {
		e.Fatalf("three RescueWorkers calls with limit 2 over 5 jobs of a dead worker returned %v jobs; want [2 2 1]", sizes)
	}
}
