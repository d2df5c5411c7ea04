package storekit

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

// UniqueHoldUntil returns when a hold ends: FinishedAt + uniqueFor of its
// holder j when j is final, zero when j is live, heldUntil when j is nil
// (its row is gone). Stores use it to fill UniqueHold.Until.
func UniqueHoldUntil(j *contract.Job, uniqueFor time.Duration, heldUntil time.Time) time.Time {
	if j == nil {
		return contract.UTC(heldUntil)
	}
	if !j.State.Final() {
		return time.Time{}
	}
	return contract.UTC(j.FinishedAt.Add(uniqueFor))
}

// ScopeOfScopedKey returns the scope a scoped key (ScopedUniqueKey's form)
// was made in, from its first letter; false when sk is not of that form.
func ScopeOfScopedKey(sk string) (contract.UniqueScope, bool) {
	switch {
	case strings.HasPrefix(sk, "g:"):
		return contract.UniqueGlobal, true
	case strings.HasPrefix(sk, "q"):
		return contract.UniqueQueue, scopedLenOK(sk[1:])
	case strings.HasPrefix(sk, "k"):
		return contract.UniqueKind, scopedLenOK(sk[1:])
	}
	return 0, false
}

// scopedLenOK reports whether rest is "<n>:" + n bytes + ":" + a key.
func scopedLenOK(rest string) bool {
	num, tail, ok := strings.Cut(rest, ":")
	if !ok {
		return false
	}
	n, err := strconv.Atoi(num)
	if err != nil || n < 1 || n+1 > len(tail) || tail[n] != ':' {
		return false
	}
	return len(tail) > n+1
}

// CheckUniqueHoldsParams validates p and fills the default limit; stores
// call it first. It returns an error wrapping ErrInvalidFilter.
func CheckUniqueHoldsParams(p *contract.UniqueHoldsParams) error {
	if p.Limit == 0 {
		p.Limit = 100
	}
	if p.Limit < 1 || p.Limit > contract.MaxUniqueHoldsPage {
		return fmt.Errorf("%w: unique holds: limit %d is outside 1..%d", contract.ErrInvalidFilter, p.Limit, contract.MaxUniqueHoldsPage)
	}
	p.Now = contract.UTC(p.Now)
	return nil
}
