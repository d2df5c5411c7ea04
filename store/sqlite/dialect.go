package sqlite

import (
	"errors"
	"time"

	"github.com/backlogq/backlog/store/internal/sqlq"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// dialect is SQLite's sqlq.Dialect: "?" placeholders, times as INTEGER unix
// microseconds, json_insert for the errors history, RETURNING on every
// statement (SQLite ≥ 3.35), UPDATE … FROM (≥ 3.33), no row locks.
type dialect struct{ sqlq.Standard }

func (dialect) Name() string { return "sqlite" }

// pendingSQL is the condition that a job is pending (scheduled, available
// or retryable), spelt as the partial indexes on pending jobs spell it
// (schema version 12): an OR of equalities, which SQLite evaluates with
// comparisons where an IN list of three constants in an index's WHERE
// costs a temporary B-tree for every row written. SQLite uses jobs_claim,
// jobs_deadline and jobs_fair only for a statement that spells it so.
const pendingSQL = "(state = 'scheduled' OR state = 'available' OR state = 'retryable')"

// Pending implements sqlq.PendingSpeller.
func (dialect) Pending() string { return pendingSQL }

// RowsStopEarly implements sqlq.RowsStopEarly: closing rows resets the
// statement, so a list page read in one statement stops at its budget.
func (dialect) RowsStopEarly() bool { return true }

// Time encodes t as unix microseconds; the zero time is NULL.
func (dialect) Time(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMicro()
}

// Transient reports SQLITE_BUSY and SQLITE_LOCKED (any extended code).
func (dialect) Transient(err error) bool {
	var e *sqlite.Error
	if errors.As(err, &e) {
		switch e.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return true
		}
	}
	return false
}

// UniqueViolation reports SQLITE_CONSTRAINT_UNIQUE.
func (dialect) UniqueViolation(err error) bool {
	var e *sqlite.Error
	return errors.As(err, &e) && e.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE
}
