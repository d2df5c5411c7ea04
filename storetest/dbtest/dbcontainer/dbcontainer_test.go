package dbcontainer_test

import (
	"database/sql"
	"testing"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/backlogq/backlog/storetest/dbtest/dbcontainer"
)

// TestPostgresDSN connects to the database PostgresDSN hands out: on the
// configured server, else in a container. Without either it skips (or
// fails under BACKLOG_REQUIRE_DBS=1).
func TestPostgresDSN(t *testing.T) {
	ping(t, "pgx", dbcontainer.PostgresDSN(t))
}

// TestMySQLDSN is TestPostgresDSN for MySQL.
func TestMySQLDSN(t *testing.T) {
	ping(t, "mysql", dbcontainer.MySQLDSN(t))
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
