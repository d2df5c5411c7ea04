package sqlq

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

// Type names the kind of value a bind parameter carries, for dialects that
// must cast parameters whose type the server cannot infer (Postgres in a
// VALUES list).
type Type int

// Parameter types passed to Dialect.Cast.
const (
	TypeInt   Type = iota // 64-bit integer
	TypeText              // text
	TypeTime              // a time as encoded by Dialect.Time
	TypeJSON              // JSON text
	TypeBytes             // binary
	TypeBool              // boolean
)

// Stmt names a statement kind for Dialect.Returning.
type Stmt int

// Statement kinds that may or may not support RETURNING.
const (
	StmtInsert Stmt = iota
	StmtUpdate
	StmtDelete
)

// Dialect is the narrow set of hooks in which SQL databases differ for the
// statements sqlq runs (each store writes its hot path in its own
// dialect, without these hooks). Implementations must be safe for
// concurrent use (they are normally stateless values).
type Dialect interface {
	// Name is a short identifier used in error messages ("sqlite").
	Name() string

	// Placeholder returns the n-th (1-based) bind-parameter marker of a
	// statement: "?" (SQLite, MySQL) or "$n" (Postgres).
	Placeholder(n int) string

	// Cast wraps the placeholder ph so the server knows its type, where it
	// cannot infer it (Postgres: "$3::bigint"). Most dialects return ph.
	Cast(ph string, t Type) string

	// Time encodes a UTC, microsecond-precision time as a bind argument
	// (SQLite: int64 unix microseconds; others: time.Time). The zero time
	// must encode as nil (SQL NULL). Scanning accepts int64 µs, time.Time
	// and RFC 3339 text, so decoding needs no hook.
	Time(t time.Time) any

	// AppendJSON returns an expression evaluating to the JSON array column
	// col (the errors history) with the JSON value expression val
	// appended, after dropping the array's second element when it already
	// holds contract.MaxErrorEntries (SQLite: json_insert(…,'$[#]',json(val))
	// over json_remove(col,'$[1]'); Postgres: (col - 1) ||
	// jsonb_build_array(val::jsonb); MySQL: JSON_ARRAY_APPEND over
	// JSON_REMOVE(col,'$[1]')). val appears once in the expression (it may
	// be a bound parameter); col may appear several times.
	AppendJSON(col, val string) string

	// Returning reports whether statements of kind s accept a RETURNING
	// clause (MySQL: none; MariaDB: insert and delete only).
	Returning(s Stmt) bool

	// InsertIgnore returns the verb and suffix of an INSERT that silently
	// skips rows violating a unique index: ("INSERT INTO", " ON CONFLICT DO
	// NOTHING") or ("INSERT IGNORE INTO", "").
	InsertIgnore() (verb, suffix string)

	// UpdateFrom renders an UPDATE of table joined by primary key with a
	// derived table named alias whose columns are cols and whose rows are
	// rows, each the already-rendered placeholders of one row's values in
	// the order of cols. set and where may refer to alias.col and
	// table.col; returning is "" or a column list for a RETURNING clause
	// (only passed when Returning(StmtUpdate)). Bind parameters must appear
	// in the text in the order rows, set, where.
	UpdateFrom(table, alias string, cols []string, rows [][]string, set, where, returning string) string

	// DeleteLimit renders a DELETE of at most limit (a placeholder) rows of
	// table matching where, oldest by order first: SQLite/Postgres
	// "DELETE FROM t WHERE id IN (SELECT id FROM t WHERE … ORDER BY … LIMIT ?)";
	// MySQL "DELETE FROM t WHERE … ORDER BY … LIMIT ?".
	DeleteLimit(table, where, order, limit string) string

	// DeleteLimitBy is DeleteLimit for a table whose key column is key
	// (DeleteLimit is DeleteLimitBy with key "id").
	DeleteLimitBy(table, key, where, order, limit string) string

	// InsertOrLock returns the verb and suffix of an INSERT that, for a
	// row whose key column key conflicts with an existing row, inserts
	// nothing and fails nothing: ("INSERT INTO", " ON CONFLICT DO
	// NOTHING"), or on MySQL ("INSERT INTO", " ON DUPLICATE KEY UPDATE
	// key = key"), which also takes the existing row's exclusive lock
	// (INSERT IGNORE would take a shared one, and two inserters
	// upgrading theirs deadlock).
	InsertOrLock(key string) (verb, suffix string)

	// CurrentRead returns the clause appended to a SELECT so that it
	// reads the latest committed rows even inside a transaction holding
	// an older snapshot: " LOCK IN SHARE MODE" on MySQL (REPEATABLE READ),
	// "" where each statement reads the latest committed rows already
	// (PostgreSQL at READ COMMITTED; SQLite, whose write transaction
	// excludes every other writer).
	CurrentRead() string

	// AddMicros returns an expression adding us microseconds (an integer
	// expression) to the time expression t, in the store's time encoding
	// (SQLite: t + us on unix microseconds).
	AddMicros(t, us string) string

	// LockSuffix returns the clause appended to a SELECT to lock the rows it
	// reads: " FOR UPDATE", or " FOR UPDATE SKIP LOCKED" when skipLocked.
	// It returns "" when the database has no row locks (SQLite, where every
	// write transaction already holds the database lock); a dialect returning
	// "" for skipLocked cannot run contract.StrategySkipLocked.
	LockSuffix(skipLocked bool) string

	// MaxParams is the most bind parameters one statement may carry.
	MaxParams() int

	// Transient reports whether err is worth retrying after a short wait
	// (SQLITE_BUSY, deadlock 1213, lock wait timeout 1205, serialization
	// failure 40001, …). The statement or transaction that failed must have
	// taken no effect.
	Transient(err error) bool

	// UniqueViolation reports whether err is a unique-index violation.
	UniqueViolation(err error) bool

	// ArgsContain returns a condition, for List's WHERE clause, that
	// holds when the JSON column col contains the args search pattern
	// (core.ListParams.ArgsContains: pattern as given, leaves as
	// contract.ParseArgsPattern returned them, at least one) and is not
	// sealed (no top-level "backlog_enc" key). arg binds a value and
	// returns its placeholder, cast to t where the dialect casts. Standard
	// uses SQLite's json_type and json_extract, one test per leaf;
	// Postgres uses jsonb containment (col @> pattern), MySQL JSON_CONTAINS
	// per leaf.
	ArgsContain(col string, pattern []byte, leaves []contract.ArgsLeaf, arg func(v any, t Type) string) string
}

