package memory

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/backlogq/backlog/core"
)

// UniqueHolds implements core.UniqueHolder: the holds held at p.Now, by
// scoped key, after p.After, reading at most core.UniqueHoldsScan of them.
func (s *Store) UniqueHolds(ctx context.Context, p core.UniqueHoldsParams) ([]core.UniqueHold, string, error) {
	if err := core.CheckUniqueHoldsParams(&p); err != nil {
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
	var out []core.UniqueHold
	i := 0
	for ; i < len(keys) && len(out) < p.Limit && i < core.UniqueHoldsScan; i++ {
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
func (s *Store) uniqueHold(sk string, h *hold) core.UniqueHold {
	scope, _ := core.ScopeOfScopedKey(sk)
	u := core.UniqueHold{
		ScopedKey: sk, Key: h.key, Scope: scope, Queue: h.queue, Kind: h.kind, JobID: h.jobID,
		UniqueFor: h.uniqueFor, Fingerprint: h.fingerprint,
	}
	if j, ok := s.jobs[h.jobID]; ok {
		u.State = j.State
		u.Until = core.UniqueHoldUntil(j, h.uniqueFor, time.Time{})
	} else {
		u.JobGone = true
		u.Until = core.UniqueHoldUntil(nil, h.uniqueFor, h.heldUntil)
	}
	return u
}

// ReleaseUniqueHold implements core.UniqueHolder: it forgets the hold on
// scopedKey when it is held at now by a final job or a gone one.
func (s *Store) ReleaseUniqueHold(ctx context.Context, scopedKey string, now time.Time) (core.UniqueHold, error) {
	if err := s.lock(ctx); err != nil {
		return core.UniqueHold{}, err
	}
	defer s.mu.Unlock()

	h, ok := s.holds[scopedKey]
	if !ok || !s.held(h, core.UTC(now)) {
		return core.UniqueHold{}, fmt.Errorf("memory: release unique hold %q: no hold is held: %w", scopedKey, core.ErrNotFound)
	}
	u := s.uniqueHold(scopedKey, h)
	if j, ok := s.jobs[h.jobID]; ok && !j.State.Final() {
		return core.UniqueHold{}, fmt.Errorf("memory: release unique hold %q: job %d holding it is %s (cancel it first): %w", scopedKey, j.ID, j.State, core.ErrInvalidState)
	}
	delete(s.holds, scopedKey)
	delete(s.holdOf, h.jobID)
	return u, nil
}
