package cli

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// closedPort returns a local TCP port that nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

// running is a command line running in-process with a fake signal channel.
type running struct {
	sigs           chan os.Signal
	done           chan int
	stdout, stderr *syncBuffer
	start          time.Time
}

func startRun(t *testing.T, ctx context.Context, args ...string) *running {
	t.Helper()
	e, out, errb := testEnv("")
	r := &running{sigs: make(chan os.Signal, 2), done: make(chan int, 1), stdout: out, stderr: errb, start: time.Now()}
	e.notifySignals = func() (<-chan os.Signal, func()) { return r.sigs, func() {} }
	ctx, cancel := context.WithCancel(ctx)
	go func() { r.done <- run(ctx, e, args) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(20 * time.Second):
			t.Errorf("backlog %s did not stop", strings.Join(args, " "))
		}
	})
	return r
}

// wait returns the exit code, failing the test after timeout.
func (r *running) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case code := <-r.done:
		r.done <- code // for the cleanup
		return code
	case <-time.After(timeout):
		t.Fatalf("still running after %s\nstdout:\n%s\nstderr:\n%s", timeout, r.stdout, r.stderr)
		return -1
	}
}

func (r *running) String() string {
	return fmt.Sprintf("--- stdout\n%s--- stderr\n%s", r.stdout, r.stderr)
}

// TestWaitForDBWaitsAndStops: with the database down, work keeps trying,
// logs that once, and stops on a signal.
func TestWaitForDBWaitsAndStops(t *testing.T) {
	t.Parallel()
	db := fmt.Sprintf("postgres://root@127.0.0.1:%d/test?sslmode=disable", closedPort(t))
	r := startRun(t, context.Background(), "--db", db, "work", "--handler", "a=true")
	time.Sleep(1200 * time.Millisecond)
	select {
	case code := <-r.done:
		t.Fatalf("exited with %d instead of waiting\n%s", code, r)
	default:
	}
	errs := r.stderr.String()
	if n := strings.Count(errs, "database unreachable"); n != 1 || !strings.Contains(errs, "connection refused") ||
		!strings.Contains(errs, "retrying until it answers") {
		t.Fatalf("want one waiting line with the error, got %d\n%s", n, r)
	}
	r.sigs <- os.Interrupt
	if code := r.wait(t, 5*time.Second); code != exitOK {
		t.Fatalf("exit %d\n%s", code, r)
	}
	if !strings.Contains(r.stdout.String(), "received interrupt while waiting for the database: stopped") {
		t.Fatalf("stop line:\n%s", r)
	}
}

// TestWaitForDBSignalStopsAttempt: a signal ends a connection attempt that
// hangs (a server that accepts and never answers).
func TestWaitForDBSignalStopsAttempt(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 10)
	t.Cleanup(func() {
		l.Close()
		close(accepted)
		for c := range accepted {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	db := "postgres://root@" + l.Addr().String() + "/test?sslmode=disable"
	r := startRun(t, context.Background(), "--db", db, "work", "--handler", "a=true")
	time.Sleep(300 * time.Millisecond)
	r.sigs <- syscall.SIGTERM
	if code := r.wait(t, 5*time.Second); code != exitOK ||
		!strings.Contains(r.stdout.String(), "received terminated while waiting for the database: stopped") {
		t.Fatalf("exit %d\n%s", code, r)
	}
}

// TestWaitForDBLimits: --wait-for-db=0 fails at once as before, a duration
// gives up after it; both say why.
func TestWaitForDBLimits(t *testing.T) {
	t.Parallel()
	db := fmt.Sprintf("postgres://root@127.0.0.1:%d/test?sslmode=disable", closedPort(t))
	cases := []struct {
		wait     string
		min, max time.Duration
		want     string
	}{
		{"0", 0, 2 * time.Second, "database unreachable (--wait-for-db=DURATION waits for it): open store"},
		{"400ms", 400 * time.Millisecond, 3 * time.Second, "gave up (--wait-for-db=400ms): open store"},
	}
	for _, c := range cases {
		t.Run(c.wait, func(t *testing.T) {
			t.Parallel()
			r := startRun(t, context.Background(), "--db", db, "work", "--handler", "a=true", "--wait-for-db", c.wait)
			code := r.wait(t, 10*time.Second)
			took := time.Since(r.start)
			errs := r.stderr.String()
			if code != exitRuntime || took < c.min || took > c.max || !strings.Contains(errs, c.want) || !strings.Contains(errs, "backlog: database unreachable") ||
				!strings.Contains(errs, "connection refused") {
				t.Fatalf("exit %d after %s, want %d after %s..%s with %q\n%s", code, took, exitRuntime, c.min, c.max, c.want, r)
			}
			if c.wait == "0" && strings.Contains(errs, "retrying") {
				t.Fatalf("--wait-for-db=0 retried:\n%s", r)
			}
		})
	}
}

// TestWaitForDBConfigErrorsFailAtOnce: errors that waiting would not fix
// end start-up at once, also when it would wait forever.
func TestWaitForDBConfigErrorsFailAtOnce(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, db, want string }{
		{"unknown scheme", "nosuch://host/db", "unknown URL scheme"},
		{"bad option", fmt.Sprintf("postgres://root@127.0.0.1:%d/test?sslmode=bogus", closedPort(t)), "sslmode is invalid"},
		{"bad backlog option", fmt.Sprintf("postgres://root@127.0.0.1:%d/test?notify=maybe", closedPort(t)), "want true or false"},
	}
	if dsn := os.Getenv("BACKLOG_TEST_POSTGRES_DSN"); dsn != "" {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.User("no_such_role_for_backlog")
		cases = append(cases, struct{ name, db, want string }{"postgres unknown role", u.String(), "SQLSTATE 28000"})
		u, _ = url.Parse(dsn)
		u.Path = "/no_such_database_for_backlog"
		cases = append(cases, struct{ name, db, want string }{"postgres unknown database", u.String(), "SQLSTATE 3D000"})
	}
	if dsn := os.Getenv("BACKLOG_TEST_MYSQL_DSN"); dsn != "" {
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases,
			struct{ name, db, want string }{"mysql unknown user", "mysql://no_such_user_for_backlog@" + cfg.Addr + "/" + cfg.DBName, "Access denied"},
			struct{ name, db, want string }{"mysql unknown database", "mysql://" + cfg.User + "@" + cfg.Addr + "/no_such_database_for_backlog", "Unknown database"},
		)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			// Waiting would run into this deadline and exit 0.
			ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
			defer cancel()
			r := startRun(t, ctx, "--db", c.db, "work", "--handler", "a=true")
			code := r.wait(t, 10*time.Second)
			if took := time.Since(r.start); code != exitRuntime || took > 5*time.Second || !strings.Contains(r.stderr.String(), c.want) ||
				strings.Contains(r.stderr.String(), "database unreachable") {
				t.Fatalf("exit %d after %s, want %d at once with %q\n%s", code, took, exitRuntime, c.want, r)
			}
		})
	}
}