// Standard implements every Dialect hook in the form SQLite and Postgres
// share, with "?" placeholders, RETURNING everywhere, ON CONFLICT DO NOTHING,
// CTE-based UPDATE … FROM and no row locks. Dialects embed it and override
// what differs; Time, AppendJSON, Transient and UniqueViolation must be
// overridden (Standard's versions encode time.Time, use SQLite's JSON
// functions and never classify errors).
type Standard struct{}

// Name returns "standard".
func (Standard) Name() string { return "standard" }

// Placeholder returns "?".
func (Standard) Placeholder(int) string { return "?" }

// Cast returns ph unchanged.
func (Standard) Cast(ph string, _ Type) string { return ph }

// Time returns t, or nil for the zero time.
func (Standard) Time(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

// AppendJSON uses SQLite's json_insert, after json_remove of the second
// element of a full history (contract.MaxErrorEntries).
func (Standard) AppendJSON(col, val string) string {
	return "json_insert(CASE WHEN json_array_length(" + col + ") >= " + strconv.Itoa(contract.MaxErrorEntries) +
		" THEN json_remove(" + col + ",'$[1]') ELSE " + col + " END,'$[#]',json(" + val + "))"
}

// Returning reports true for every statement kind.
func (Standard) Returning(Stmt) bool { return true }

// InsertIgnore returns ON CONFLICT DO NOTHING.
func (Standard) InsertIgnore() (string, string) { return "INSERT INTO", " ON CONFLICT DO NOTHING" }

// UpdateFrom renders
// WITH alias(cols) AS (VALUES rows) UPDATE table SET set FROM alias WHERE where [RETURNING …].
func (Standard) UpdateFrom(table, alias string, cols []string, rows [][]string, set, where, returning string) string {
	var b strings.Builder
	b.WriteString("WITH ")
	b.WriteString(alias)
	b.WriteString("(")
	b.WriteString(strings.Join(cols, ","))
	b.WriteString(") AS (VALUES ")
	for i, r := range rows {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("(")
		b.WriteString(strings.Join(r, ","))
		b.WriteString(")")
	}
	b.WriteString(") UPDATE ")
	b.WriteString(table)
	b.WriteString(" SET ")
	b.WriteString(set)
	b.WriteString(" FROM ")
	b.WriteString(alias)
	b.WriteString(" WHERE ")
	b.WriteString(where)
	if returning != "" {
		b.WriteString(" RETURNING ")
		b.WriteString(returning)
	}
	return b.String()
}

// DeleteLimit renders DELETE … WHERE id IN (SELECT id … ORDER BY … LIMIT ?).
func (d Standard) DeleteLimit(table, where, order, limit string) string {
	return d.DeleteLimitBy(table, "id", where, order, limit)
}

// DeleteLimitBy renders DELETE … WHERE key IN (SELECT key … ORDER BY … LIMIT ?).
func (Standard) DeleteLimitBy(table, key, where, order, limit string) string {
	return "DELETE FROM " + table + " WHERE " + key + " IN (SELECT " + key + " FROM " + table + " WHERE " + where + " ORDER BY " + order + " LIMIT " + limit + ")"
}

// InsertOrLock returns ON CONFLICT DO NOTHING.
func (Standard) InsertOrLock(string) (string, string) {
	return "INSERT INTO", " ON CONFLICT DO NOTHING"
}

// CurrentRead returns "".
func (Standard) CurrentRead() string { return "" }

// AddMicros returns (t + us): times as unix microseconds.
func (Standard) AddMicros(t, us string) string { return "(" + t + " + " + us + ")" }

// LockSuffix returns "" (no row locks).
func (Standard) LockSuffix(bool) string { return "" }

// MaxParams returns 32766, SQLite's default limit since 3.32.
func (Standard) MaxParams() int { return 32766 }

// Transient reports false.
func (Standard) Transient(error) bool { return false }

// UniqueViolation reports false.
func (Standard) UniqueViolation(error) bool { return false }

// ArgsContain tests each leaf with SQLite's json_type (the value's type:
// 'text', 'integer' or 'real', 'true', 'false', 'null') and, for strings
// and numbers, json_extract (its value): a missing path, an array or an
// object where a scalar is wanted has another type or none.
func (Standard) ArgsContain(col string, _ []byte, leaves []contract.ArgsLeaf, arg func(v any, t Type) string) string {
	var b strings.Builder
	b.WriteString("(json_type(" + col + ", '$.backlog_enc') IS NULL")
	for _, l := range leaves {
		path := l.JSONPath()
		switch l.Type() {
		case "string":
			b.WriteString(" AND json_type(" + col + ", " + arg(path, TypeText) + ") = 'text' AND json_extract(" + col + ", " + arg(path, TypeText) + ") = " + arg(l.String(), TypeText))
		case "number":
			b.WriteString(" AND json_type(" + col + ", " + arg(path, TypeText) + ") IN ('integer','real') AND json_extract(" + col + ", " + arg(path, TypeText) + ") = " + arg(l.Number(), TypeText))
		default: // true, false, null: the type says it all
			b.WriteString(" AND json_type(" + col + ", " + arg(path, TypeText) + ") = '" + l.Type() + "'")
		}
	}
	b.WriteString(")")
	return b.String()
}

// Dollar is a Placeholder implementation for "$n" dialects (Postgres).
func Dollar(n int) string { return "$" + strconv.Itoa(n) }

// Tables names the tables a store uses, already prefixed or schema
// qualified (and quoted, if needed) as the SQL must spell them.
type Tables struct {
	Jobs    string // e.g. "backlog_jobs" or "backlog.jobs"
	Queues  string // e.g. "backlog_queues"
	Workers string // e.g. "backlog_workers"
	// Settings is the contract.Settings table, e.g. "backlog_settings"; ""
	// means none (the settings methods return core.ErrUnsupported).
	Settings string
	// Holds is the unique-key holds table (see InsertKeyed), e.g.
	// "backlog_unique_keys".
	Holds string
	// Rates is the rate-limit state table (queue, grp, tat: one GCRA
	// instant per rate-limited group, see core.RateLimit), e.g.
	// "backlog_queue_rates".
	Rates string
	// Archive is the archive of finished jobs (contract.Archiver), a
	// table of the jobs table's columns, e.g. "backlog_jobs_archive"; ""
	// means none (the archive methods return core.ErrUnsupported).
	Archive string
	// Deps is the dependency edges table (contract.Dependencies): one row
	// (dep_id, job_id, settled) per job job_id waits for, e.g.
	// "backlog_job_deps".
	Deps string
}

// PrefixTables returns Tables named prefix+"jobs", prefix+"queues",
// prefix+"workers", prefix+"settings", prefix+"unique_keys",
// prefix+"queue_rates", prefix+"jobs_archive" and prefix+"job_deps". prefix
// must be a valid identifier part (see ValidPrefix).
func PrefixTables(prefix string) Tables {
	return Tables{Jobs: prefix + "jobs", Queues: prefix + "queues", Workers: prefix + "workers", Settings: prefix + "settings", Holds: prefix + "unique_keys", Rates: prefix + "queue_rates", Archive: prefix + "jobs_archive", Deps: prefix + "job_deps"}
}

// ValidPrefix reports an error unless prefix is at most 48 bytes of ASCII
// letters, digits and underscores not starting with a digit (it is pasted
// into SQL text, so nothing else is allowed). The empty prefix is valid.
func ValidPrefix(prefix string) error {
	if len(prefix) > 48 {
		return errors.New("table prefix longer than 48 bytes")
	}
	for i, r := range prefix {
		ok := r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || (i > 0 && r >= '0' && r <= '9')
		if !ok {
			return errors.New("table prefix " + strconv.Quote(prefix) + " may hold only ASCII letters, digits and '_' and must not start with a digit")
		}
	}
	return nil
}
