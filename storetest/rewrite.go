package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
)

var rewriteTests = []test{
	{"rewrite/visits-jobs-not-running-in-id-order", testRewriteWalk},
	{"rewrite/writes-args-result-and-errors-only", testRewriteWrites},
	{"rewrite/never-touches-running-jobs", testRewriteRunning},
	{"rewrite/skips-a-row-claimed-since-read", testRewriteClaimedMeanwhile},
	{"rewrite/skips-a-row-changed-since-read", testRewriteChangedMeanwhile},
	{"rewrite/respects-limit", testRewriteLimit},
	{"rewrite/fn-error-writes-nothing-of-the-batch", testRewriteFnError},
	{"rewrite/refuses-what-it-cannot-store", testRewriteRefuses},
}

// rewriter returns the store's contract.SealedRewriter, skipping when it has
// none.
func (e *env) rewriter() contract.SealedRewriter {
	e.Helper()
	rw, ok := e.s.(contract.SealedRewriter)
	if !ok {
		e.Skip("the store does not implement contract.SealedRewriter")
	}
	return rw
}

// rewriteFn is what RewriteSealed calls for each job.
type rewriteFn = func(j *contract.Job) (*contract.Job, bool, error)

// rewrite calls RewriteSealed once and checks the shape of the answer:
// the jobs fn saw are above afterID, in ascending id order, at most limit
// of them, none running, and lastID is the last of them (afterID when
// there were none). It returns the jobs fn saw and the count written.
func (e *env) rewrite(rw contract.SealedRewriter, afterID int64, limit int, fn rewriteFn) (seen []*contract.Job, n int) {
	e.Helper()
	lastID, n, err := rw.RewriteSealed(e.ctx, afterID, limit, func(j *contract.Job) (*contract.Job, bool, error) {
		if j == nil {
			return nil, false, errors.New("storetest: fn was called with a nil job")
		}
		seen = append(seen, cloneJob(j))
		return fn(j)
	})
	if err != nil {
		e.Fatalf("RewriteSealed(afterID %d, limit %d): unexpected error: %v", afterID, limit, err)
	}
	prev := afterID
	for _, j := range seen {
		if j.ID <= prev {
			e.Fatalf("RewriteSealed(afterID %d) called fn with job %d after job %d; want ids above afterID in ascending order", afterID, j.ID, prev)
		}
		if j.State == contract.StateRunning {
			e.Fatalf("RewriteSealed called fn with job %d, which is running; running jobs are never read", j.ID)
		}
		prev = j.ID
	}
	if len(seen) > limit {
		e.Fatalf("RewriteSealed with limit %d called fn %d times; want at most limit", limit, len(seen))
	}
	if lastID != prev {
		e.Fatalf("RewriteSealed(afterID %d) returned lastID %d after calling fn for jobs %v; want the id of the last job read (afterID when none)", afterID, lastID, ids(seen))
	}
	if n < 0 || n > len(seen) {
		e.Fatalf("RewriteSealed returned n=%d after calling fn %d times; n counts the rows written, at most one per job read", n, len(seen))
	}
	return seen, n
}

// walkRewrite pages through the whole table with RewriteSealed and
// returns every job fn saw and how many rows were written.
func (e *env) walkRewrite(rw contract.SealedRewriter, limit int, fn rewriteFn) (seen []*contract.Job, n int) {
	e.Helper()
	after := int64(0)
	for calls := 0; ; calls++ {
		if calls > 1000 {
			e.Fatalf("RewriteSealed walk did not end after %d calls (lastID must move on, and equal afterID once no job is left)", calls)
		}
		got, k := e.rewrite(rw, after, limit, fn)
		seen, n = append(seen, got...), n+k
		if len(got) == 0 {
			return seen, n
		}
		after = got[len(got)-1].ID
	}
}

// cloneJob copies the parts of j that fn may change.
func cloneJob(j *contract.Job) *contract.Job {
	c := *j
	c.Args = slices.Clone(j.Args)
	c.Result = slices.Clone(j.Result)
	c.Errors = slices.Clone(j.Errors)
	return &c
}

