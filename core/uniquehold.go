package core

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// UniqueHolder is the optional capability of stores that let an operator
// see the holds on unique keys (see Store.Insert) and end one. A hold can
// outlive its job by up to MaxUniqueFor (the row deleted or pruned inside
// the holder's window), and then nothing but this capability reaches it:
// the admin API, the CLI (backlog unique) and the dashboard use it. Every
// built-in store implements it.
type UniqueHolder interface {
	// UniqueHolds returns, ordered by scoped key (byte order), up to
	// p.Limit holds held at p.Now (as Store.Insert decides it: the
	// holder is not final, or final inside its window, or gone inside
	// it) whose scoped key is after p.After. next is the cursor of the
	// next page ("" once the walk is over): the last scoped key read,
	// which may be past the last hold returned, since a store reads a
	// bounded number of rows per call and skips the holds that ended
	// (a page may be short, even empty, and still have a next). It
	// returns an error wrapping ErrInvalidFilter for a limit outside
	// 0..MaxUniqueHoldsPage.
	UniqueHolds(ctx context.Context, p UniqueHoldsParams) (holds []UniqueHold, next string, err error)

	// ReleaseUniqueHold ends the hold on scopedKey (ScopedUniqueKey's
	// form) so that the next insert of the key makes a new job, and
	// returns the hold as it was. It returns ErrNotFound (wrapped) when
	// no hold on the key is held at now, and ErrInvalidState (wrapped)
	// when its holder is not final: a live job keeps its key (cancel it
	// first, then release). Releasing a hold whose holder's row is still
	// there leaves the row as it is; a later Retry of that job returns
	// ErrInvalidState, as for a key passed to another job. Concurrent
	// inserts of the key either see the hold or take a fresh one, never
	// both.
	ReleaseUniqueHold(ctx context.Context, scopedKey string, now time.Time) (UniqueHold, error)
}

// MaxUniqueHoldsPage bounds UniqueHoldsParams.Limit.
const MaxUniqueHoldsPage = 1000

// UniqueHoldsScan is how many hold rows a store reads at most for one
// UniqueHolds call (holds that ended are read and skipped).
const UniqueHoldsScan = 5000

// UniqueHoldsParams selects a page of UniqueHolder.UniqueHolds.
type UniqueHoldsParams struct {
	Now   time.Time // holds held at Now
	After string    // keyset cursor: scoped keys after this one ("" = from the start)
	Limit int       // 1..MaxUniqueHoldsPage; 0 means 100
}

// UniqueHold is one hold on a unique key.
type UniqueHold struct {
	ScopedKey string      // the hold's identity (ScopedUniqueKey)
	Key       string      // the unique key as the job gave it
	Scope     UniqueScope // from ScopedKey
	Queue     string      // the holder's queue
	Kind      string      // the holder's kind
	JobID     int64       // the holding job
	// JobGone says the holder's row was deleted or pruned: the hold keeps
	// the key until Until all the same.
	JobGone bool
	// State is the holder's state ("" when its row is gone).
	State State
	// UniqueFor is the holder's window after it is final.
	UniqueFor time.Duration
	// Until is when the hold ends: the holder's FinishedAt + UniqueFor,
	// UTC; zero while the holder is not final (held for as long as it
	// lives).
	Until time.Time
	// Fingerprint is InsertParams.UniqueFingerprint of the holder's
	// insert ("" when it gave none).
	Fingerprint string
}

// UniqueHoldUntil returns when a hold ends: FinishedAt + uniqueFor of its
// holder j when j is final, zero when j is live, heldUntil when j is nil
// (its row is gone). Stores use it to fill UniqueHold.Until.
func UniqueHoldUntil(j *Job, uniqueFor time.Duration, heldUntil time.Time) time.Time {
	if j == nil {
		return UTC(heldUntil)
	}
	if !j.State.Final() {
		return time.Time{}
	}
	return UTC(j.FinishedAt.Add(uniqueFor))
}

// ScopeOfScopedKey returns the scope a scoped key (ScopedUniqueKey's form)
// was made in, from its first letter; false when sk is not of that form.
func ScopeOfScopedKey(sk string) (UniqueScope, bool) {
	switch {
	case strings.HasPrefix(sk, "g:"):
		return UniqueGlobal, true
	case strings.HasPrefix(sk, "q"):
		return UniqueQueue, scopedLenOK(sk[1:])
	case strings.HasPrefix(sk, "k"):
		return UniqueKind, scopedLenOK(sk[1:])
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
func CheckUniqueHoldsParams(p *UniqueHoldsParams) error {
	if p.Limit == 0 {
		p.Limit = 100
	}
	if p.Limit < 1 || p.Limit > MaxUniqueHoldsPage {
		return fmt.Errorf("%w: unique holds: limit %d is outside 1..%d", ErrInvalidFilter, p.Limit, MaxUniqueHoldsPage)
	}
	p.Now = UTC(p.Now)
	return nil
}

// MaxUniqueFingerprintLen bounds InsertParams.UniqueFingerprint in bytes.
const MaxUniqueFingerprintLen = 128

// checkFingerprint refuses a UniqueFingerprint longer than
// MaxUniqueFingerprintLen or with bytes other than printable ASCII.
func checkFingerprint(p *InsertParams) error {
	if len(p.UniqueFingerprint) > MaxUniqueFingerprintLen {
		return invalid("kind %q: unique fingerprint is %d bytes, over the limit of %d", p.Kind, len(p.UniqueFingerprint), MaxUniqueFingerprintLen)
	}
	for i := 0; i < len(p.UniqueFingerprint); i++ {
		if c := p.UniqueFingerprint[i]; c < 0x20 || c > 0x7e {
			return invalid("kind %q: unique fingerprint holds a byte that is not printable ASCII", p.Kind)
		}
	}
	return nil
}
