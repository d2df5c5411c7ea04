//go:build linux

package dbserver

import (
	"context"
	"database/sql"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestServers starts each server, writes a row with the project's
// driver, and checks the row survives a kill, an immediate stop and a fast
// stop, each followed by a restart on the same port.
func TestServers(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func(testing.TB, Options) *Server
		user  string
	}{
		{"postgres", Postgres, "postgres"},
		{"mariadb", MariaDB, "mysql"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := tc.start(t, Options{})
			port, dir := s.Port(), s.Dir()
			if port == 5432 || port == 3306 || port == 0 {
				t.Fatalf("port %d: want a private one", port)
			}
			if !strings.Contains(s.DSN(), "127.0.0.1:") || !strings.HasSuffix(strings.SplitN(s.DSN(), "?", 2)[0], "/test") {
				t.Fatalf("DSN %q", s.DSN())
			}
			if os.Geteuid() == 0 {
				if uid := procUID(t, s.PID()); uid == "0" {
					t.Fatalf("the server runs as root; want the %s user", tc.user)
				}
			}

			execSQL(t, s, "test", "CREATE TABLE t (v INT)")
			execSQL(t, s, "test", "INSERT INTO t (v) VALUES (42)")

			restart := func(what string, stop func() error) {
				t.Helper()
				pid := s.PID()
				var desc []procID
				if pid != 0 {
					desc = descendants(pid)
				}
				if err := stop(); err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				if s.Running() {
					t.Fatalf("%s: still running", what)
				}
				for _, d := range desc {
					if alive(d) {
						t.Fatalf("%s: process %d of the server is still alive", what, d.pid)
					}
				}
				if err := ping(s, "test"); err == nil {
					t.Fatalf("%s: the server still answers", what)
				}
				if err := s.Start(ctx); err != nil {
					t.Fatalf("start after %s: %v", what, err)
				}
				if s.Port() != port || s.Dir() != dir {
					t.Fatalf("after %s: port %d dir %s, want %d %s", what, s.Port(), s.Dir(), port, dir)
				}
				if s.PID() == pid {
					t.Fatalf("after %s: same pid %d", what, pid)
				}
				if v := queryInt(t, s, "test", "SELECT v FROM t"); v != 42 {
					t.Fatalf("after %s: v = %d, want 42", what, v)
				}
			}
			restart("kill", s.Kill)
			restart("immediate stop", func() error { return s.Stop(StopImmediate) })
			restart("fast stop", func() error { return s.Stop(StopFast) })

			if err := s.Start(ctx); err == nil {
				t.Fatal("Start of a running server succeeded")
			}
			if err := s.CreateDatabase(ctx, "other_db"); err != nil {
				t.Fatal(err)
			}
			execSQL(t, s, "other_db", "CREATE TABLE u (v INT)")
			if err := s.CreateDatabase(ctx, "bad-name"); err == nil {
				t.Fatal("CreateDatabase accepted bad-name")
			}

			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Fatalf("Close left %s: %v", dir, err)
			}
			if err := s.Start(ctx); err == nil {
				t.Fatal("Start after Close succeeded")
			}
		})
	}
}

func TestUnavailable(t *testing.T) {
	_, err := StartPostgres(context.Background(), Options{BinDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("StartPostgres with an empty BinDir: %v", err)
	}
	_, err = StartMariaDB(context.Background(), Options{BinDir: t.TempDir()})
	if err == nil {
		t.Fatal("StartMariaDB with an empty BinDir succeeded")
	}
}

func open(t *testing.T, s *Server, db string) *sql.DB {
	t.Helper()
	d, err := sql.Open(s.DriverName(), s.DriverDSN(db))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func execSQL(t *testing.T, s *Server, db, q string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := open(t, s, db).ExecContext(ctx, q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func queryInt(t *testing.T, s *Server, db, q string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var v int
	if err := open(t, s, db).QueryRowContext(ctx, q).Scan(&v); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return v
}

func ping(s *Server, db string) error {
	d, err := sql.Open(s.DriverName(), s.DriverDSN(db))
	if err != nil {
		return err
	}
	defer d.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return d.PingContext(ctx)
}

// procUID returns the real uid of a process, from /proc.
func procUID(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			return strings.Fields(rest)[0]
		}
	}
	t.Fatalf("no Uid in /proc/%d/status", pid)
	return ""
}
