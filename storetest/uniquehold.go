package storetest

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

var uniqueHoldTests = []test{
	{"unique-holds/list-shows-held-keys", testUniqueHoldsList},
	{"unique-holds/list-pages-by-scoped-key", testUniqueHoldsPaging},
	{"unique-holds/release-frees-a-gone-holders-key", testUniqueHoldReleaseGone},
	{"unique-holds/release-refuses-live-and-ended-holds", testUniqueHoldReleaseRefused},
	{"unique-holds/fingerprint-kept-with-the-hold", testUniqueFingerprint},
	{"unique-holds/release-racing-inserts-fails-none", testUniqueHoldReleaseRace},
}

// uniqueHolder returns the store as a contract.UniqueHolder, or skips.
func (e *env) uniqueHolder() contract.UniqueHolder {
	u, ok := e.s.(contract.UniqueHolder)
	if !ok {
		e.Skip("the store does not implement contract.UniqueHolder")
	}
	return u
}

// holds lists every hold held at e.now, following the cursor with pages
// of limit.
func (e *env) holds(limit int) []contract.UniqueHold {
	e.Helper()
	u := e.uniqueHolder()
	var all []contract.UniqueHold
	after := ""
	for range 1000 {
		page, next, err := u.UniqueHolds(e.ctx, contract.UniqueHoldsParams{Now: e.now, After: after, Limit: limit})
		if err != nil {
			e.Fatalf("UniqueHolds(after %q, limit %d): unexpected error: %v", after, limit, err)
		}
		if len(page) > limit {
			e.Fatalf("UniqueHolds with Limit %d returned %d holds", limit, len(page))
		}
		for _, h := range page {
			if h.ScopedKey <= after {
				e.Fatalf("UniqueHolds(after %q) returned hold %q; want only scoped keys after the cursor", after, h.ScopedKey)
			}
			after = h.ScopedKey
		}
		all = append(all, page...)
		if next == "" {
			return all
		}
		if next < after {
			e.Fatalf("UniqueHolds returned next %q before its last hold %q", next, after)
		}
		after = next
	}
	e.Fatalf("UniqueHolds: the cursor never reached the end")
	return nil
}

// holdKeys returns the scoped keys of hs.
func holdKeys(hs []contract.UniqueHold) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.ScopedKey
	}
	return out
}