// Two keyrings: before and after a rotation from k1 to k2.
func rotationKeyrings(e *env) (old, rotated *core.Keyring) {
	e.Helper()
	k1, k2 := bytes.Repeat([]byte{1}, core.KeySize), bytes.Repeat([]byte{2}, core.KeySize)
	old, err := core.NewKeyring("k1", map[string][]byte{"k1": k1})
	if err != nil {
		e.Fatal(err)
	}
	rotated, err = core.NewKeyring("k2", map[string][]byte{"k1": k1, "k2": k2})
	if err != nil {
		e.Fatal(err)
	}
	return old, rotated
}

// resealFn reseals every sealed value of a job with ring's current key and
// reports whether any changed, as `backlog keys rotate` does.
func resealFn(ring *core.Keyring) rewriteFn {
	return func(j *contract.Job) (*contract.Job, bool, error) {
		changed := false
		if contract.IsSealed(j.Args) {
			args, c, err := ring.ResealArgs(j.Kind, j.Args)
			if err != nil {
				return nil, false, err
			}
			j.Args, changed = args, changed || c
		}
		if j.Result != nil && contract.IsSealed(j.Result) {
			res, c, err := ring.ResealResult(j.Kind, j.Result)
			if err != nil {
				return nil, false, err
			}
			j.Result, changed = res, changed || c
		}
		for i, ae := range j.Errors {
			if !contract.IsSealedText(ae.Error) && !contract.IsSealedText(ae.Trace) {
				continue
			}
			re, c, err := ring.ResealAttemptError(ae)
			if err != nil {
				return nil, false, err
			}
			j.Errors[i], changed = re, changed || c
		}
		return j, changed, nil
	}
}

// setArgs returns an fn that writes args for every job it sees.
func setArgs(args string) rewriteFn {
	return func(j *contract.Job) (*contract.Job, bool, error) {
		j.Args = []byte(args)
		return j, true, nil
	}
}

// unchangedFn changes nothing.
func unchangedFn(j *contract.Job) (*contract.Job, bool, error) { return j, false, nil }

// sealedJobs makes one job in each state, in this id order: scheduled,
// available, running, retryable (sealed error entry), completed (sealed
// result), cancelled, running, discarded (sealed error entry), and
// available with plain args. Args of all but the last are sealed with
// old's key k1. Each job has its own queue, so tests can claim one.
func sealedJobs(e *env, old *core.Keyring) []*contract.Job {
	e.Helper()
	var out []*contract.Job
	p := func(i int, kind string) contract.InsertParams {
		p := e.job(fmt.Sprintf("rw%d", i), kind)
		p.Args = old.SealArgs(kind, fmt.Appendf(nil, `{"n":%d,"secret":"s%d"}`, i, i))
		return p
	}
	claimed := func(i int, kind string) *contract.Job { return e.claimJob(p(i, kind), "w") }
	failed := func(j *contract.Job, k contract.OutcomeKind) {
		o := e.outcome(j, k)
		o.RunAt = e.now.Add(time.Hour)
		o.Error = new(old.SealAttemptError(contract.AttemptError{Attempt: j.Attempt, At: e.now, Error: "declined " + j.Kind, Trace: "trace " + j.Kind, Cause: "handler"}))
		e.apply(o)
	}

	sched := p(0, "scheduled")
	sched.RunAt = e.now.Add(time.Hour)
	out = append(out, e.insertOne(sched))
	out = append(out, e.insertOne(p(1, "available")))
	out = append(out, claimed(2, "running"))
	r := claimed(3, "retryable")
	failed(r, contract.OutcomeRetry)
	out = append(out, r)
	c := claimed(4, "completed")
	o := e.outcome(c, contract.OutcomeComplete)
	o.Result = old.SealResult(c.Kind, []byte("result of 4"))
	e.apply(o)
	out = append(out, c)
	x := e.insertOne(p(5, "cancelled"))
	if _, err := e.s.Cancel(e.ctx, x.ID, e.now); err != nil {
		e.Fatalf("Cancel of job %d: %v", x.ID, err)
	}
	out = append(out, x)
	out = append(out, claimed(6, "running"))
	d := claimed(7, "discarded")
	failed(d, contract.OutcomeDiscard)
	out = append(out, d)
	plain := e.job("rw8", "plain")
	plain.Args = []byte(`{"n":8}`)
	out = append(out, e.insertOne(plain))
	for i, j := range out {
		out[i] = e.get(j.ID)
	}
	return out
}

