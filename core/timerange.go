package core

import (
	"fmt"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

// MinTime and MaxTime bound every time a job carries (run_at, deadline,
// and the due time of a retry, snooze or continuation): the engine accepts
// a time only when, converted to UTC, it lies within [MinTime, MaxTime].
//
// MaxTime, 9999-12-31T23:59:59.999999Z, is the last microsecond that every
// edge can carry: RFC 3339 has four-digit years, so encoding/json refuses to
// write a later time and the HTTP API could not answer a request that holds
// one; MySQL and MariaDB DATETIME(6) columns end there too. A time like
// 9999-12-31T23:59:59-14:00 is 10000-01-01T13:59:59Z in UTC, so it is out
// of range although its text has a four-digit year.
//
// MinTime, 1970-01-01T00:00:00Z (the Unix epoch), is earlier than any real
// job time; rejecting earlier times catches zero-ish values such as year 1
// or negative Unix times that a producer computed by mistake, and keeps
// every store's encoding (Unix microseconds on SQLite) non-negative.
//
// Both are in UTC and are not to be modified.
var (
	MinTime = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	MaxTime = time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)
)

// ValidateTime reports whether t can be a job time. The zero time (unset)
// is valid; any other t is valid when UTC(t) lies within [MinTime,
// MaxTime]. Otherwise the error wraps ErrInvalidJob and names field (such
// as "run_at" or "deadline") and the range.
func ValidateTime(field string, t time.Time) error {
	if msg := timeOutOfRange(field, t); msg != "" {
		return invalid("%s", msg)
	}
	return nil
}

// timeOutOfRange returns why t cannot be a job time named field, or ""
// when it can (the zero time can: it means unset).
func timeOutOfRange(field string, t time.Time) string {
	if t.IsZero() || InTimeRange(t) {
		return ""
	}
	return fmt.Sprintf("%s %s is outside the supported range %s … %s (UTC)", field, formatTime(t),
		MinTime.Format(time.RFC3339Nano), MaxTime.Format(time.RFC3339Nano))
}

// InTimeRange reports whether t, converted to UTC and truncated to
// microseconds, lies within [MinTime, MaxTime]. The zero time is not in
// range.
func InTimeRange(t time.Time) bool {
	if t.IsZero() {
		return false
	}
	u := contract.UTC(t)
	return !u.Before(MinTime) && !u.After(MaxTime)
}

// ClampTime returns t in UTC to the microsecond, moved into [MinTime,
// MaxTime] when it lies outside; the zero time stays zero. Computed times
// (now plus a delay) go through it so they can never leave the range.
func ClampTime(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	u := contract.UTC(t)
	switch {
	case u.Before(MinTime):
		return MinTime
	case u.After(MaxTime):
		return MaxTime
	}
	return u
}

// formatTime writes t as RFC 3339 with its own offset and, when that is
// not UTC, its UTC instant too, so a message shows why a time with a
// four-digit year can be out of range.
func formatTime(t time.Time) string {
	s := t.Format(time.RFC3339Nano)
	if _, off := t.Zone(); off != 0 {
		s = fmt.Sprintf("%s (%s)", s, t.UTC().Format(time.RFC3339Nano))
	}
	return s
}
