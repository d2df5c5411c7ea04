package mysql

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/backlogq/backlog/core/contract"

	"github.com/go-sql-driver/mysql"

	"github.com/backlogq/backlog/store/internal/sqlq"
)

// MySQL and MariaDB error numbers the store classifies.
const (
	errDupEntry        = 1062 // ER_DUP_ENTRY
	errLockWaitTimeout = 1205 // ER_LOCK_WAIT_TIMEOUT
	errLockDeadlock    = 1213 // ER_LOCK_DEADLOCK (also a Galera certification failure)
	errCheckRead       = 1020 // ER_CHECKREAD: record changed since last read (MariaDB snapshot isolation)
	errLockNoWait      = 3572 // ER_LOCK_NOWAIT
)

// timeLayout is how times are sent: UTC wall clock with microseconds, which
// a DATETIME(6) column stores as is, whatever the session time zone.
const timeLayout = "2006-01-02 15:04:05.000000"

// dialect is the sqlq.Dialect of MySQL 8.0.1+ and MariaDB 10.6+: "?"
// placeholders, times as UTC DATETIME(6) text, JSON_ARRAY_APPEND for the
// errors history, no UPDATE … RETURNING (MariaDB has INSERT and DELETE …
// RETURNING), INSERT IGNORE, UPDATE … JOIN a derived table, DELETE … ORDER
// BY … LIMIT, and row locks (SKIP LOCKED when the server has it).
type dialect struct {
	sqlq.Standard
	server serverInfo
	// noReturning hides MariaDB's INSERT/DELETE … RETURNING, so tests run
	// MySQL's statement forms on MariaDB.
	noReturning bool
}

// Name returns "mysql" or "mariadb".
func (d dialect) Name() string {
	if d.server.mariaDB {
		return "mariadb"
	}
	return "mysql"
}

// Time encodes t as UTC "YYYY-MM-DD hh:mm:ss.ffffff" text; the zero time is
// NULL. Text rather than time.Time keeps the instant independent of the
// driver's loc setting.
func (dialect) Time(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(timeLayout)
}

// AppendJSON appends the JSON text val to the JSON array col (NULL counts
// as empty), after removing its second element when it already holds
// contract.MaxErrorEntries. JSON_EXTRACT(val,'$') makes the text a JSON value on both
// servers (MariaDB has no CAST … AS JSON).
func (dialect) AppendJSON(col, val string) string {
	c := "COALESCE(" + col + ",'[]')"
	return "JSON_ARRAY_APPEND(IF(JSON_LENGTH(" + c + ") >= " + strconv.Itoa(contract.MaxErrorEntries) +
		", JSON_REMOVE(" + c + ",'$[1]'), " + c + "),'$',JSON_EXTRACT(" + val + ",'$'))"
}

// Returning reports RETURNING for INSERT and DELETE on MariaDB only.
func (d dialect) Returning(s sqlq.Stmt) bool {
	return d.server.mariaDB && !d.noReturning && (s == sqlq.StmtInsert || s == sqlq.StmtDelete)
}

// InsertIgnore returns INSERT IGNORE.
func (dialect) InsertIgnore() (string, string) { return "INSERT IGNORE INTO", "" }

// UpdateFrom renders UPDATE table JOIN (SELECT … UNION ALL SELECT …) alias
// ON TRUE SET … WHERE …. Neither server has UPDATE … RETURNING, so
// returning is never passed (Returning(StmtUpdate) is false).
func (dialect) UpdateFrom(table, alias string, cols []string, rows [][]string, set, where, _ string) string {
	var b strings.Builder
	b.WriteString("UPDATE ")
	b.WriteString(table)
	b.WriteString(" JOIN (")
	for i, vals := range rows {
		if i > 0 {
			b.WriteString(" UNION ALL ")
		}
		b.WriteString("SELECT ")
		for k, v := range vals {
			if k > 0 {
				b.WriteString(",")
			}
			b.WriteString(v)
			if i == 0 {
				b.WriteString(" AS ")
				b.WriteString(cols[k])
			}
		}
	}
	b.WriteString(") ")
	b.WriteString(alias)
	b.WriteString(" ON TRUE SET ")
	b.WriteString(set)
	b.WriteString(" WHERE ")
	b.WriteString(where)
	return b.String()
}

// DeleteLimit renders DELETE … WHERE … ORDER BY … LIMIT ?.
func (dialect) DeleteLimit(table, where, order, limit string) string {
	return "DELETE FROM " + table + " WHERE " + where + " ORDER BY " + order + " LIMIT " + limit
}