func notRunning(jobs []*contract.Job) []*contract.Job {
	var out []*contract.Job
	for _, j := range jobs {
		if j.State != contract.StateRunning {
			out = append(out, j)
		}
	}
	return out
}

// testRewriteWalk: a walk by afterID visits every job that is not
// running exactly once, in id order, hands fn the job as stored, and ends
// with lastID == afterID; a walk from the middle starts after afterID.
func testRewriteWalk(e *env) {
	rw := e.rewriter()
	old, _ := rotationKeyrings(e)
	jobs := sealedJobs(e, old)
	want := notRunning(jobs)
	for _, limit := range []int{1, 2, 3, 100} {
		seen, n := e.walkRewrite(rw, limit, unchangedFn)
		if n != 0 {
			e.Fatalf("a walk whose fn changed nothing wrote %d rows; want 0", n)
		}
		if !slices.Equal(ids(seen), ids(want)) {
			e.Fatalf("a walk with limit %d called fn for jobs %v; want %v: every job not running, once, in id order (jobs %v are running)", limit, ids(seen), ids(want), ids(runningOf(jobs)))
		}
		for i, j := range seen {
			if d := diffJob(j, want[i]); len(d) > 0 {
				e.Fatalf("fn received job %d unlike Get returns it; fn must get the job as stored:\n%s", j.ID, lines(d))
			}
			if j.ClaimSeq != want[i].ClaimSeq {
				e.Fatalf("fn received job %d with ClaimSeq %d; Get returns %d", j.ID, j.ClaimSeq, want[i].ClaimSeq)
			}
		}
	}
	mid := want[2].ID
	seen, _ := e.rewrite(rw, mid, 100, unchangedFn)
	if !slices.Equal(ids(seen), ids(want[3:])) {
		e.Fatalf("RewriteSealed(afterID %d) called fn for jobs %v; want %v, the jobs above afterID that are not running", mid, ids(seen), ids(want[3:]))
	}
	last := jobs[len(jobs)-1].ID
	if seen, _ := e.rewrite(rw, last, 100, unchangedFn); len(seen) != 0 {
		e.Fatalf("RewriteSealed after the last job read %v; want none", ids(seen))
	}
}

func runningOf(jobs []*contract.Job) []*contract.Job {
	var out []*contract.Job
	for _, j := range jobs {
		if j.State == contract.StateRunning {
			out = append(out, j)
		}
	}
	return out
}

// testRewriteWrites: after a walk that reseals with k2, every sealed
// value of the jobs not running is under k2 and opens to what it held;
// jobs fn left alone are untouched; and nothing but args, result and the
// error texts changed, whatever else fn set on the job it returned.
func testRewriteWrites(e *env) {
	rw := e.rewriter()
	old, rotated := rotationKeyrings(e)
	jobs := sealedJobs(e, old)
	reseal := resealFn(rotated)
	sealedCount := 0
	_, n := e.walkRewrite(rw, 2, func(j *contract.Job) (*contract.Job, bool, error) {
		next, changed, err := reseal(j)
		if changed {
			sealedCount++
			// Fields other than args, result and errors must be ignored.
			next.Queue, next.Kind, next.State, next.Priority, next.Attempt = "elsewhere", "other-kind", contract.StateCompleted, 1, 99
			next.ClaimSeq, next.WorkerID, next.RunAt, next.UniqueKey = 42, "someone", e.now.Add(time.Hour), "uk"
			for i := range next.Errors {
				next.Errors[i].At = next.Errors[i].At.Add(time.Minute)
				next.Errors[i].Attempt += 10
				next.Errors[i].Cause = "changed"
			}
		}
		return next, changed, err
	})
	if n != sealedCount {
		e.Fatalf("a walk whose fn changed %d jobs reported %d rows written; want %d (no job was changed by anyone else)", sealedCount, n, sealedCount)
	}
	for _, before := range jobs {
		got := e.get(before.ID)
		if before.State == contract.StateRunning || !contract.IsSealed(before.Args) {
			if d := diffJob(got, before); len(d) > 0 || got.ClaimSeq != before.ClaimSeq {
				e.Fatalf("%s job %d changed, but fn never changed it (running, or plain args):\n%s", before.State, before.ID, lines(d))
			}
			continue
		}
		checkResealed(e, got, before, old, rotated)
	}
}

