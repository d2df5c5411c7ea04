package cli

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/backlogq/backlog/core/contract"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/backlogq/backlog/core"
)

// Start-up of work and serve during a database outage: instead of exiting
// at once (and, under a supervisor without a restart delay, exiting again
// many times a second), they keep retrying while the error looks like the
// database being unreachable, and fail at once on anything else.

// Retry delays while waiting for the database: doubling from the first to
// the last, with jitter.
const (
	dbWaitFirstDelay = 100 * time.Millisecond
	dbWaitMaxDelay   = 5 * time.Second
)

// dbWait is the value of --wait-for-db: how long start-up keeps retrying an
// unreachable database.
type dbWait struct {
	d       time.Duration // with forever false: 0 = fail at once
	forever bool
}

func (w *dbWait) String() string {
	if w.forever {
		return "forever"
	}
	return w.d.String()
}

// Set reads a duration, 0, or "forever".
func (w *dbWait) Set(s string) error {
	s = strings.TrimSpace(s)
	if strings.EqualFold(s, "forever") {
		*w = dbWait{forever: true}
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return fmt.Errorf("want a duration such as 30s or 5m, 0 (fail at once) or forever")
	}
	*w = dbWait{d: d}
	return nil
}

func (w *dbWait) Type() string { return "duration" }

// errStoppedWaiting ends a start-up that was stopped (signal, context)
// while it waited for the database.
type errStoppedWaiting struct{ why string }

func (e errStoppedWaiting) Error() string { return e.why + " while waiting for the database" }

// openStoreWaiting opens the store at rawURL, migrates it when doMigrate,
// and checks that it answers. While that fails with an error that looks
// like the database being unreachable (dbUnreachable) it retries, with
// capped exponential backoff, for as long as wait allows. It logs one line
// when it starts waiting and one when the database answers. A signal on
// sigs or the end of ctx stops the wait, and an attempt under way, with an
// errStoppedWaiting.
func (a *app) openStoreWaiting(ctx context.Context, rawURL string, doMigrate bool, wait dbWait, sigs <-chan os.Signal) (contract.Store, error) {
	a.waitingForDB.Store(true)
	defer a.waitingForDB.Store(false)
	// A signal also ends an attempt under way (a connect to an address
	// that does not answer can take minutes).
	actx, cancel := context.WithCancelCause(ctx)
	stopWatch, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case sig := <-sigs:
			cancel(errStoppedWaiting{why: "received " + sig.String()})
		case <-stopWatch:
		}
	}()
	defer func() {
		close(stopWatch)
		<-watched // later signals are the caller's
		cancel(nil)
	}()
	stopped := func() error {
		if e, ok := errors.AsType[errStoppedWaiting](context.Cause(actx)); ok {
			return e
		}
		return errStoppedWaiting{why: "context ended"}
	}

	start := time.Now()
	waiting := false
	for attempt := 0; ; attempt++ {
		st, err := connectStore(actx, rawURL, doMigrate)
		if err == nil && actx.Err() != nil { // a signal just as it succeeded
			st.Close()
			return nil, stopped()
		}
		if err == nil {
			if waiting {
				a.log.Info("database reachable: starting", "db", redactURL(rawURL), "waited", roundDur(time.Since(start)))
			}
			return st, nil
		}
		if actx.Err() != nil {
			return nil, stopped()
		}
		if !dbUnreachable(err) {
			return nil, err
		}
		err = explainConnError(err)
		if !wait.forever && wait.d == 0 {
			return nil, fmt.Errorf("database unreachable (--wait-for-db=DURATION waits for it): %w", err)
		}
		waited := time.Since(start)
		if !wait.forever && waited >= wait.d {
			return nil, fmt.Errorf("database unreachable for %s, gave up (--wait-for-db=%s): %w", roundDur(waited), wait.d, err)
		}
		delay := min(dbWaitFirstDelay<<min(attempt, 16), dbWaitMaxDelay)
		delay = delay/2 + rand.N(delay/2+1)
		if !wait.forever {
			delay = min(delay, wait.d-waited)
		}
		if !waiting {
			waiting = true
			until := "until it answers"
			if !wait.forever {
				until = "for up to " + wait.d.String()
			}
			a.log.Warn("database unreachable; retrying "+until+" (--wait-for-db)", "db", redactURL(rawURL), "err", err)
		} else {
			a.log.Debug("database still unreachable", "attempt", attempt+1, "retry_in", delay, "err", err)
		}
		t := time.NewTimer(delay)
		select {
		case <-actx.Done():
			t.Stop()
			return nil, stopped()
		case <-t.C:
		}
	}
}

