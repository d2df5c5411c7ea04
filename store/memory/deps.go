package memory

import (
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/backlogq/backlog/core/contract"
)

// checkDependencies validates the dependencies of one Insert call before
// anything is inserted (contract.Dependencies): indexes below the job's
// own, ids ≥ 1 of jobs the store holds (or archived), at most
// MaxDependencies, known policies, step names bounded and unique in the
// call. s.mu is held.
func (s *Store) checkDependencies(jobs []contract.InsertParams) error {
	steps := map[string]int{}
	for i, p := range jobs {
		bad := func(format string, a ...any) error {
			return fmt.Errorf("memory: job %d of the insert: %s: %w", i, fmt.Sprintf(format, a...), contract.ErrInvalidArgument)
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
		if len(p.DependsOn)+len(p.DependsOnIndex) > contract.MaxDependencies {
			return bad("%d dependencies, over the limit of %d", len(p.DependsOn)+len(p.DependsOnIndex), contract.MaxDependencies)
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
			if s.jobs[id] == nil && s.archive[id] == nil {
				return fmt.Errorf("memory: job %d of the insert: dependency job %d: %w: %w", i, id, contract.ErrNotFound, contract.ErrInvalidArgument)
			}
		}
	}
	return nil
}

// addDependencies sets j's dependencies from p (DependsOnIndex through
// earlier, the results of the call's earlier jobs): settled ones are
// counted out, a failed one cancels j under DependencyCancel, and j waits
// for the rest. s.mu is held; j is in s.jobs, not yet indexed.
func (s *Store) addDependencies(j *contract.Job, p *contract.InsertParams, earlier []contract.InsertResult, now time.Time) {
	if len(p.DependsOn) == 0 && len(p.DependsOnIndex) == 0 {
		return
	}
	ids := slices.Clone(p.DependsOn)
	for _, k := range p.DependsOnIndex {
		ids = append(ids, earlier[k].Job.ID)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	j.DependsOn = ids
	j.OnDependencyFailure = p.OnDependencyFailure
	var open []int64
	for _, id := range ids {
		d := s.jobs[id]
		if d == nil {
			d = s.archive[id]
		}
		if !d.State.Final() {
			open = append(open, id)
			continue
		}
		countEnd(&j.DependencyEnds, d.State)
		if d.State != contract.StateCompleted && j.OnDependencyFailure == contract.DependencyCancel {
			s.cancelForDependency(j, id, d.State, now)
			return
		}
	}
	if len(open) == 0 {
		return
	}
	j.State = contract.StateWaiting
	j.WaitingFor = len(open)
	for _, id := range open {
		s.dependants[id] = append(s.dependants[id], j.ID)
	}
}

// cancelForDependency cancels j, which waited for (or was being inserted
// with) dependency dep that ended in state `ended`; the caller reindexes.
func (s *Store) cancelForDependency(j *contract.Job, dep int64, ended contract.State, now time.Time) {
	what := string(ended)
	if ended == "" {
		what = "deleted"
	}
	j.State = contract.StateCancelled
	j.FinishedAt = now
	j.WaitingFor = 0
	j.Errors = appendError(j.Errors, contract.AttemptError{
		Attempt: j.Attempt,
		At:      now,
		Error:   fmt.Sprintf("dependency job %d ended %s", dep, what),
		Cause:   contract.CauseDependency,
	})
}

// settle applies the end of job id (completed, cancelled or discarded;
// "" for a job deleted before its end) to the jobs waiting for it, at
// now: each counts one less and the one at 0 becomes due, or, under
// DependencyCancel for an end other than completed, is cancelled, which
// settles its own dependants in turn (through reindex). s.mu is held.
func (s *Store) settle(id int64, ended contract.State, now time.Time) {
	waiting := s.dependants[id]
	if len(waiting) == 0 {
		return
	}
	delete(s.dependants, id)
	for _, wid := range waiting {
		d := s.jobs[wid]
		if d == nil || d.State != contract.StateWaiting {
			continue // deleted or cancelled meanwhile
		}
		old := d.State
		countEnd(&d.DependencyEnds, ended)
		if ended != contract.StateCompleted && d.OnDependencyFailure == contract.DependencyCancel {
			s.cancelForDependency(d, id, ended, now)
			s.reindex(d, old)
			continue
		}
		d.WaitingFor--
		if d.WaitingFor > 0 {
			continue
		}
		d.State = dueState(d.RunAt, now)
		s.reindex(d, old)
		if d.State == contract.StateAvailable {
			s.notify(contract.Notification{Kind: contract.NotifyInsert, Queue: d.Queue})
		}
	}
}

// countEnd counts a dependency that ended in state `ended` ("" =
// deleted, counted as cancelled) in e.
func countEnd(e *contract.DependencyEnds, ended contract.State) {
	switch ended {
	case contract.StateCompleted:
		e.Completed++
	case contract.StateDiscarded:
		e.Discarded++
	default:
		e.Cancelled++
	}
}

// SupportsDependencies implements contract.Dependencies.
func (s *Store) SupportsDependencies() {}