// checkResealed fails unless got is before with every sealed value under
// rotated's current key and opening to what it held under old, and
// everything else exactly as it was (times, attempts, causes included).
func checkResealed(e *env, got, before *contract.Job, old, rotated *core.Keyring) {
	e.Helper()
	want := *before
	want.Args, want.Result = got.Args, got.Result
	want.Errors = slices.Clone(before.Errors)
	for i := range want.Errors {
		if i < len(got.Errors) {
			want.Errors[i].Error, want.Errors[i].Trace = got.Errors[i].Error, got.Errors[i].Trace
		}
	}
	if d := diffJob(got, &want); len(d) > 0 || got.ClaimSeq != before.ClaimSeq {
		if got.ClaimSeq != before.ClaimSeq {
			d = append(d, fmt.Sprintf("ClaimSeq: got %d, want %d", got.ClaimSeq, before.ClaimSeq))
		}
		e.Fatalf("%s job %d: RewriteSealed changed more than args, result and error text (everything else of the row, and of each error entry, stays as it was, whatever fn set):\n%s", before.State, before.ID, lines(d))
	}
	for i := range got.Errors {
		if got.Errors[i].Cause != before.Errors[i].Cause {
			e.Fatalf("job %d: error entry %d has Cause %q after the rewrite; want %q (only Error and Trace text are written)", before.ID, i, got.Errors[i].Cause, before.Errors[i].Cause)
		}
	}
	openedBefore, err := old.OpenJob(before)
	if err != nil {
		e.Fatalf("suite bug: job %d does not open with k1: %v", before.ID, err)
	}
	openedAfter, err := rotated.OpenJob(got)
	if err != nil {
		e.Fatalf("job %d: its rewritten values do not open (the store must keep args, result bytes and error text as written): %v", before.ID, err)
	}
	if msg := diffJSON(openedAfter.Args, openedBefore.Args); msg != "" {
		e.Fatalf("job %d: rewritten args open to other args: %s", before.ID, msg)
	}
	if !bytes.Equal(openedAfter.Result, openedBefore.Result) {
		e.Fatalf("job %d: rewritten result opens to %q; want %q", before.ID, openedAfter.Result, openedBefore.Result)
	}
	for i := range got.Errors {
		if openedAfter.Errors[i].Error != openedBefore.Errors[i].Error || openedAfter.Errors[i].Trace != openedBefore.Errors[i].Trace {
			e.Fatalf("job %d: rewritten error entry %d opens to %+v; want %+v", before.ID, i, openedAfter.Errors[i], openedBefore.Errors[i])
		}
	}
	for what, v := range map[string][]byte{"args": got.Args, "result": got.Result} {
		if v == nil {
			continue
		}
		if kid, ok := core.SealedKeyID(v); !ok || kid != "k2" {
			e.Fatalf("job %d: %s are under key %q after the rewrite; want k2: %q", before.ID, what, kid, v)
		}
	}
	for i, ae := range got.Errors {
		if kid, ok := core.SealedKeyID([]byte(ae.Error)); !ok || kid != "k2" {
			e.Fatalf("job %d: error entry %d is under key %q after the rewrite; want k2", before.ID, i, kid)
		}
	}
}

