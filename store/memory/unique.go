package memory

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/core/storekit"
)

// UniqueHolds implements contract.UniqueHolder: the holds held at p.Now, by
// scoped key, after p.After, reading at most contract.UniqueHoldsScan of them.
func (s *Store) UniqueHolds(ctx context.Context, p contract.UniqueHoldsParams) ([]contract.UniqueHold, string, error) {
	if err := storekit.CheckUniqueHoldsParams(&p); err != nil {
		return nil, "", err
	}
	if err := s.lock(ctx); err != nil {
		return nil, "", err
	}
	defer s.mu.Unlock()

	keys := make([]string, 0, len(s.holds))
	for sk := range s.holds {
		if sk > p.After {
			keys = append(keys, sk)
		}
	}
	slices.Sort(keys)
	var out []contract.UniqueHold
	i := 0
	for ; i < len(keys) && len(out) < p.Limit && i < contract.UniqueHoldsScan; i++ {
		if h := s.holds[keys[i]]; s.held(h, p.Now) {
			out = append(out, s.uniqueHold(keys[i], h))
		}
	}
	next := ""
	if i < len(keys) {
		next = keys[i-1]
	}
	return out, next, nil
}

// uniqueHold describes the hold h on scoped key sk.
func (s *Store) uniqueHold(sk string, h *hold) contract.UniqueHold {
	scope, _ := storekit.ScopeOfScopedKey(sk)
	u := contract.UniqueHold{
		ScopedKey: sk, Key: h.key, Scope: scope, Queue: h.queue, Kind: h.kind, JobID: h.jobID,
		UniqueFor: h.uniqueFor, Fingerprint: h.fingerprint,
	}
	if j, ok := s.jobs[h.jobID]; ok {
		u.State = j.State
		u.Until = storekit.UniqueHoldUntil(j, h.uniqueFor, time.Time{})
	} else {
		u.JobGone = true
		u.Until = storekit.UniqueHoldUntil(nil, h.uniqueFor, h.heldUntil)
	}
	return u
}

// ReleaseUniqueHold implements contract.UniqueHolder: it forgets the hold on
// scopedKey when it is held at now by a final job or a gone one.
func (s *Store) ReleaseUniqueHold(ctx context.Context, scopedKey string, now time.Time) (contract.UniqueHold, error) {
	if err := s.lock(ctx); err != nil {
		return contract.UniqueHold{}, err
	}
	defer s.mu.Unlock()

	h, ok := s.holds[scopedKey]
	if !ok || !s.held(h, contract.UTC(now)) {
		return contract.UniqueHold{}, fmt.Errorf("memory: release unique hold %q: no hold is held: %w", scopedKey, contract.ErrNotFound)
	}
	u := s.uniqueHold(scopedKey, h)
	if j, ok := s.jobs[h.jobID]; ok && !j.State.Final() {
		return contract.UniqueHold{}, fmt.Errorf("memory: release unique hold %q: job %d holding it is %s (cancel it first): %w", scopedKey, j.ID, j.State, contract.ErrInvalidState)
	}
	delete(s.holds, scopedKey)
	delete(s.holdOf, h.jobID)
	return u, nil
}
