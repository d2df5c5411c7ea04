package memory

import (
	"fmt"
	"slices"
	"time"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/core/storekit"
)

// checkDependencies validates the dependencies of one Insert call before
// anything is inserted (contract.Dependencies): storekit.CheckDependencies,
// and every id one of a job the store holds (or archived). s.mu is held.
func (s *Store) checkDependencies(jobs []contract.InsertParams) error {
	if err := storekit.CheckDependencies(jobs); err != nil {
		return fmt.Errorf("memory: %w", err)
	}
	for i, p := range jobs {
		for _, id := range p.DependsOn {
			if s.jobs[id] == nil && s.archive[id] == nil {
				return fmt.Errorf("memory: job %d of the insert: dependency job %d: %w: %w", i, id, contract.ErrNotFound, contract.ErrInvalidArgument)
			}
		}
	}
	return nil
}

// addDependencies sets j's dependencies from p (DependsOnIndex through
// earlier, the results of the call's earlier jobs) as
// storekit.PlanDependencies says: settled ones are counted out, a failed
// one cancels j under DependencyCancel, and j waits for the rest. s.mu is
// held; j is in s.jobs, not yet indexed.
func (s *Store) addDependencies(j *contract.Job, p *contract.InsertParams, earlier []contract.InsertResult, now time.Time) {
	if !storekit.HasDependencies(p) {
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
	plan := storekit.PlanDependencies(ids, func(id int64) contract.State {
		if d := s.jobs[id]; d != nil {
			return d.State
		}
		return s.archive[id].State
	}, j.OnDependencyFailure, j.Attempt, now)
	j.DependencyEnds = plan.Ends
	switch plan.State {
	case contract.StateCancelled:
		j.State, j.FinishedAt = contract.StateCancelled, now
		j.Errors = appendError(j.Errors, plan.Cancel)
	case contract.StateWaiting:
		j.State, j.WaitingFor = contract.StateWaiting, plan.WaitingFor
		for _, id := range plan.Open {
			s.dependants[id] = append(s.dependants[id], j.ID)
		}
	}
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
		storekit.CountEnd(&d.DependencyEnds, ended)
		if ended != contract.StateCompleted && d.OnDependencyFailure == contract.DependencyCancel {
			d.State, d.FinishedAt, d.WaitingFor = contract.StateCancelled, now, 0
			d.Errors = appendError(d.Errors, storekit.DependencyCancelEntry(d.Attempt, id, ended, now))
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

// SupportsDependencies implements contract.Dependencies.
func (s *Store) SupportsDependencies() {}