// testRewriteRunning: running jobs are never handed to fn nor written,
// and their holders' fences still pass after a walk.
func testRewriteRunning(e *env) {
	rw := e.rewriter()
	old, rotated := rotationKeyrings(e)
	jobs := sealedJobs(e, old)
	running := runningOf(jobs)
	if len(running) != 2 {
		e.Fatalf("suite bug: %d running jobs", len(running))
	}
	fn := resealFn(rotated)
	seen, _ := e.walkRewrite(rw, 1, func(j *contract.Job) (*contract.Job, bool, error) {
		if j.State == contract.StateRunning {
			return nil, false, fmt.Errorf("storetest: fn got running job %d", j.ID)
		}
		return fn(j)
	})
	for _, j := range seen {
		for _, r := range running {
			if j.ID == r.ID {
				e.Fatalf("RewriteSealed handed running job %d to fn; running jobs are never read", j.ID)
			}
		}
	}
	for _, r := range running {
		e.expectUnchanged(r, "RewriteSealed (running jobs are never touched)")
		if got := e.get(r.ID); got.ClaimSeq != r.ClaimSeq {
			e.Fatalf("running job %d has ClaimSeq %d after RewriteSealed; want %d", r.ID, got.ClaimSeq, r.ClaimSeq)
		}
		o := e.outcome(r, contract.OutcomeComplete)
		if !e.finish(o)[0].Applied {
			e.Fatalf("Finish of running job %d by its holder failed after RewriteSealed; the rewrite must leave running jobs and their fences alone", r.ID)
		}
	}
}

// testRewriteClaimedMeanwhile: a job claimed between the read and the
// write keeps the args it was claimed with, stays running under its
// claim, and is not counted; the other jobs of the batch are written.
func testRewriteClaimedMeanwhile(e *env) {
	rw := e.rewriter()
	a := e.insertOne(e.job("claimed", "k"))
	b := e.insertOne(e.job("other", "k"))
	var claimed *contract.Job
	_, n := e.rewrite(rw, 0, 10, func(j *contract.Job) (*contract.Job, bool, error) {
		if j.ID == a.ID {
			claimed = e.claimOne("claimed", "w")
		}
		j.Args = []byte(`{"rewritten":true}`)
		return j, true, nil
	})
	if claimed == nil || claimed.ID != a.ID {
		e.Fatalf("suite bug: job %d was not claimed inside fn", a.ID)
	}
	if n != 1 {
		e.Fatalf("RewriteSealed wrote %d rows; want 1: job %d was claimed after it was read, so its write must fail the fence and not be counted", n, a.ID)
	}
	got := e.get(a.ID)
	if got.State != contract.StateRunning || got.ClaimSeq != claimed.ClaimSeq || got.WorkerID != "w" {
		e.Fatalf("job %d claimed during RewriteSealed is %s at ClaimSeq %d by %q; want running at ClaimSeq %d by \"w\"", a.ID, got.State, got.ClaimSeq, got.WorkerID, claimed.ClaimSeq)
	}
	if msg := diffJSON(got.Args, a.Args); msg != "" {
		e.Fatalf("job %d was claimed between RewriteSealed's read and write, and its args were overwritten anyway (the write must be fenced by state, ClaimSeq and args): %s", a.ID, msg)
	}
	if msg := diffJSON(e.get(b.ID).Args, []byte(`{"rewritten":true}`)); msg != "" {
		e.Fatalf("job %d, unchanged since the read, was not rewritten: %s", b.ID, msg)
	}
	if !e.finish(e.outcome(claimed, contract.OutcomeComplete))[0].Applied {
		e.Fatalf("Finish of job %d by the worker that claimed it during RewriteSealed failed; its claim must be intact", a.ID)
	}
}

