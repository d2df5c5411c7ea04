package dbtest_test

import (
	"database/sql"
	"testing"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/backlogq/backlog/storetest/dbtest"
)

// TestPostgresDSN connects to the database PostgresDSN hands out. Without a
// server or Docker it skips (or fails under BACKLOG_REQUIRE_DBS=1).
func TestPostgresDSN(t *testing.T) {
	ping(t, "pgx", dbtest.PostgresDSN(t))
}

// TestMySQLDSN is TestPostgresDSN for MySQL.
func TestMySQLDSN(t *testing.T) {
	ping(t, "mysql", dbtest.MySQLDSN(t))
}

func ping(t *testing.T, driver, dsn string) {
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.PingContext(t.Context()); err != nil {
		t.Fatalf("ping %s database: %v", driver, err)
	}
}

// TestServerDSNSkipsWithoutEnv: with no DSN configured and databases not
// required, the server helpers skip the test rather than fail it.
func TestServerDSNSkipsWithoutEnv(t *testing.T) {
	t.Setenv(dbtest.EnvPostgresDSN, "")
	t.Setenv(dbtest.EnvMySQLDSN, "")
	t.Setenv(dbtest.EnvRequireDBs, "")
	for name, get := range map[string]func(testing.TB) string{
		"postgres": dbtest.PostgresServerDSN,
		"mysql":    dbtest.MySQLServerDSN,
	} {
		var sub *testing.T
		t.Run(name, func(t *testing.T) {
			sub = t
			get(t)
			t.Error("returned without a server")
		})
		if !sub.Skipped() {
			t.Errorf("%s: not skipped", name)
		}
	}
}
