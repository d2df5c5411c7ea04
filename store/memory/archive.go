package memory

import (
	"context"
	"fmt"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

// Archive implements contract.Archiver: what Prune would delete (see
// prune) moves into the archive map instead, under the one mutex, so a
// job is in exactly one of the two maps at every moment. A SQL store
// copies the rows into its archive table and deletes them in one
// transaction.
func (s *Store) Archive(ctx context.Context, state contract.State, before time.Time, limit int) (int, error) {
	if !state.Final() {
		return 0, fmt.Errorf("memory: archive of state %q: %w: %w (only completed, cancelled and discarded jobs are archived)", state, contract.ErrInvalidArgument, contract.ErrInvalidState)
	}
	if err := s.lock(ctx); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	if limit <= 0 {
		return 0, nil
	}
	moved := s.prune(state, before, limit)
	for _, j := range moved {
		s.archive[j.ID] = j
	}
	return len(moved), nil
}

// PruneArchive implements contract.Archiver: it deletes up to limit
// archived jobs (oldest FinishedAt first, then id) finished before
// `before`.
func (s *Store) PruneArchive(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := s.lock(ctx); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	if limit <= 0 {
		return 0, nil
	}
	before = contract.UTC(before)
	old := collectFrom(s.archive, limit, byFinished, func(j *contract.Job) bool { return j.FinishedAt.Before(before) })
	for _, j := range old {
		delete(s.archive, j.ID)
	}
	return len(old), nil
}

// ListArchived implements contract.Archiver: List over the archive map.
func (s *Store) ListArchived(ctx context.Context, p contract.ListParams) ([]*contract.Job, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	return s.list(s.archive, p)
}

// GetArchived implements contract.Archiver.
func (s *Store) GetArchived(ctx context.Context, id int64) (*contract.Job, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	j, ok := s.archive[id]
	if !ok {
		return nil, fmt.Errorf("memory: archived job %d: %w", id, contract.ErrNotFound)
	}
	return clone(j), nil
}

// byFinished orders jobs by FinishedAt, then id.
func byFinished(a, b *contract.Job) int {
	if c := a.FinishedAt.Compare(b.FinishedAt); c != 0 {
		return c
	}
	return byID(a, b)
}
