package storetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

var semanticsTests = []test{
	{"semantics/scenario-transcript-matches-reference", testScenario},
}

// referenceTranscript is what every store must produce for the scenario in
// testScenario. It was derived from the contract's doc text step by step
// (and is what store/memory produces). It records only what the contract
// fixes — states, attempts, error counts, kinds, claim order, duplicate and
// fence results — never ids or times.
var referenceTranscript = []string{
	"insert A: A kind=step-1 state=available attempt=0/3 errors=0",
	"insert B: B kind=other state=scheduled attempt=0/3 errors=0",
	"insert C: C kind=solo state=available attempt=0/1 errors=0",
	"claim w1: [A C]",
	"retry A: applied=true A kind=step-1 state=retryable attempt=1/3 errors=1",
	"snooze C: applied=true C kind=solo state=available attempt=0/1 errors=0",
	"claim w2: [B C A]",
	"continue B: applied=true B kind=step-2 state=available attempt=0/3 errors=0",
	"retry A: applied=true A kind=step-1 state=retryable attempt=2/3 errors=2",
	"rescue: [C=discarded]",
	"stale complete C: applied=false C kind=solo state=discarded attempt=1/1 errors=1",
	"admin retry C: C kind=solo state=available attempt=1/2 errors=1",
	"admin cancel B: B kind=step-2 state=cancelled attempt=0/3 errors=0",
	"insert D: duplicate of C",
	"claim w3: [A C]",
	"finish batch: applied=[true true false]",
	"after batch: A kind=step-1 state=completed attempt=3/3 errors=2",
	"after batch: C kind=solo state=discarded attempt=2/2 errors=2",
	"insert E: E kind=solo state=available attempt=0/3 errors=0",
	"admin retry A: A kind=step-1 state=available attempt=3/4 errors=2",
	"claim w4: [A]",
	"snooze A: applied=true A kind=step-1 state=scheduled attempt=3/4 errors=2",
	"claim w4: [E]",
	"final A: A kind=step-1 state=scheduled attempt=3/4 errors=2",
	"final B: B kind=step-2 state=cancelled attempt=0/3 errors=0",
	"final C: C kind=solo state=discarded attempt=2/2 errors=2",
	"final E: E kind=solo state=running attempt=1/3 errors=0",
	"stats flow: cancelled=1 discarded=1 running=1 scheduled=1",
}

