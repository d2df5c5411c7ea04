package storekit

import (
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/backlogq/backlog/core/contract"
)

// CheckDependencies checks the dependency fields of one Insert call
// before anything is inserted (contract.Dependencies): known policies,
// step names of at most contract.MaxStepLen bytes of UTF-8 and unique in
// the call, at most contract.MaxDependencies dependencies a job, each
// DependsOnIndex the index of an earlier job of the call, each DependsOn
// id ≥ 1. The error names the job's index and wraps
// contract.ErrInvalidArgument. Whether the ids exist is the store's to
// check (ErrNotFound and ErrInvalidArgument together).
func CheckDependencies(jobs []contract.InsertParams) error {
	steps := map[string]int{}
	for i := range jobs {
		p := &jobs[i]
		bad := func(format string, a ...any) error {
			return fmt.Errorf("job %d of the insert: %s: %w", i, fmt.Sprintf(format, a...), contract.ErrInvalidArgument)
		}
		if !p.OnDependencyFailure.Valid() {
			return bad("unknown dependency policy %q", p.OnDependencyFailure)
		}
		if len(p.Step) > contract.MaxStepLen || !utf8.ValidString(p.Step) {
			return bad("step name is not 0..%d bytes of UTF-8", contract.MaxStepLen)
		}
		if p.Step != "" {
			if k, dup := steps[p.Step]; dup {
				return bad("step %q is also the name of job %d", p.Step, k)
			}
			steps[p.Step] = i
		}
		if n := len(p.DependsOn) + len(p.DependsOnIndex); n > contract.MaxDependencies {
			return bad("%d dependencies, over the limit of %d", n, contract.MaxDependencies)
		}
		for _, k := range p.DependsOnIndex {
			if k < 0 || k >= i {
				return bad("DependsOnIndex %d is not the index of an earlier job of the insert", k)
			}
		}
		for _, id := range p.DependsOn {
			if id < 1 {
				return bad("dependency id %d is below 1", id)
			}
		}
	}
	return nil
}

// HasDependencies reports whether p names any dependency.
func HasDependencies(p *contract.InsertParams) bool {
	return len(p.DependsOn) > 0 || len(p.DependsOnIndex) > 0
}

// DependencyPlan is what a job inserted with dependencies starts as
// (PlanDependencies).
type DependencyPlan struct {
	// State is StateWaiting while dependencies are open, StateCancelled
	// for a cancel at insert, else "" (the job's own available or
	// scheduled state).
	State contract.State
	// WaitingFor counts the open dependencies (Job.WaitingFor).
	WaitingFor int
	// Ends counts the dependencies already settled (Job.DependencyEnds).
	Ends contract.DependencyEnds
	// Open lists the ids of the open dependencies: their edges are
	// unsettled; the others' are settled.
	Open []int64
	// Cancel is the error entry of a cancel at insert (State
	// StateCancelled); zero otherwise.
	Cancel contract.AttemptError
}

// PlanDependencies returns how a job whose dependencies are ids
// (deduplicated, ascending) starts, given each one's state (ended(id);
// a state that is not final means open) and its policy, at now, the
// insert's time (contract.Dependencies): under DependencyCancel the first
// dependency in id order that ended cancelled or discarded cancels it
// (Ends counting the dependencies up to that one); else it waits for
// the open ones, or, with none, is due as any job.
func PlanDependencies(ids []int64, state func(id int64) contract.State, policy contract.DependencyPolicy, attempt int, now time.Time) DependencyPlan {
	var plan DependencyPlan
	for _, id := range ids {
		st := state(id)
		if !st.Final() {
			plan.Open = append(plan.Open, id)
			continue
		}
		CountEnd(&plan.Ends, st)
		if st != contract.StateCompleted && policy == contract.DependencyCancel {
			return DependencyPlan{State: contract.StateCancelled, Ends: plan.Ends, Cancel: DependencyCancelEntry(attempt, id, st, now)}
		}
	}
	if len(plan.Open) > 0 {
		plan.State, plan.WaitingFor = contract.StateWaiting, len(plan.Open)
	}
	return plan
}

// CountEnd counts a dependency that ended in state `ended` in e: "" (a
// job deleted before its end) counts as cancelled.
func CountEnd(e *contract.DependencyEnds, ended contract.State) {
	switch ended {
	case contract.StateCompleted:
		e.Completed++
	case contract.StateDiscarded:
		e.Discarded++
	default:
		e.Cancelled++
	}
}

// DependencyCancelEntry is the error entry of a job cancelled because
// dependency dep ended in state `ended` ("" = deleted) under
// DependencyCancel: Cause contract.CauseDependency, the text "dependency
// job <dep> ended <state>".
func DependencyCancelEntry(attempt int, dep int64, ended contract.State, now time.Time) contract.AttemptError {
	what := string(ended)
	if ended == "" {
		what = "deleted"
	}
	return contract.AttemptError{
		Attempt: attempt,
		At:      now,
		Error:   fmt.Sprintf("dependency job %d ended %s", dep, what),
		Cause:   contract.CauseDependency,
	}
}
