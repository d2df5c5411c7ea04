package apitypes

import (
	"time"

	"github.com/backlogq/backlog/core"
)

// UniqueHold is one hold on a unique key, as GET /v1/unique lists it,
// DELETE /v1/unique/{key} returns it and `backlog -o json unique list`
// prints it (core.UniqueHold; the unique_key_holds of openapi.json).
type UniqueHold struct {
	// Key is the unique key as the job gave it; Scope is global, queue or
	// kind; ScopedKey is the key within its scope (the hold's identity,
	// contract.ScopedUniqueKey).
	Key       string `json:"key"`
	Scope     string `json:"scope"`
	ScopedKey string `json:"scoped_key"`
	Queue     string `json:"queue"`
	Kind      string `json:"kind"`
	// JobID is the holding job; JobGone says its row was deleted or
	// pruned (the key stays held until Until all the same), and State is
	// its state otherwise.
	JobID   int64      `json:"job_id"`
	JobGone bool       `json:"job_gone"`
	State   core.State `json:"state,omitempty"`
	// UniqueForSeconds is the holder's window after it is final.
	UniqueForSeconds float64 `json:"unique_for_seconds"`
	// Until is when the hold ends (RFC 3339, UTC); absent while the
	// holder is not final (held for as long as it lives).
	Until *time.Time `json:"until,omitempty"`
}

// UniqueHoldFromCore converts a hold to its API form (times in UTC).
func UniqueHoldFromCore(h core.UniqueHold) UniqueHold {
	out := UniqueHold{
		Key: h.Key, Scope: h.Scope.String(), ScopedKey: h.ScopedKey, Queue: h.Queue, Kind: h.Kind,
		JobID: h.JobID, JobGone: h.JobGone, State: h.State, UniqueForSeconds: h.UniqueFor.Seconds(),
	}
	if !h.Until.IsZero() {
		u := h.Until.UTC()
		out.Until = &u
	}
	return out
}

// Core converts h back to a core.UniqueHold (the window rounded to
// microseconds; an unknown scope reads as the zero scope).
func (h UniqueHold) Core() core.UniqueHold {
	sc, _ := core.ParseUniqueScope(h.Scope)
	out := core.UniqueHold{
		ScopedKey: h.ScopedKey, Key: h.Key, Scope: sc, Queue: h.Queue, Kind: h.Kind, JobID: h.JobID, JobGone: h.JobGone,
		State: h.State, UniqueFor: time.Duration(h.UniqueForSeconds * float64(time.Second)).Round(time.Microsecond),
	}
	if h.Until != nil {
		out.Until = h.Until.UTC()
	}
	return out
}