// TestWaitForDBMySQLClosedConnection: a server that accepts connections
// and closes them (a proxy in front of a database that is not up yet)
// gets the MySQL driver's bare "invalid connection" explained.
func TestWaitForDBMySQLClosedConnection(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	db := "mysql://root@" + l.Addr().String() + "/test"
	r := startRun(t, context.Background(), "--db", db, "work", "--handler", "a=true", "--wait-for-db=0")
	if code := r.wait(t, 10*time.Second); code != exitRuntime ||
		!strings.Contains(r.stderr.String(), "invalid connection (the server closed the connection: it was likely restarted or killed)") {
		t.Fatalf("exit %d\n%s", code, r)
	}
}

// TestWaitForDBStartsOnceReachable: work waiting for PostgreSQL starts
// serving once the database answers, and says so.
func TestWaitForDBStartsOnceReachable(t *testing.T) {
	dsn := os.Getenv("BACKLOG_TEST_POSTGRES_DSN")
	if dsn == "" {
		t.Skip("BACKLOG_TEST_POSTGRES_DSN is not set")
	}
	t.Parallel()
	upstream, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	schema := fmt.Sprintf("cli_wait_%d", rand.Uint32())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("drop schema: %v", err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema: %v", err)
		}
	})
	port := closedPort(t)
	u := *upstream
	u.Host = fmt.Sprintf("127.0.0.1:%d", port)
	q := u.Query()
	q.Set("schema", schema)
	u.RawQuery = q.Encode()

	r := startRun(t, context.Background(), "--db", u.String(), "work", "--handler", "a=true", "--poll-interval", "50ms")
	waitFor(t, 10*time.Second, "the waiting line", func() bool { return strings.Contains(r.stderr.String(), "database unreachable") })

	// The database comes up: a proxy to it on the port work tries.
	l, err := net.Listen("tcp", u.Host)
	if err != nil {
		t.Skipf("port %d was taken meanwhile: %v", port, err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				up, err := net.Dial("tcp", upstream.Host)
				if err != nil {
					return
				}
				defer up.Close()
				go func() { _, _ = io.Copy(up, c); up.Close() }()
				_, _ = io.Copy(c, up)
			}()
		}
	}()
	waitFor(t, 15*time.Second, "work to start serving", func() bool { return strings.Contains(r.stdout.String(), "serving") })
	if errs := r.stderr.String(); strings.Count(errs, "database unreachable") != 1 || !strings.Contains(errs, "database reachable") {
		t.Fatalf("log:\n%s", r)
	}
	r.sigs <- os.Interrupt
	if code := r.wait(t, 20*time.Second); code != exitOK {
		t.Fatalf("exit %d\n%s", code, r)
	}
}