// connectStore opens the store at rawURL, migrates it when doMigrate, and
// checks that the database can be reached (opening with migrate=false in
// the URL need not connect). On failure it closes what it opened.
func connectStore(ctx context.Context, rawURL string, doMigrate bool) (contract.Store, error) {
	st, err := openStoreURL(ctx, rawURL)
	if err != nil {
		return nil, err
	}
	if doMigrate {
		if _, err := migrate(ctx, st); err != nil {
			st.Close()
			return nil, err
		}
	}
	// Any other error of this probe is left to the first real query, as
	// before there was a probe.
	if _, err := st.Get(ctx, 0); err != nil && !errors.Is(err, core.ErrNotFound) && dbUnreachable(err) {
		st.Close()
		return nil, fmt.Errorf("store %s: %w", redactURL(rawURL), err)
	}
	return st, nil
}

// dbUnreachable reports whether err looks like the database being down,
// starting, restarting or out of reach, rather than a configuration error
// (bad URL, unknown scheme, wrong password, missing database), which
// waiting would not fix.
func dbUnreachable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	// An answer from the server decides by itself.
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "08"), // connection exception
			pe.Code == "57P01", // admin_shutdown: terminating connection due to administrator command
			pe.Code == "57P02", // crash_shutdown
			pe.Code == "57P03", // cannot_connect_now: the database system is starting up / shutting down / in recovery
			pe.Code == "53300": // too_many_connections
			return true
		}
		return false
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case 1040, // ER_CON_COUNT_ERROR: too many connections
			1053, // ER_SERVER_SHUTDOWN: server shutdown in progress
			1927: // ER_CONNECTION_KILLED (MariaDB)
			return true
		case 1047: // ER_UNKNOWN_COM_ERROR, which a Galera node not yet synced returns
			return strings.Contains(me.Message, "WSREP")
		}
		return false
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return true
		}
		return false
	}
	// The connection itself.
	if errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM) {
		return false // a socket this user may not use
	}
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, mysql.ErrInvalidConn), errors.Is(err, driver.ErrBadConn),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.ETIMEDOUT),
		errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH),
		errors.Is(err, syscall.EPIPE),
		errors.Is(err, context.DeadlineExceeded): // a driver's connect timeout
		return true
	}
	var de *net.DNSError
	if errors.As(err, &de) {
		// Also "no such host": container platforms publish the database's
		// name only once it runs.
		return de.IsNotFound || de.IsTimeout || de.IsTemporary
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "dial" {
		// For example a Unix socket that is not there while the server is down.
		return true
	}
	return false
}

// explainConnError adds what the MySQL driver's bare "invalid connection"
// means at start-up.
func explainConnError(err error) error {
	if errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, driver.ErrBadConn) {
		return fmt.Errorf("%w (the server closed the connection: it was likely restarted or killed)", err)
	}
	return err
}

// setMySQLLogger routes the MySQL driver's log (lines such as "packets.go:58
// unexpected EOF", printed to stderr by default) to print.
func setMySQLLogger(print func(v ...any)) { _ = mysql.SetLogger(mysqlLogger(print)) }

type mysqlLogger func(v ...any)

func (f mysqlLogger) Print(v ...any) { f(v...) }