// testRewriteChangedMeanwhile: rows cancelled, retried, deleted,
// rewritten by another caller, or claimed and handed back (same state and
// args, later ClaimSeq) between the read and the write are left as they
// now are and not counted.
func testRewriteChangedMeanwhile(e *env) {
	rw := e.rewriter()
	cancelled := e.insertOne(e.job("q1", "k"))
	retried := e.claimJob(e.job("q2", "k"), "w")
	o := e.outcome(retried, contract.OutcomeDiscard)
	o.Error = &contract.AttemptError{Attempt: 1, At: e.now, Error: "boom"}
	e.apply(o)
	deleted := e.insertOne(e.job("q3", "k"))
	raced := e.insertOne(e.job("q4", "k"))
	handedBack := e.insertOne(e.job("q5", "k"))
	kept := e.insertOne(e.job("q6", "k"))

	inner := 0
	_, n := e.rewrite(rw, 0, 10, func(j *contract.Job) (*contract.Job, bool, error) {
		var err error
		switch j.ID {
		case cancelled.ID:
			_, err = e.s.Cancel(e.ctx, j.ID, e.now)
		case retried.ID:
			_, err = e.s.Retry(e.ctx, j.ID, e.now)
		case deleted.ID:
			err = e.s.Delete(e.ctx, j.ID)
		case handedBack.ID:
			// Claimed and handed back: the same state and args, a later ClaimSeq.
			c := e.claimOne("q5", "w")
			o := e.outcome(c, contract.OutcomeSnooze)
			e.apply(o)
		case raced.ID:
			// Another rewriter gets there first.
			var k int
			_, k, err = rw.RewriteSealed(e.ctx, j.ID-1, 1, setArgs(`{"by":"the other rewriter"}`))
			inner += k
		}
		if err != nil {
			return nil, false, fmt.Errorf("storetest: changing job %d inside fn: %w", j.ID, err)
		}
		j.Args = []byte(`{"by":"the walk"}`)
		return j, true, nil
	})
	if inner != 1 {
		e.Fatalf("a RewriteSealed called from inside fn wrote %d rows; want 1 (the store holds no lock while fn runs)", inner)
	}
	if n != 1 {
		e.Fatalf("RewriteSealed wrote %d rows; want 1: of the 6 jobs read, 5 changed before the write (cancelled, retried, deleted, rewritten by another caller, claimed and handed back) and must be skipped", n)
	}
	for _, c := range []struct {
		job  *contract.Job
		what string
		args string
	}{
		{cancelled, "cancelled", `{}`},
		{retried, "retried", `{}`},
		{raced, "rewritten by another caller", `{"by":"the other rewriter"}`},
		{handedBack, "claimed and handed back", `{}`},
		{kept, "left alone", `{"by":"the walk"}`},
	} {
		got := e.get(c.job.ID)
		if msg := diffJSON(got.Args, []byte(c.args)); msg != "" {
			e.Fatalf("job %d, %s between RewriteSealed's read and write: args %s (a row changed since the read is skipped, not overwritten)", c.job.ID, c.what, msg)
		}
	}
	e.expectState(cancelled.ID, contract.StateCancelled, "cancelled inside fn; the rewrite must not undo it")
	e.expectState(retried.ID, contract.StateAvailable, "retried inside fn; the rewrite must not undo it")
	if j, err := e.s.Get(e.ctx, deleted.ID); !errors.Is(err, contract.ErrNotFound) {
		e.Fatalf("job %d, deleted inside fn, came back from Get as %+v, %s; the rewrite must not recreate a row", deleted.ID, j, errMsg(err))
	}
}

// testRewriteLimit: one call reads at most limit jobs, and lastID is the
// last of them.
func testRewriteLimit(e *env) {
	rw := e.rewriter()
	var jobs []*contract.Job
	for i := range 5 {
		jobs = append(jobs, e.insertOne(e.job(fmt.Sprintf("q%d", i), "k")))
	}
	for limit := 1; limit <= 6; limit++ {
		seen, n := e.rewrite(rw, 0, limit, setArgs(fmt.Sprintf(`{"limit":%d}`, limit)))
		want := jobs[:min(limit, len(jobs))]
		if !slices.Equal(ids(seen), ids(want)) || n != len(want) {
			e.Fatalf("RewriteSealed(afterID 0, limit %d) read %v and wrote %d; want %v and %d", limit, ids(seen), n, ids(want), len(want))
		}
		for i, j := range jobs {
			args := e.get(j.ID).Args
			if i < limit && diffJSON(args, fmt.Appendf(nil, `{"limit":%d}`, limit)) != "" {
				e.Fatalf("job %d, within limit %d, was not written: args %s", j.ID, limit, args)
			}
			if i >= limit && diffJSON(args, fmt.Appendf(nil, `{"limit":%d}`, limit)) == "" {
				e.Fatalf("job %d, beyond limit %d, was written", j.ID, limit)
			}
		}
	}
}

var errStop = errors.New("storetest: fn stops the batch")