// testScenario runs one scripted life of a few jobs through most of the
// contract and compares a normalised transcript with referenceTranscript:
// every store must agree on what the operations mean.
func testScenario(e *env) {
	var got []string
	label := map[int64]string{}
	byLabel := map[string]*contract.Job{}
	snap := func(j *contract.Job) string {
		return fmt.Sprintf("%s kind=%s state=%s attempt=%d/%d errors=%d", label[j.ID], j.Kind, j.State, j.Attempt, j.MaxAttempts, len(j.Errors))
	}
	logf := func(format string, a ...any) { got = append(got, fmt.Sprintf(format, a...)) }
	names := func(jobs []*contract.Job) string {
		var s []string
		for _, j := range jobs {
			s = append(s, label[j.ID])
			byLabel[label[j.ID]] = j // keep the running copy for fencing
		}
		return "[" + strings.Join(s, " ") + "]"
	}
	finishOne := func(what string, o contract.Outcome) {
		r := e.finish(o)
		logf("%s: applied=%v %s", what, r[0].Applied, snap(e.get(o.JobID)))
	}
	insert := func(name string, p contract.InsertParams) {
		res := e.insertResults(p)
		if res[0].Duplicate {
			logf("insert %s: duplicate of %s", name, label[res[0].Job.ID])
			return
		}
		label[res[0].Job.ID] = name
		byLabel[name] = res[0].Job
		logf("insert %s: %s", name, snap(res[0].Job))
	}

	// Three jobs: A a plain job, B a high-priority job due later, C a
	// single-attempt unique job.
	a := e.job("flow", "step-1")
	b := e.job("flow", "other")
	b.Priority = contract.PriorityHighest
	b.RunAt = e.now.Add(10 * time.Second)
	c := e.job("flow", "solo")
	c.MaxAttempts = 1
	c.UniqueKey = "u"
	insert("A", a)
	insert("B", b)
	insert("C", c)

	logf("claim w1: %s", names(e.claim("flow", "w1", 10)))
	o := e.outcome(byLabel["A"], contract.OutcomeRetry)
	o.RunAt = e.now.Add(5 * time.Second)
	o.Error = &contract.AttemptError{Attempt: 1, At: e.now, Error: "boom"}
	finishOne("retry A", o)
	o = e.outcome(byLabel["C"], contract.OutcomeSnooze) // hand-back: RunAt=At
	finishOne("snooze C", o)

	e.advance(10 * time.Second)
	logf("claim w2: %s", names(e.claim("flow", "w2", 10)))
	o = e.outcome(byLabel["B"], contract.OutcomeContinue)
	o.NextKind = "step-2"
	o.NextArgs = json.RawMessage(`{"n":2}`)
	finishOne("continue B", o)
	o = e.outcome(byLabel["A"], contract.OutcomeRetry)
	o.RunAt = e.now.Add(time.Second)
	o.Error = &contract.AttemptError{Attempt: 2, At: e.now, Error: "boom again"}
	finishOne("retry A", o)

	// C's worker vanishes; its lease runs out.
	e.advance(lease + time.Second)
	var rescued []string
	for _, j := range e.rescue(10) {
		rescued = append(rescued, label[j.ID]+"="+string(j.State))
	}
	slices.Sort(rescued)
	logf("rescue: [%s]", strings.Join(rescued, " "))
	finishOne("stale complete C", e.outcome(byLabel["C"], contract.OutcomeComplete))

	j, err := e.s.Retry(e.ctx, byLabel["C"].ID, e.now)
	if err != nil {
		e.Fatalf("scenario: Retry(C): %v", err)
	}
	logf("admin retry C: %s", snap(j))
	j, err = e.s.Cancel(e.ctx, byLabel["B"].ID, e.now)
	if err != nil {
		e.Fatalf("scenario: Cancel(B): %v", err)
	}
	logf("admin cancel B: %s", snap(j))
	d := e.job("flow", "solo")
	d.UniqueKey = "u"
	insert("D", d)

	logf("claim w3: %s", names(e.claim("flow", "w3", 10)))
	oa := e.outcome(byLabel["A"], contract.OutcomeComplete)
	oa.Result = []byte("ok")
	oc := e.outcome(byLabel["C"], contract.OutcomeDiscard)
	oc.Error = &contract.AttemptError{Attempt: 2, At: e.now, Error: "bad input"}
	res := e.finish(oa, oc, oa)
	logf("finish batch: applied=%v", []bool{res[0].Applied, res[1].Applied, res[2].Applied})
	logf("after batch: %s", snap(e.get(byLabel["A"].ID)))
	logf("after batch: %s", snap(e.get(byLabel["C"].ID)))

	insert("E", d) // the key is free again: C is final
	j, err = e.s.Retry(e.ctx, byLabel["A"].ID, e.now)
	if err != nil {
		e.Fatalf("scenario: Retry(A): %v", err)
	}
	logf("admin retry A: %s", snap(j))
	logf("claim w4: %s", names(e.claim("flow", "w4", 1)))
	o = e.outcome(byLabel["A"], contract.OutcomeSnooze)
	o.RunAt = e.now.Add(time.Hour)
	finishOne("snooze A", o)
	logf("claim w4: %s", names(e.claim("flow", "w4", 10)))

	for _, name := range []string{"A", "B", "C", "E"} {
		logf("final %s: %s", name, snap(e.get(byLabel[name].ID)))
	}
	var counts []string
	for state, n := range e.stats()["flow"].Counts {
		if n != 0 {
			counts = append(counts, fmt.Sprintf("%s=%d", state, n))
		}
	}
	slices.Sort(counts)
	logf("stats flow: %s", strings.Join(counts, " "))

	if !slices.Equal(got, referenceTranscript) {
		var b strings.Builder
		for i := range max(len(got), len(referenceTranscript)) {
			g, w := "(missing)", "(missing)"
			if i < len(got) {
				g = got[i]
			}
			if i < len(referenceTranscript) {
				w = referenceTranscript[i]
			}
			mark := "  "
			if g != w {
				mark = "✗ "
			}
			fmt.Fprintf(&b, "%s%-80s | %s\n", mark, g, w)
		}
		e.Fatalf("the scenario transcript differs from the reference (lines marked ✗; left: this store, right: reference). Every store must give the operations the same meaning:\n%s", b.String())
	}
}
