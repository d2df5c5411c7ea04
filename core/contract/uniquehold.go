package contract

import (
	"context"
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

// MaxUniqueFingerprintLen bounds InsertParams.UniqueFingerprint in bytes.
const MaxUniqueFingerprintLen = 128
