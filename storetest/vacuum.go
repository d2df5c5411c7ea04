package storetest

import (
	"fmt"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

var vacuumTests = []test{
	{"vacuum/changes-no-job", testVacuumChangesNoJob},
}

// testVacuumChangesNoJob: Vacuum (contract.Vacuumer) reclaims what the
// database keeps of finished work and changes no job: every job of every
// state reads back the same, claims go on in claim order, and a running
// job's fence still holds. A store's factory should open it with a
// threshold of zero, so that each call here really reclaims.
func testVacuumChangesNoJob(e *env) {
	v, ok := e.s.(contract.Vacuumer)
	if !ok {
		e.Skip("the store does not implement contract.Vacuumer")
	}
	// Dead rows of every kind: claimed, finished, deleted on completion.
	for i := range 20 {
		j := e.claimJob(e.job("q", "k"), "w1")
		o := e.outcome(j, contract.OutcomeComplete)
		o.Delete = i%2 == 0
		e.apply(o)
	}
	running := e.claimJob(e.job("q", "k"), "w1")
	failed := e.claimJob(e.job("q", "k"), "w1")
	o := e.outcome(failed, contract.OutcomeRetry)
	o.RunAt = e.now.Add(time.Hour)
	o.Error = &contract.AttemptError{Attempt: failed.Attempt, At: e.now, Error: "boom"}
	e.apply(o)
	urgent := e.job("q", "k")
	urgent.Priority = 1
	waiting := e.insert(e.job("q", "k"), urgent, e.job("q", "k"))
	var before []*contract.Job
	for _, id := range append([]int64{running.ID, failed.ID}, ids(waiting)...) {
		before = append(before, e.get(id))
	}
	for range 2 {
		if _, err := v.Vacuum(e.ctx); err != nil {
			e.Fatalf("Vacuum: unexpected error: %v", err)
		}
	}
	for _, j := range before {
		e.expectUnchanged(j, "Vacuum")
	}
	got := e.claim("q", "w2", 3)
	want := []int64{waiting[1].ID, waiting[0].ID, waiting[2].ID}
	if fmt.Sprint(ids(got)) != fmt.Sprint(want) {
		e.Fatalf("claim after Vacuum returned jobs %v; want %v in claim order (priority, run_at, id)", ids(got), want)
	}
	e.apply(e.outcome(running, contract.OutcomeComplete))
}