// testRewriteFnError: an fn error stops the batch at once: nothing of it
// is written, not even rows fn rewrote before the error, and the call
// returns afterID, 0 and fn's error.
func testRewriteFnError(e *env) {
	rw := e.rewriter()
	var jobs []*contract.Job
	for i := range 4 {
		jobs = append(jobs, e.insertOne(e.job(fmt.Sprintf("q%d", i), "k")))
	}
	after := jobs[0].ID
	var calls []int64
	lastID, n, err := rw.RewriteSealed(e.ctx, after, 10, func(j *contract.Job) (*contract.Job, bool, error) {
		calls = append(calls, j.ID)
		if j.ID == jobs[2].ID {
			return nil, false, errStop
		}
		j.Args = []byte(`{"written":true}`)
		return j, true, nil
	})
	if !errors.Is(err, errStop) {
		e.Fatalf("RewriteSealed whose fn failed returned %s; want fn's error (errors.Is)", errMsg(err))
	}
	if lastID != after || n != 0 {
		e.Fatalf("RewriteSealed whose fn failed returned lastID %d, n %d; want afterID %d and 0 (nothing of the batch written)", lastID, n, after)
	}
	if !slices.Equal(calls, []int64{jobs[1].ID, jobs[2].ID}) {
		e.Fatalf("fn was called for jobs %v; want %v: no call after the one that failed", calls, []int64{jobs[1].ID, jobs[2].ID})
	}
	for _, j := range jobs {
		e.expectUnchanged(j, "a RewriteSealed whose fn failed (no row of the batch is written)")
	}
	// The same call with an fn that succeeds then does the work.
	if _, n := e.rewrite(rw, after, 10, setArgs(`{"written":true}`)); n != 3 {
		e.Fatalf("RewriteSealed retried after an fn error wrote %d rows; want 3", n)
	}
}

// testRewriteRefuses: a limit below 1, or a next the store cannot keep,
// is an error that writes nothing of the batch.
func testRewriteRefuses(e *env) {
	rw := e.rewriter()
	p := e.job("q", "k")
	first := e.insertOne(p)
	retry := e.claimJob(e.job("r", "k"), "w")
	o := e.outcome(retry, contract.OutcomeRetry)
	o.Error = &contract.AttemptError{Attempt: 1, At: e.now, Error: "boom"}
	e.apply(o)
	second := e.get(retry.ID)

	called := false
	if _, _, err := rw.RewriteSealed(e.ctx, 0, 0, func(j *contract.Job) (*contract.Job, bool, error) {
		called = true
		return j, false, nil
	}); err == nil || called {
		e.Fatalf("RewriteSealed with limit 0 returned %s and called fn: %v; want an error and no call", errMsg(err), called)
	}
	for _, c := range []struct {
		what   string
		mangle func(j *contract.Job) *contract.Job
	}{
		{"a nil job with changed true", func(*contract.Job) *contract.Job { return nil }},
		{"args that are not JSON", func(j *contract.Job) *contract.Job { j.Args = []byte(`{"broken`); return j }},
		{"an error entry added", func(j *contract.Job) *contract.Job {
			j.Errors = append(j.Errors, contract.AttemptError{Attempt: 9, At: e.now, Error: "made up"})
			return j
		}},
		{"the error entries dropped", func(j *contract.Job) *contract.Job { j.Errors = nil; return j }},
	} {
		lastID, n, err := rw.RewriteSealed(e.ctx, 0, 10, func(j *contract.Job) (*contract.Job, bool, error) {
			j.Args = []byte(`{"written":true}`)
			if j.ID == second.ID {
				return c.mangle(j), true, nil
			}
			return j, true, nil
		})
		if err == nil || lastID != 0 || n != 0 {
			e.Fatalf("RewriteSealed whose fn returned %s returned lastID %d, n %d, %s; want 0, 0 and an error", c.what, lastID, n, errMsg(err))
		}
		e.expectUnchanged(first, "a RewriteSealed that failed on another job of its batch ("+c.what+")")
		e.expectUnchanged(second, "a RewriteSealed whose fn returned "+c.what)
	}
}
