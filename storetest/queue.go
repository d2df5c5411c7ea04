package storetest

import (
	"errors"

	"github.com/backlogq/backlog/core/contract"
)

var queueTests = []test{
	{"pause/paused-queue-yields-no-claims", testPauseClaims},
	{"pause/other-queues-are-unaffected", testPauseOthers},
	{"pause/pause-and-resume-are-idempotent", testPauseIdempotent},
	{"pause/stats-show-pause-even-without-jobs", testPauseStats},
	{"pause/stats-show-only-persisted-pauses", testStatsOnlyPersistedPauses},
}

// claimPaused claims from a paused queue, which must return no jobs and
// either a nil error or core.ErrQueuePaused.
func (e *env) claimPaused(queue string) {
	e.Helper()
	jobs, err := e.s.Claim(e.ctx, contract.ClaimParams{Queue: queue, WorkerID: "w", Limit: 10, Now: e.now, LeaseUntil: e.now.Add(lease)})
	if err != nil && !errors.Is(err, contract.ErrQueuePaused) {
		e.Fatalf("Claim from paused queue %q: error %s; want no jobs and a nil error or core.ErrQueuePaused", queue, errMsg(err))
	}
	if len(jobs) != 0 {
		e.Fatalf("Claim from paused queue %q returned jobs %v; a paused queue yields no claims until ResumeQueue", queue, ids(jobs))
	}
}

func (e *env) pause(queue string) {
	e.Helper()
	if err := e.s.PauseQueue(e.ctx, queue, e.now); err != nil {
		e.Fatalf("PauseQueue(%q): unexpected error: %v", queue, err)
	}
}

func (e *env) resume(queue string) {
	e.Helper()
	if err := e.s.ResumeQueue(e.ctx, queue, e.now); err != nil {
		e.Fatalf("ResumeQueue(%q): unexpected error: %v", queue, err)
	}
}

func testPauseClaims(e *env) {
	e.insertOne(e.job("q", "k"))
	e.pause("q")
	e.claimPaused("q")
	// Inserting into a paused queue works; the jobs wait.
	e.insertOne(e.job("q", "k"))
	e.claimPaused("q")
	e.resume("q")
	if got := e.claim("q", "w", 10); len(got) != 2 {
		e.Fatalf("Claim after ResumeQueue returned %d jobs; want the 2 jobs that waited during the pause", len(got))
	}
}

func testPauseOthers(e *env) {
	e.insertOne(e.job("paused", "k"))
	other := e.insertOne(e.job("other", "k"))
	e.pause("paused")
	e.claimPaused("paused")
	if got := e.claim("other", "w", 10); len(got) != 1 || got[0].ID != other.ID {
		e.Fatalf("Claim from unpaused queue \"other\" while \"paused\" is paused returned %v; want [%d]", ids(got), other.ID)
	}
}

func testPauseIdempotent(e *env) {
	e.insertOne(e.job("q", "k"))
	e.pause("q")
	e.pause("q")
	e.claimPaused("q")
	if !e.stats()["q"].Paused {
		e.Fatal("Stats does not show queue \"q\" as paused after pausing it twice")
	}
	e.resume("q")
	e.resume("q")
	e.resume("never-paused")
	if got := e.claim("q", "w", 10); len(got) != 1 {
		e.Fatalf("Claim after resuming twice returned %d jobs; want 1", len(got))
	}
	if e.stats()["q"].Paused {
		e.Fatal("Stats shows queue \"q\" as paused after ResumeQueue")
	}
	if e.stats()["never-paused"].Paused {
		e.Fatal("Stats shows queue \"never-paused\" as paused after a no-op ResumeQueue")
	}
}

func testPauseStats(e *env) {
	e.pause("empty-queue")
	st, ok := e.stats()["empty-queue"]
	if !ok {
		e.Fatal("Stats has no entry for paused queue \"empty-queue\", which has no jobs; a queue with a persisted pause must be listed")
	}
	if !st.Paused || nonZero(st.Counts) != 0 {
		e.Fatalf("Stats entry for paused empty queue: Paused=%v, Counts=%v; want Paused=true and no counts", st.Paused, st.Counts)
	}
	e.resume("empty-queue")
	if e.stats()["empty-queue"].Paused {
		e.Fatal("Stats still shows \"empty-queue\" as paused after ResumeQueue")
	}
}