// DeleteLimitBy renders DELETE … WHERE … ORDER BY … LIMIT ?; key is not
// needed.
func (dialect) DeleteLimitBy(table, _, where, order, limit string) string {
	return "DELETE FROM " + table + " WHERE " + where + " ORDER BY " + order + " LIMIT " + limit
}

// InsertOrLock returns ON DUPLICATE KEY UPDATE key = key, which changes
// nothing but takes the existing row's exclusive lock.
func (dialect) InsertOrLock(key string) (string, string) {
	return "INSERT INTO", " ON DUPLICATE KEY UPDATE " + key + " = " + key
}

// CurrentRead returns " LOCK IN SHARE MODE": a locking read sees the
// latest committed row, whatever the transaction's snapshot.
func (dialect) CurrentRead() string { return " LOCK IN SHARE MODE" }

// AddMicros adds us microseconds to the DATETIME(6) t.
func (dialect) AddMicros(t, us string) string {
	return "DATE_ADD(CAST(" + t + " AS DATETIME(6)), INTERVAL " + us + " MICROSECOND)"
}

// LockSuffix returns " FOR UPDATE SKIP LOCKED" when asked and the server
// has it, else " FOR UPDATE".
func (d dialect) LockSuffix(skipLocked bool) string {
	if skipLocked && d.server.skipLocked() {
		return " FOR UPDATE SKIP LOCKED"
	}
	return " FOR UPDATE"
}

// MaxParams returns 65535, the prepared-statement limit.
func (dialect) MaxParams() int { return 65535 }

// Transient reports deadlocks (1213, which is also how Galera reports a
// certification conflict or a brute-force abort: "WSREP detected
// deadlock/conflict and aborted the transaction"), lock wait timeouts
// (1205), MariaDB's "record changed since last read" (1020), NOWAIT
// failures (3572) and a Galera node's "WSREP has not yet prepared node for
// application use" (1047, while it joins or is cut off). Each means the
// statement or transaction took no effect.
func (dialect) Transient(err error) bool { return transient(err) }

func transient(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case errLockDeadlock, errLockWaitTimeout, errCheckRead, errLockNoWait:
			return true
		}
	}
	return wsrepNotReady(err)
}

// UniqueViolation reports a duplicate key (1062).
func (dialect) UniqueViolation(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == errDupEntry
}

// ArgsContain tests each leaf at its path: a string by its type and its
// unquoted bytes, other scalars with JSON_CONTAINS (numbers by value),
// refusing an array there
// (JSON_CONTAINS would look inside it, PostgreSQL's containment does not);
// sealed args (a top-level "backlog_enc" key) never match. The same text
// runs on MySQL and MariaDB.
func (dialect) ArgsContain(col string, _ []byte, leaves []contract.ArgsLeaf, arg func(v any, t sqlq.Type) string) string {
	var b strings.Builder
	b.WriteString("(JSON_EXTRACT(" + col + ", '$.backlog_enc') IS NULL")
	for _, l := range leaves {
		path := l.JSONPath()
		if l.Type() == "string" {
			// JSON_CONTAINS compares MariaDB's stored text with its
			// escapes ("\u00f6"); JSON_UNQUOTE decodes them.
			b.WriteString(" AND JSON_TYPE(JSON_EXTRACT(" + col + ", " + arg(path, sqlq.TypeText) + ")) = 'STRING'")
			b.WriteString(" AND CAST(JSON_UNQUOTE(JSON_EXTRACT(" + col + ", " + arg(path, sqlq.TypeText) + ")) AS BINARY) = CAST(" + arg(l.String(), sqlq.TypeText) + " AS BINARY)")
			continue
		}
		b.WriteString(" AND JSON_CONTAINS(" + col + ", " + arg(string(l.Value), sqlq.TypeText) + ", " + arg(path, sqlq.TypeText) + ")")
		b.WriteString(" AND JSON_TYPE(JSON_EXTRACT(" + col + ", " + arg(path, sqlq.TypeText) + ")) <> 'ARRAY'")
	}
	b.WriteString(")")
	return b.String()
}

// DuplicateKeyUpdate implements sqlq.DuplicateKeyUpserter: the history's
// additive upserts are INSERT … ON DUPLICATE KEY UPDATE c = c + VALUES(c)
// (VALUES() still works on MySQL 8.0.20+, where it is deprecated in
// favour of a row alias that MariaDB lacks).
func (dialect) DuplicateKeyUpdate() bool { return true }
