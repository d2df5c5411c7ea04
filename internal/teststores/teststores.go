// Package teststores gives tests above the store layer (the HTTP API, the
// dashboard, the CLI) one migrated store per backend reachable here:
// memory, SQLite in a temporary file, and PostgreSQL and MySQL/MariaDB in
// fresh databases from storetest/dbtest (skipped when not configured,
// failing the test instead when BACKLOG_REQUIRE_DBS=1).
package teststores

import (
	"testing"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/memory"
	"github.com/backlogq/backlog/store/mysql"
	"github.com/backlogq/backlog/store/postgres"
	"github.com/backlogq/backlog/store/sqlite"
	"github.com/backlogq/backlog/storetest/dbtest"
)

// Backend opens a fresh, migrated store for t, closed when t ends.
type Backend struct {
	Name string // "memory", "sqlite", "postgres", "mysql"
	Open func(t testing.TB) contract.Store
}

// All lists every backend, memory first.
func All() []Backend {
	return []Backend{
		{"memory", Memory},
		{"sqlite", SQLite},
		{"postgres", Postgres},
		{"mysql", MySQL},
	}
}

// Run runs fn as a subtest per backend, each with its own fresh store.
func Run(t *testing.T, fn func(t *testing.T, st contract.Store)) {
	for _, b := range All() {
		t.Run(b.Name, func(t *testing.T) { fn(t, b.Open(t)) })
	}
}

// Memory returns a memory store.
func Memory(t testing.TB) contract.Store {
	st := memory.New()
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// SQLite returns a SQLite store on a file in t.TempDir().
func SQLite(t testing.TB) contract.Store {
	st, err := sqlite.Open(t.Context(), t.TempDir()+"/backlog.db")
	return opened(t, "sqlite", st, err)
}

// Postgres returns a PostgreSQL store on a fresh database.
func Postgres(t testing.TB) contract.Store {
	st, err := postgres.Open(t.Context(), dbtest.PostgresDSN(t))
	return opened(t, "postgres", st, err)
}

// MySQL returns a MySQL/MariaDB store on a fresh database.
func MySQL(t testing.TB) contract.Store {
	st, err := mysql.Open(t.Context(), dbtest.MySQLDSN(t))
	return opened(t, "mysql", st, err)
}

func opened[S contract.Store](t testing.TB, name string, st S, err error) contract.Store {
	t.Helper()
	if err != nil {
		t.Fatalf("teststores: open %s: %v", name, err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}
