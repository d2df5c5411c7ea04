//go:build linux

package dbserver

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestStandby starts a primary with a synchronous standby: a row
// committed on the primary is on the standby, the standby refuses writes;
// after the primary is killed and the standby promoted, the standby takes
// writes, and a connection opened with FailoverURL reaches it by itself.
func TestStandby(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	start := time.Now()
	primary, standby := PostgresPair(t, Options{})
	t.Logf("primary on %d and synchronous standby on %d in %s", primary.Port(), standby.Port(), time.Since(start).Round(time.Millisecond))
	if standby.Port() == primary.Port() || standby.Dir() == primary.Dir() {
		t.Fatalf("standby port %d dir %s: the primary's", standby.Port(), standby.Dir())
	}
	if v := queryText(t, primary, "postgres", "SELECT sync_state FROM pg_stat_replication"); v != "sync" {
		t.Fatalf("the primary's standby is %q, want sync", v)
	}
	if v := queryText(t, standby, "postgres", "SHOW synchronous_standby_names"); v != "" {
		t.Fatalf("the standby's synchronous_standby_names = %q, want empty", v)
	}

	execSQL(t, primary, "test", "CREATE TABLE t (v INT)")
	execSQL(t, primary, "test", "INSERT INTO t (v) VALUES (42)")
	// A synchronous commit is flushed on the standby when it returns;
	// replaying it may take a moment more.
	eventually(t, "the row on the standby", func() bool {
		v, err := tryQueryInt(standby, "test", "SELECT coalesce(sum(v), 0) FROM t")
		return err == nil && v == 42
	})
	if _, err := open(t, standby, "test").ExecContext(ctx, "INSERT INTO t (v) VALUES (1)"); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("insert on the standby: %v, want a read-only error", err)
	}
	if err := primary.Promote(ctx); err == nil {
		t.Fatal("Promote of a primary succeeded")
	}

	url := FailoverURL("test", primary, standby)
	want := "postgres://root@127.0.0.1:" + strconv.Itoa(primary.Port()) + ",127.0.0.1:" + strconv.Itoa(standby.Port()) + "/test?sslmode=disable&target_session_attrs=read-write"
	if url != want {
		t.Fatalf("FailoverURL = %s, want %s", url, want)
	}
	if port := connPort(t, url); port != primary.Port() {
		t.Fatalf("FailoverURL reached port %d before the failover, want the primary's %d", port, primary.Port())
	}

	if err := primary.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if err := standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("promoted %s after the kill", time.Since(killed).Round(time.Millisecond))
	if v := queryText(t, standby, "postgres", "SHOW synchronous_standby_names"); v != "" {
		t.Fatalf("the promoted standby's synchronous_standby_names = %q, want empty", v)
	}
	execSQL(t, standby, "test", "INSERT INTO t (v) VALUES (1)") // would block on a synchronous standby
	if v := queryInt(t, standby, "test", "SELECT sum(v) FROM t"); v != 43 {
		t.Fatalf("sum = %d on the promoted standby, want 43", v)
	}
	if port := connPort(t, url); port != standby.Port() {
		t.Fatalf("FailoverURL reached port %d after the failover, want the standby's %d", port, standby.Port())
	}
	if err := standby.Promote(ctx); err == nil {
		t.Fatal("a second Promote succeeded")
	}

	// The promoted standby is a Server like the others.
	if err := standby.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := standby.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if v := queryInt(t, standby, "test", "SELECT sum(v) FROM t"); v != 43 {
		t.Fatalf("sum = %d after a restart of the promoted standby, want 43", v)
	}
}

// connPort connects with pgx to url, writes, and returns the port of the
// server it reached.
func connPort(t *testing.T, url string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE TABLE IF NOT EXISTS reached (v INT); INSERT INTO reached VALUES (1)"); err != nil {
		t.Fatalf("write through %s: %v", url, err)
	}
	var port int
	if err := conn.QueryRow(ctx, "SELECT current_setting('port')::int").Scan(&port); err != nil {
		t.Fatal(err)
	}
	return port
}

func queryText(t *testing.T, s *Server, db, q string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var v string
	if err := open(t, s, db).QueryRowContext(ctx, q).Scan(&v); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return v
}

func tryQueryInt(s *Server, db, q string) (int, error) {
	d, err := sql.Open(s.DriverName(), s.DriverDSN(db))
	if err != nil {
		return 0, err
	}
	defer d.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var v int
	err = d.QueryRowContext(ctx, q).Scan(&v)
	return v, err
}

func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30 s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
