package storetest

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

var progressTests = []test{
	{"progress/get-and-list-return-them", testProgressReturned},
	{"progress/stale-claim-seq-is-lease-lost", testProgressStaleClaim},
	{"progress/other-worker-is-lease-lost", testProgressOtherWorker},
	{"progress/not-running-is-lease-lost", testProgressNotRunning},
	{"progress/bounds-are-checked", testProgressBounds},
	{"progress/cleared-at-claim", testProgressClearedAtClaim},
	{"progress/checkpoint-survives-retry-and-rescue", testCheckpointSurvives},
	{"progress/continue-clears-checkpoint", testCheckpointContinue},
}

// progressRecorder returns the store as a contract.ProgressRecorder, or
// skips.
func (e *env) progressRecorder() contract.ProgressRecorder {
	r, ok := e.s.(contract.ProgressRecorder)
	if !ok {
		e.Skip("the store does not implement contract.ProgressRecorder")
	}
	return r
}

// progressFor returns an update of the running job j, fenced by its
// worker and claim, recording percent and message at e.now and, when cp
// is not nil, checkpoint cp.
func (e *env) progressFor(j *contract.Job, percent float64, message string, cp string) contract.ProgressUpdate {
	u := contract.ProgressUpdate{JobID: j.ID, WorkerID: j.WorkerID, ClaimSeq: j.ClaimSeq,
		Progress: &contract.Progress{Percent: percent, Message: message, At: e.now}}
	if cp != "" {
		u.Checkpoint = json.RawMessage(cp)
	}
	return u
}

// record calls RecordProgress, which must succeed.
func (e *env) record(u contract.ProgressUpdate) {
	e.Helper()
	if err := e.progressRecorder().RecordProgress(e.ctx, u); err != nil {
		e.Fatalf("RecordProgress(job %d, worker %q, claim %d): unexpected error: %v (the job is running under that worker and claim)", u.JobID, u.WorkerID, u.ClaimSeq, err)
	}
}

// expectLeaseLost calls RecordProgress, which must fail its fence with
// ErrLeaseLost and leave job before untouched.
func (e *env) expectLeaseLost(u contract.ProgressUpdate, before *contract.Job, why string) {
	e.Helper()
	err := e.progressRecorder().RecordProgress(e.ctx, u)
	if !errors.Is(err, contract.ErrLeaseLost) {
		e.Fatalf("RecordProgress(job %d, worker %q, claim %d) %s: error %v; want one wrapping ErrLeaseLost", u.JobID, u.WorkerID, u.ClaimSeq, why, err)
	}
	e.expectUnchanged(before, "a RecordProgress that failed its fence")
}

// expectProgress fails unless j's progress is percent and message at at.
func (e *env) expectProgress(j *contract.Job, percent float64, message string, at time.Time, what string) {
	e.Helper()
	want := &contract.Progress{Percent: percent, Message: message, At: at}
	if d := diffProgress(j.Progress, want); len(d) > 0 {
		e.Fatalf("%s: job %d's progress differs from what RecordProgress wrote:\n%s", what, j.ID, lines(d))
	}
}

// expectCheckpoint fails unless j's checkpoint means the JSON want ("" =
// none).
func (e *env) expectCheckpoint(j *contract.Job, want string, what string) {
	e.Helper()
	if want == "" {
		if j.Checkpoint != nil {
			e.Fatalf("%s: job %d has checkpoint %s; want none", what, j.ID, j.Checkpoint)
		}
		return
	}
	if j.Checkpoint == nil {
		e.Fatalf("%s: job %d has no checkpoint; want %s", what, j.ID, want)
	}
	if msg := diffJSON(j.Checkpoint, []byte(want)); msg != "" {
		e.Fatalf("%s: job %d's checkpoint: %s", what, j.ID, msg)
	}
}