func TestDBUnreachable(t *testing.T) {
	t.Parallel()
	wrap := func(err error) error { return fmt.Errorf("open store x: store: open y: %w", err) }
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", wrap(dial), true},
		{"connection reset", wrap(&net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}), true},
		{"unix socket missing", wrap(&net.OpError{Op: "dial", Net: "unix", Err: os.NewSyscallError("connect", syscall.ENOENT)}), true},
		{"unix socket forbidden", wrap(&net.OpError{Op: "dial", Net: "unix", Err: os.NewSyscallError("connect", syscall.EACCES)}), false},
		{"i/o timeout", wrap(&net.OpError{Op: "dial", Net: "tcp", Err: timeoutError{}}), true},
		{"unexpected EOF", wrap(io.ErrUnexpectedEOF), true},
		{"EOF", wrap(io.EOF), true},
		{"mysql invalid connection", wrap(mysql.ErrInvalidConn), true},
		{"bad conn", wrap(driver.ErrBadConn), true},
		{"connect timeout", wrap(context.DeadlineExceeded), true},
		{"no such host", wrap(&net.DNSError{Err: "no such host", Name: "db", IsNotFound: true}), true},
		{"dns temporary", wrap(&net.DNSError{Err: "server misbehaving", Name: "db", IsTemporary: true}), true},
		{"postgres starting up", wrap(&pgconn.PgError{Code: "57P03", Message: "the database system is starting up"}), true},
		{"postgres shutting down", wrap(&pgconn.PgError{Code: "57P03", Message: "the database system is shutting down"}), true},
		{"postgres admin shutdown", wrap(&pgconn.PgError{Code: "57P01"}), true},
		{"postgres too many clients", wrap(&pgconn.PgError{Code: "53300"}), true},
		{"postgres connection failure", wrap(&pgconn.PgError{Code: "08006"}), true},
		{"postgres bad password", wrap(&pgconn.PgError{Code: "28P01"}), false},
		{"postgres no database", wrap(&pgconn.PgError{Code: "3D000"}), false},
		{"postgres auth failure after a refused address", wrap(errors.Join(dial, &pgconn.PgError{Code: "28P01"})), false},
		{"postgres syntax", wrap(&pgconn.PgError{Code: "42601"}), false},
		{"mysql access denied", wrap(&mysql.MySQLError{Number: 1045}), false},
		{"mysql unknown database", wrap(&mysql.MySQLError{Number: 1049}), false},
		{"mysql shutdown", wrap(&mysql.MySQLError{Number: 1053}), true},
		{"mysql too many connections", wrap(&mysql.MySQLError{Number: 1040}), true},
		{"galera not synced", wrap(&mysql.MySQLError{Number: 1047, Message: "WSREP has not yet prepared node for application use"}), true},
		{"unknown command", wrap(&mysql.MySQLError{Number: 1047, Message: "Unknown command"}), false},
		{"plain error", errors.New("store: unknown URL scheme"), false},
		{"cancelled", wrap(context.Canceled), false},
	}
	for _, c := range cases {
		if got := dbUnreachable(c.err); got != c.want {
			t.Errorf("%s: dbUnreachable(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
	if got := explainConnError(wrap(mysql.ErrInvalidConn)).Error(); !strings.HasSuffix(got, "invalid connection (the server closed the connection: it was likely restarted or killed)") {
		t.Errorf("explained: %s", got)
	}
	if got := explainConnError(wrap(dial)); !errors.Is(got, syscall.ECONNREFUSED) || strings.Contains(got.Error(), "closed") {
		t.Errorf("explained: %v", got)
	}
}

type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

func TestWaitForDBFlag(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]dbWait{
		"forever": {forever: true}, "Forever": {forever: true}, "0": {}, "30s": {d: 30 * time.Second}, "1h": {d: time.Hour},
	} {
		var w dbWait
		if err := w.Set(in); err != nil || w != want {
			t.Errorf("Set(%q) = %+v, %v; want %+v", in, w, err, want)
		}
	}
	for _, in := range []string{"", "-1s", "soon", "10"} {
		var w dbWait
		if err := w.Set(in); err == nil {
			t.Errorf("Set(%q) accepted", in)
		}
	}
	r := cli(t, tempDB(t), "work", "--help")
	if !strings.Contains(r.stdout, "--wait-for-db duration") || !strings.Contains(r.stdout, "(default forever)") {
		t.Errorf("help:\n%s", r)
	}
	r = cli(t, "", "work", "--server", "http://127.0.0.1:1", "--handler", "a=true", "--wait-for-db", "5s")
	if r.code != exitUsage || !strings.Contains(r.stderr, "--wait-for-db does not apply to a remote worker") {
		t.Errorf("remote: %s", r)
	}
	r = cli(t, tempDB(t), "work", "--handler", "a=true", "--wait-for-db", "soon")
	if r.code != exitUsage || !strings.Contains(r.stderr, "--wait-for-db") {
		t.Errorf("bad value: %s", r)
	}
}
