package postgres

import (
	"errors"
	"strconv"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/internal/sqlq"
	"github.com/jackc/pgx/v5/pgconn"
)

// dialect is PostgreSQL's sqlq.Dialect: "$n" placeholders with casts where
// the server cannot infer a type, timestamptz times, jsonb for JSON,
// RETURNING everywhere, ON CONFLICT DO NOTHING, UPDATE … FROM (VALUES …)
// and row locks with SKIP LOCKED.
type dialect struct{ sqlq.Standard }

func (dialect) Name() string { return "postgres" }

// RunAtIndexSkipsRunning tells sqlq's lists that jobs_run_at_idle (schema
// version 14) holds no running job: a list in run_at order reads running
// jobs apart (sqlq.Store.ListQuery).
func (dialect) RunAtIndexSkipsRunning() bool { return true }

func (dialect) Placeholder(n int) string { return sqlq.Dollar(n) }

func (dialect) Cast(ph string, t sqlq.Type) string {
	switch t {
	case sqlq.TypeInt:
		return ph + "::bigint"
	case sqlq.TypeText:
		return ph + "::text"
	case sqlq.TypeTime:
		return ph + "::timestamptz"
	case sqlq.TypeJSON:
		return ph + "::jsonb"
	case sqlq.TypeBytes:
		return ph + "::bytea"
	case sqlq.TypeBool:
		return ph + "::boolean"
	}
	return ph
}

// AppendJSON appends the jsonb value val to the jsonb array col (NULL
// counts as empty), after removing its second element when it already
// holds contract.MaxErrorEntries.
func (dialect) AppendJSON(col, val string) string {
	c := "COALESCE(" + col + ",'[]'::jsonb)"
	return "(CASE WHEN jsonb_array_length(" + c + ") >= " + strconv.Itoa(contract.MaxErrorEntries) +
		" THEN " + c + " - 1 ELSE " + c + " END) || jsonb_build_array(" + val + "::jsonb)"
}

func (dialect) LockSuffix(skipLocked bool) string {
	if skipLocked {
		return " FOR UPDATE SKIP LOCKED"
	}
	return " FOR UPDATE"
}

// AddMicros adds us microseconds to the timestamptz t.
func (dialect) AddMicros(t, us string) string {
	return "(" + t + " + (" + us + ") * interval '1 microsecond')"
}

// MaxParams is the protocol's limit of 65535 bind parameters.
func (dialect) MaxParams() int { return 65535 }

func (dialect) Transient(err error) bool { return transient(err) }

func (dialect) UniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// transient reports errors after which the failed statement or transaction
// took no effect and is worth running again: serialization failure
// (40001), deadlock (40P01), lock not available (55P03), and errors that
// pgx says happened before anything was sent to the server (a connection
// lost while idle in the pool, for example).
func transient(err error) bool {
	if err == nil {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "40001", "40P01", "55P03":
			return true
		}
		return false
	}
	return pgconn.SafeToRetry(err)
}

// ArgsContain is jsonb containment, which a GIN index on args could serve;
// sealed args (a top-level "backlog_enc" key) never match.
func (dialect) ArgsContain(col string, pattern []byte, _ []contract.ArgsLeaf, arg func(v any, t sqlq.Type) string) string {
	return "(" + col + " @> " + arg(string(pattern), sqlq.TypeJSON) + " AND " + col + " -> 'backlog_enc' IS NULL)"
}