func testProgressReturned(e *env) {
	j := e.claimJob(e.job("q", "k"), "w")
	if j.Progress != nil || j.Checkpoint != nil {
		e.Fatalf("a fresh job's claim returned progress %+v and checkpoint %s; want neither", j.Progress, j.Checkpoint)
	}
	e.advance(time.Second)
	recorded := e.now
	e.record(e.progressFor(j, 12.5, "step 1 of 8 ✓", `{"offset": 4096, "files": ["a", "b"]}`))
	e.advance(time.Second)
	got := e.get(j.ID)
	e.expectProgress(got, 12.5, "step 1 of 8 ✓", recorded, "Get after RecordProgress")
	e.expectCheckpoint(got, `{"offset": 4096, "files": ["a", "b"]}`, "Get after RecordProgress")
	if got.State != contract.StateRunning || got.ClaimSeq != j.ClaimSeq || !got.LeaseUntil.Equal(j.LeaseUntil) {
		e.Fatalf("RecordProgress changed the execution: state %q, claim %d, lease %s; want running, %d, %s", got.State, got.ClaimSeq, ts(got.LeaseUntil), j.ClaimSeq, ts(j.LeaseUntil))
	}
	listed := e.list(contract.ListParams{Queue: "q"})
	if len(listed) != 1 {
		e.Fatalf("List(queue q) returned %d jobs; want 1", len(listed))
	}
	e.expectProgress(listed[0], 12.5, "step 1 of 8 ✓", recorded, "List after RecordProgress")
	e.expectCheckpoint(listed[0], `{"offset": 4096, "files": ["a", "b"]}`, "List after RecordProgress")

	// Progress alone leaves the checkpoint; a checkpoint alone leaves the
	// progress; the JSON null clears the checkpoint.
	e.record(contract.ProgressUpdate{JobID: j.ID, WorkerID: j.WorkerID, ClaimSeq: j.ClaimSeq,
		Progress: &contract.Progress{Percent: 100, At: e.now.In(time.FixedZone("x", 3600))}})
	got = e.get(j.ID)
	e.expectProgress(got, 100, "", e.now, "Get after a second RecordProgress (a time not in UTC)")
	e.expectCheckpoint(got, `{"offset": 4096, "files": ["a", "b"]}`, "Get after a RecordProgress without a checkpoint")
	e.record(contract.ProgressUpdate{JobID: j.ID, WorkerID: j.WorkerID, ClaimSeq: j.ClaimSeq, Checkpoint: json.RawMessage(`[1,2,3]`)})
	got = e.get(j.ID)
	e.expectProgress(got, 100, "", e.now, "Get after a RecordProgress with a checkpoint only")
	e.expectCheckpoint(got, `[1,2,3]`, "Get after a RecordProgress with a checkpoint only")
	e.record(contract.ProgressUpdate{JobID: j.ID, WorkerID: j.WorkerID, ClaimSeq: j.ClaimSeq, Checkpoint: json.RawMessage(`null`)})
	e.expectCheckpoint(e.get(j.ID), "", "Get after a RecordProgress with the checkpoint null")
}

func testProgressStaleClaim(e *env) {
	first := e.claimJob(e.job("q", "k"), "w")
	// The same worker loses the job to a rescue and claims it again: only
	// the new claim may write.
	e.advance(2 * lease)
	e.rescue(10)
	second := e.claimOne("q", "w")
	if second.ID != first.ID || second.ClaimSeq <= first.ClaimSeq {
		e.Fatalf("setup: reclaim returned job %d at claim %d; want job %d at a claim after %d", second.ID, second.ClaimSeq, first.ID, first.ClaimSeq)
	}
	e.record(e.progressFor(second, 50, "new", `{"n":2}`))
	e.expectLeaseLost(e.progressFor(first, 90, "stale", `{"n":1}`), e.get(first.ID), "of an earlier claim of the same worker")
}

func testProgressOtherWorker(e *env) {
	j := e.claimJob(e.job("q", "k"), "w-a")
	u := e.progressFor(j, 10, "", `{}`)
	u.WorkerID = "w-b"
	e.expectLeaseLost(u, e.get(j.ID), "by a worker that does not hold the job")
	// A missing job fails the fence too.
	u = e.progressFor(j, 10, "", "")
	u.JobID = j.ID + 1000
	if err := e.progressRecorder().RecordProgress(e.ctx, u); !errors.Is(err, contract.ErrLeaseLost) {
		e.Fatalf("RecordProgress of missing job %d: error %v; want one wrapping ErrLeaseLost", u.JobID, err)
	}
}

func testProgressNotRunning(e *env) {
	j := e.claimJob(e.job("q", "k"), "w")
	e.apply(e.outcome(j, contract.OutcomeComplete))
	e.expectLeaseLost(e.progressFor(j, 100, "late", `{"late":true}`), e.get(j.ID), "of a completed job")

	pending := e.insertOne(e.job("q2", "k"))
	u := contract.ProgressUpdate{JobID: pending.ID, WorkerID: "", ClaimSeq: 0,
		Progress: &contract.Progress{Percent: 1, At: e.now}}
	e.expectLeaseLost(u, e.get(pending.ID), "of a job never claimed")
}