// testUniqueHoldsList: UniqueHolds returns the holds held at now, in
// scoped-key order, with their holder, state and end: a live holder (no
// end), a final one inside its window, one whose row was deleted (gone,
// ending at FinishedAt+UniqueFor); not a hold whose window is over, nor
// keys of jobs without one.
func testUniqueHoldsList(e *env) {
	live := e.insertOne(scopedJob(e, "waiting", "k", "live", contract.UniqueGlobal, window))
	done := e.claimJob(scopedJob(e, "mail", "send", "done", contract.UniqueQueue, window), "w")
	e.apply(e.outcome(done, contract.OutcomeComplete))
	gone := e.claimJob(scopedJob(e, "q", "report", "gone", contract.UniqueKind, 2*window), "w")
	o := e.outcome(gone, contract.OutcomeComplete)
	o.Delete = true
	e.apply(o)
	ended := e.claimJob(scopedJob(e, "q", "k", "ended", contract.UniqueGlobal, time.Minute), "w")
	e.apply(e.outcome(ended, contract.OutcomeComplete))
	e.insertOne(e.job("waiting", "k")) // no key, no hold
	finishedAt := e.now
	e.advance(2 * time.Minute)

	got := e.holds(100)
	want := []contract.UniqueHold{
		{ScopedKey: "g:live", Key: "live", Scope: contract.UniqueGlobal, Queue: "waiting", Kind: "k", JobID: live.ID, State: contract.StateAvailable, UniqueFor: window},
		{ScopedKey: "k6:report:gone", Key: "gone", Scope: contract.UniqueKind, Queue: "q", Kind: "report", JobID: gone.ID, JobGone: true, UniqueFor: 2 * window, Until: finishedAt.Add(2 * window)},
		{ScopedKey: "q4:mail:done", Key: "done", Scope: contract.UniqueQueue, Queue: "mail", Kind: "send", JobID: done.ID, State: contract.StateCompleted, UniqueFor: window, Until: finishedAt.Add(window)},
	}
	if len(got) != len(want) {
		e.Fatalf("UniqueHolds at %s returned holds %q; want %q (held keys in scoped-key order; not the hold whose window ended, not a job without a key)", ts(e.now), holdKeys(got), holdKeys(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.ScopedKey != w.ScopedKey || g.Key != w.Key || g.Scope != w.Scope || g.Queue != w.Queue || g.Kind != w.Kind || g.JobID != w.JobID ||
			g.JobGone != w.JobGone || g.State != w.State || g.UniqueFor != w.UniqueFor || !g.Until.Equal(w.Until) || g.Fingerprint != "" {
			e.Fatalf("UniqueHolds hold %d = %+v; want %+v", i, g, w)
		}
		if !g.Until.IsZero() && g.Until.Location() != time.UTC {
			e.Fatalf("UniqueHolds hold %q: Until %s is not in UTC", g.ScopedKey, g.Until)
		}
	}
	if _, _, err := e.uniqueHolder().UniqueHolds(e.ctx, contract.UniqueHoldsParams{Now: e.now, Limit: contract.MaxUniqueHoldsPage + 1}); !errors.Is(err, contract.ErrInvalidFilter) {
		e.Fatalf("UniqueHolds with Limit %d: error %v; want ErrInvalidFilter", contract.MaxUniqueHoldsPage+1, err)
	}
}

// testUniqueHoldsPaging: pages of UniqueHolds, followed by their cursor,
// list every held key once, in byte order of scoped keys, whatever the
// page size, skipping ended holds between held ones.
func testUniqueHoldsPaging(e *env) {
	var want []string
	for i := range 25 {
		key := fmt.Sprintf("key-%02d", i)
		if i%3 == 0 {
			// Ended by the time the list is read.
			j := e.claimJob(scopedJob(e, "q", "k", key, contract.UniqueGlobal, time.Second), "w")
			e.apply(e.outcome(j, contract.OutcomeComplete))
			continue
		}
		e.insertOne(scopedJob(e, "waiting", "k", key, contract.UniqueGlobal, 0))
		want = append(want, "g:"+key)
	}
	e.advance(time.Minute)
	for _, limit := range []int{1, 2, 7, 100} {
		if got := holdKeys(e.holds(limit)); fmt.Sprint(got) != fmt.Sprint(want) {
			e.Fatalf("UniqueHolds in pages of %d listed %q; want %q", limit, got, want)
		}
	}
}

// testUniqueHoldReleaseGone: ReleaseUniqueHold ends the hold of a holder
// whose row is gone (deleted at completion) or final, returns it, and the
// next insert of the key makes a new job; the hold is no longer listed.
func testUniqueHoldReleaseGone(e *env) {
	u := e.uniqueHolder()
	p := scopedJob(e, "q", "k", "squat", contract.UniqueGlobal, contract.MaxUniqueFor)
	j := e.claimJob(p, "w")
	o := e.outcome(j, contract.OutcomeComplete)
	o.Delete = true
	e.apply(o)
	e.expectHeldBy(p, j.ID, "the hold outlives the deleted row")
	h, err := u.ReleaseUniqueHold(e.ctx, "g:squat", e.now)
	if err != nil {
		e.Fatalf("ReleaseUniqueHold(g:squat) of a hold whose job %d is gone: %v", j.ID, err)
	}
	if h.ScopedKey != "g:squat" || h.JobID != j.ID || !h.JobGone || h.Key != "squat" {
		e.Fatalf("ReleaseUniqueHold returned %+v; want the hold of gone job %d on g:squat", h, j.ID)
	}
	if got := e.holds(100); len(got) != 0 {
		e.Fatalf("UniqueHolds after the release: %q; want none", holdKeys(got))
	}
	fresh := e.expectFresh(p, "the hold was released")
	e.expectHeldBy(p, fresh.ID, "the new job holds the key")

	// A final holder whose row is still there.
	q := scopedJob(e, "q", "k", "cancelled", contract.UniqueQueue, window)
	c := e.insertOne(q)
	if _, err := e.s.Cancel(e.ctx, c.ID, e.now); err != nil {
		e.Fatalf("Cancel(%d): %v", c.ID, err)
	}
	if h, err := u.ReleaseUniqueHold(e.ctx, "q1:q:cancelled", e.now); err != nil || h.JobID != c.ID || h.State != contract.StateCancelled || h.JobGone {
		e.Fatalf("ReleaseUniqueHold of cancelled job %d's hold: %+v, %v", c.ID, h, err)
	}
	e.expectFresh(q, "the cancelled job's hold was released")
	if got := e.get(c.ID); got.State != contract.StateCancelled {
		e.Fatalf("job %d after its hold was released is %s; the release must leave the row as it was", c.ID, got.State)
	}
	if _, err := e.s.Retry(e.ctx, c.ID, e.now); !errors.Is(err, contract.ErrInvalidState) {
		e.Fatalf("Retry(%d) of a job whose key has passed to another job after a release: %v; want ErrInvalidState", c.ID, err)
	}
}

// testUniqueHoldReleaseRefused: ReleaseUniqueHold refuses a live holder's
// hold (ErrInvalidState, the key stays held), and a key no hold holds at
// now (never taken, or its window over: ErrNotFound).
func testUniqueHoldReleaseRefused(e *env) {
	u := e.uniqueHolder()
	p := scopedJob(e, "q", "k", "running", contract.UniqueGlobal, window)
	j := e.claimJob(p, "w")
	if _, err := u.ReleaseUniqueHold(e.ctx, "g:running", e.now); !errors.Is(err, contract.ErrInvalidState) {
		e.Fatalf("ReleaseUniqueHold of running job %d's hold: %v; want ErrInvalidState (cancel it first)", j.ID, err)
	}
	e.expectHeldBy(p, j.ID, "a refused release changes nothing")
	if _, err := u.ReleaseUniqueHold(e.ctx, "g:never", e.now); !errors.Is(err, contract.ErrNotFound) {
		e.Fatalf("ReleaseUniqueHold of a key never held: %v; want ErrNotFound", err)
	}
	e.apply(e.outcome(j, contract.OutcomeComplete))
	e.advance(window)
	if _, err := u.ReleaseUniqueHold(e.ctx, "g:running", e.now); !errors.Is(err, contract.ErrNotFound) {
		e.Fatalf("ReleaseUniqueHold of a hold whose window is over: %v; want ErrNotFound", err)
	}
	if _, err := e.s.Retry(e.ctx, j.ID, e.now); err != nil {
		e.Fatalf("Retry(%d) after a refused release: %v; the job must still own its hold", j.ID, err)
	}
}

// testUniqueFingerprint: the UniqueFingerprint of the insert that took a
// hold comes back with every duplicate (while the holder lives, once its
// row is gone, and for a repeat within one batch); a hold taken without
// one returns ""; a duplicate's own fingerprint changes nothing.
func testUniqueFingerprint(e *env) {
	p := scopedJob(e, "q", "k", "fp", contract.UniqueGlobal, window)
	p.UniqueFingerprint = "sha256:first"
	again := p
	again.UniqueFingerprint = "sha256:other"
	res := e.insertResults(p, again)
	if res[0].Duplicate || !res[1].Duplicate || res[1].Fingerprint != "sha256:first" {
		e.Fatalf("a batch of two inserts of one key: results %+v, %+v; want a new job, then a duplicate with fingerprint %q", res[0], res[1], "sha256:first")
	}
	if r := e.insertResults(again)[0]; !r.Duplicate || r.Fingerprint != "sha256:first" {
		e.Fatalf("a duplicate insert while the holder lives: %+v; want fingerprint %q", r, "sha256:first")
	}
	j := e.claimOne("q", "w")
	o := e.outcome(j, contract.OutcomeComplete)
	o.Delete = true
	e.apply(o)
	if r := e.insertResults(again)[0]; !r.Duplicate || r.Job.ID != j.ID || r.Fingerprint != "sha256:first" {
		e.Fatalf("a duplicate insert once the holder's row is gone: %+v; want job %d with fingerprint %q", r, j.ID, "sha256:first")
	}
	if h := e.holds(10); len(h) != 1 || h[0].Fingerprint != "sha256:first" {
		e.Fatalf("UniqueHolds: %+v; want the one hold with fingerprint %q", h, "sha256:first")
	}
	plain := scopedJob(e, "q", "k", "plain", contract.UniqueGlobal, 0)
	e.insertOne(plain)
	plain.UniqueFingerprint = "sha256:late"
	if r := e.insertResults(plain)[0]; !r.Duplicate || r.Fingerprint != "" {
		e.Fatalf("a duplicate of a hold taken without a fingerprint: %+v; want fingerprint \"\"", r)
	}
	// A new holder after the window gets its own fingerprint.
	e.advance(window)
	p.UniqueFingerprint = "sha256:second"
	n := e.expectFresh(p, "the window is over")
	if r := e.insertResults(again)[0]; !r.Duplicate || r.Job.ID != n.ID || r.Fingerprint != "sha256:second" {
		e.Fatalf("a duplicate of the hold's new holder: %+v; want job %d with fingerprint %q", r, n.ID, "sha256:second")
	}
}

// testUniqueHoldReleaseRace: a release racing inserts of the same key
// fails none of them: each insert returns the released holder (it came
// first) or the one new job that took the key after the release.
func testUniqueHoldReleaseRace(e *env) {
	u := e.uniqueHolder()
	for round := range 5 {
		key := fmt.Sprintf("race-%d", round)
		p := scopedJob(e, key, "k", key, contract.UniqueGlobal, window)
		j := e.claimJob(p, "w")
		o := e.outcome(j, contract.OutcomeComplete)
		o.Delete = true
		e.apply(o)
		const inserters = 8
		var wg sync.WaitGroup
		results := make([]contract.InsertResult, inserters)
		errs := make([]error, inserters+1)
		start := make(chan struct{})
		for i := range inserters {
			wg.Go(func() {
				<-start
				res, err := e.s.Insert(e.ctx, e.now, []contract.InsertParams{p})
				if err == nil {
					results[i] = res[0]
				}
				errs[i] = err
			})
		}
		wg.Go(func() {
			<-start
			_, errs[inserters] = u.ReleaseUniqueHold(e.ctx, "g:"+key, e.now)
		})
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				e.Fatalf("round %d: call %d of %d inserts and a release of one key at once failed: %v", round, i, inserters, err)
			}
		}
		fresh := map[int64]bool{}
		for _, r := range results {
			if r.Job.ID != j.ID {
				fresh[r.Job.ID] = true
			}
		}
		if len(fresh) > 1 {
			e.Fatalf("round %d: inserts racing a release made jobs %v; want at most one new job", round, fresh)
		}
		e.advance(time.Second)
	}
}
