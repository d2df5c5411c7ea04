package dbserver

import (
	"context"
	"errors"
	"os"
	"testing"
)

// EnvRequireDBs, when "1", turns the test helpers' skip for want of a
// server into a failure, as it does for the shared test databases
// (storetest/dbtest).
const EnvRequireDBs = "BACKLOG_REQUIRE_DBS"

// Postgres starts a private PostgreSQL server for t (StartPostgres) and
// closes it when t ends. It skips t when PostgreSQL cannot run here
// (ErrUnavailable) — failing it instead when BACKLOG_REQUIRE_DBS=1 — and
// fails t on any other error.
func Postgres(t testing.TB, opts Options) *Server {
	t.Helper()
	return started(t, "PostgreSQL", func(ctx context.Context) (*Server, error) { return StartPostgres(ctx, opts) })
}

// MariaDB starts a private MariaDB server for t (StartMariaDB) and closes
// it when t ends, skipping or failing t as Postgres does.
func MariaDB(t testing.TB, opts Options) *Server {
	t.Helper()
	return started(t, "MariaDB", func(ctx context.Context) (*Server, error) { return StartMariaDB(ctx, opts) })
}

func started(t testing.TB, what string, start func(context.Context) (*Server, error)) *Server {
	t.Helper()
	s, err := start(context.Background())
	if err != nil {
		Unavailable(t, what, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("dbserver: close %s: %v", what, err)
		}
	})
	return s
}

// Unavailable ends t after a failed start: t.Skip when err wraps
// ErrUnavailable and BACKLOG_REQUIRE_DBS is not "1", t.Fatal otherwise. It
// is for callers that start servers themselves (shared by several tests,
// say) and want the helpers' policy.
func Unavailable(t testing.TB, what string, err error) {
	t.Helper()
	if errors.Is(err, ErrUnavailable) && os.Getenv(EnvRequireDBs) != "1" {
		t.Skipf("no private %s server: %v", what, err)
	}
	t.Fatalf("start a private %s server: %v", what, err)
}

// PgBouncer starts a private PostgreSQL server and a PgBouncer in front of
// it (StartPgBouncer) for t, and closes both when t ends. It returns the
// pooler and the server; it skips or fails t as Postgres does.
func PgBouncer(t testing.TB, opts PgBouncerOptions) (pooler, upstream *Server) {
	t.Helper()
	upstream = Postgres(t, Options{})
	pooler = started(t, "PgBouncer", func(ctx context.Context) (*Server, error) { return StartPgBouncer(ctx, upstream, opts) })
	return pooler, upstream
}