func testProgressBounds(e *env) {
	j := e.claimJob(e.job("q", "k"), "w")
	r := e.progressRecorder()
	before := e.get(j.ID)
	bad := map[string]contract.ProgressUpdate{
		"neither progress nor checkpoint": {},
		"percent below 0":                 e.progressFor(j, -1, "", ""),
		"percent above 100":               e.progressFor(j, 100.5, "", ""),
		"percent NaN":                     e.progressFor(j, math.NaN(), "", ""),
		"message too long":                e.progressFor(j, 1, strings.Repeat("x", contract.MaxProgressMessageLen+1), ""),
		"message not UTF-8":               e.progressFor(j, 1, "\xff", ""),
		"progress without a time":         {Progress: &contract.Progress{Percent: 1}},
		"checkpoint not JSON":             {Checkpoint: json.RawMessage(`{"a":`)},
		"checkpoint too large":            {Checkpoint: json.RawMessage(`"` + strings.Repeat("x", contract.MaxCheckpointBytes) + `"`)},
	}
	for why, u := range bad {
		u.JobID, u.WorkerID, u.ClaimSeq = j.ID, j.WorkerID, j.ClaimSeq
		if err := r.RecordProgress(e.ctx, u); !errors.Is(err, contract.ErrInvalidArgument) {
			e.Fatalf("RecordProgress with %s: error %v; want one wrapping ErrInvalidArgument", why, err)
		}
	}
	e.expectUnchanged(before, "a RecordProgress with an invalid argument")
	// The bounds themselves are allowed.
	cp := `"` + strings.Repeat("é", (contract.MaxCheckpointBytes-2)/2) + `"`
	e.record(e.progressFor(j, 100, strings.Repeat("é", contract.MaxProgressMessageLen/2), cp))
	got := e.get(j.ID)
	e.expectProgress(got, 100, strings.Repeat("é", contract.MaxProgressMessageLen/2), e.now, "a message of MaxProgressMessageLen bytes")
	e.expectCheckpoint(got, cp, "a checkpoint of MaxCheckpointBytes")
}

func testProgressClearedAtClaim(e *env) {
	j := e.claimJob(e.job("q", "k"), "w")
	e.record(e.progressFor(j, 40, "halfway", `{"at":40}`))
	o := e.outcome(j, contract.OutcomeRetry)
	o.Error = &contract.AttemptError{Attempt: j.Attempt, At: e.now, Error: "boom"}
	e.apply(o)
	got := e.get(j.ID)
	e.expectProgress(got, 40, "halfway", e.now, "Get of the retryable job (progress stays until the next claim)")
	e.advance(time.Second)
	next := e.claimOne("q", "w")
	if next.Progress != nil {
		e.Fatalf("Claim returned job %d with progress %+v; a claim clears the progress of the attempt before", next.ID, next.Progress)
	}
	if g := e.get(j.ID); g.Progress != nil {
		e.Fatalf("Get after the claim: job %d has progress %+v; a claim clears the progress of the attempt before", g.ID, g.Progress)
	}
}

func testCheckpointSurvives(e *env) {
	j := e.claimJob(e.job("q", "k"), "w")
	e.record(e.progressFor(j, 30, "", `{"page":3}`))
	o := e.outcome(j, contract.OutcomeRetry)
	o.Error = &contract.AttemptError{Attempt: j.Attempt, At: e.now, Error: "boom"}
	e.apply(o)
	second := e.claimOne("q", "w")
	e.expectCheckpoint(second, `{"page":3}`, "Claim after a failed attempt")

	e.record(e.progressFor(second, 60, "", `{"page":6}`))
	e.advance(2 * lease)
	rescued := e.rescue(10)
	if len(rescued) != 1 {
		e.Fatalf("setup: Rescue returned %d jobs; want the 1 expired one", len(rescued))
	}
	e.expectCheckpoint(rescued[0], `{"page":6}`, "Rescue's returned job")
	third := e.claimOne("q", "w")
	e.expectCheckpoint(third, `{"page":6}`, "Claim after a rescue")

	// A snooze keeps it too, and so does a completion (for inspection).
	e.apply(e.outcome(third, contract.OutcomeSnooze))
	fourth := e.claimOne("q", "w")
	e.expectCheckpoint(fourth, `{"page":6}`, "Claim after a snooze")
	e.apply(e.outcome(fourth, contract.OutcomeComplete))
	e.expectCheckpoint(e.get(j.ID), `{"page":6}`, "Get of the completed job")
}

func testCheckpointContinue(e *env) {
	j := e.claimJob(e.job("q", "step-1"), "w")
	e.record(e.progressFor(j, 99, "", `{"step1":"done"}`))
	o := e.outcome(j, contract.OutcomeContinue)
	o.NextKind, o.NextArgs = "step-2", []byte(`{}`)
	e.apply(o)
	e.expectCheckpoint(e.get(j.ID), "", "Get after OutcomeContinue")
	next := e.claimOne("q", "w")
	e.expectCheckpoint(next, "", "Claim of the next step")
	if next.Kind != "step-2" {
		e.Fatalf("setup: claimed kind %q; want step-2", next.Kind)
	}
}
