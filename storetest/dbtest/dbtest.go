// Package dbtest provides real PostgreSQL and MySQL databases to tests.
//
// Each call returns the DSN of a fresh, empty database created for the
// calling test and dropped when it ends, on the server named by an
// environment variable (BACKLOG_TEST_POSTGRES_DSN, BACKLOG_TEST_MYSQL_DSN;
// the DSN must let its user create and drop databases). Without one the
// test is skipped — unless BACKLOG_REQUIRE_DBS=1, when it fails instead, so
// a CI job can never pass by skipping. scripts/local-dbs.sh starts local
// servers and prints the exports.
//
// The package depends on the database drivers only. Servers started in
// Docker containers (testcontainers-go) when no DSN is set come from the
// separate module github.com/backlogq/backlog/storetest/dbtest/dbcontainer,
// which has the same functions and builds on PostgresDatabase, MySQLDatabase
// and Unavailable here; keeping it apart keeps Docker's libraries out of
// this module's dependencies.
package dbtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx", to create databases
)

// Environment variables read by this package.
const (
	// EnvPostgresDSN names an existing PostgreSQL server to use, e.g.
	// postgres://user:pass@localhost:5432/postgres?sslmode=disable.
	EnvPostgresDSN = "BACKLOG_TEST_POSTGRES_DSN"
	// EnvMySQLDSN names an existing MySQL or MariaDB server to use, in
	// go-sql-driver/mysql form, e.g. root:pass@tcp(localhost:3306)/mysql.
	EnvMySQLDSN = "BACKLOG_TEST_MYSQL_DSN"
	// EnvRequireDBs, when "1", turns every skip for want of a database into
	// a test failure.
	EnvRequireDBs = "BACKLOG_REQUIRE_DBS"
)

// PostgresDSN returns a DSN (URL form) for a fresh, empty PostgreSQL
// database created for t and dropped when t ends, on the server named by
// BACKLOG_TEST_POSTGRES_DSN; without it t.Skip — but when
// BACKLOG_REQUIRE_DBS=1, t.Fatal instead of skip.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	return PostgresDatabase(t, PostgresServerDSN(t))
}

// PostgresDatabase creates a fresh, empty database (named backlog_test_
// and 12 random hex digits) on the PostgreSQL server at server, drops it
// (WITH (FORCE)) when t ends, and returns server's DSN with the database
// replaced by the new one. server is a URL (postgres://…) or a libpq
// keyword/value DSN whose user may create databases. Any error fails t.
func PostgresDatabase(t testing.TB, server string) string {
	t.Helper()
	name := dbName(t)
	db, err := sql.Open("pgx", server)
	if err != nil {
		t.Fatalf("dbtest: open PostgreSQL server: %v", err)
	}
	defer db.Close()
	if _, err := db.ExecContext(t.Context(), `CREATE DATABASE "`+name+`"`); err != nil {
		t.Fatalf("dbtest: create PostgreSQL database %s (the DSN's user needs CREATEDB): %v", name, err)
	}
	t.Cleanup(func() {
		db, err := sql.Open("pgx", server)
		if err != nil {
			t.Errorf("dbtest: open PostgreSQL server to drop %s: %v", name, err)
			return
		}
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := db.ExecContext(ctx, `DROP DATABASE IF EXISTS "`+name+`" WITH (FORCE)`); err != nil {
			t.Errorf("dbtest: drop PostgreSQL database %s: %v", name, err)
		}
	})
	dsn, err := withPostgresDatabase(server, name)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	return dsn
}

// MySQLDSN returns a go-sql-driver/mysql DSN for a fresh, empty MySQL
// database created for t and dropped when t ends, on the server named by
// BACKLOG_TEST_MYSQL_DSN; without it t.Skip — but when
// BACKLOG_REQUIRE_DBS=1, t.Fatal instead of skip. The DSN keeps the
// parameters of the configured one; the store adds what it needs
// (parseTime and the like).
func MySQLDSN(t testing.TB) string {
	t.Helper()
	return MySQLDatabase(t, MySQLServerDSN(t))
}

// MySQLDatabase creates a fresh, empty database (utf8mb4_bin, named
// backlog_test_ and 12 random hex digits) on the MySQL or MariaDB server at
// server, a go-sql-driver/mysql DSN whose user may create databases, drops
// it when t ends, and returns server's DSN with the database replaced by
// the new one. Any error fails t.
func MySQLDatabase(t testing.TB, server string) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(server)
	if err != nil {
		t.Fatalf("dbtest: parse MySQL server DSN: %v", err)
	}
	name := dbName(t)
	db, err := sql.Open("mysql", server)
	if err != nil {
		t.Fatalf("dbtest: open MySQL server: %v", err)
	}
	defer db.Close()
	if _, err := db.ExecContext(t.Context(), "CREATE DATABASE `"+name+"` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
		t.Fatalf("dbtest: create MySQL database %s (the DSN's user needs CREATE): %v", name, err)
	}
	t.Cleanup(func() {
		db, err := sql.Open("mysql", server)
		if err != nil {
			t.Errorf("dbtest: open MySQL server to drop %s: %v", name, err)
			return
		}
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
			t.Errorf("dbtest: drop MySQL database %s: %v", name, err)
		}
	})
	cfg.DBName = name
	return cfg.FormatDSN()
}

// PostgresServerDSN returns the DSN of the PostgreSQL server itself (its
// configured database, shared by every caller): BACKLOG_TEST_POSTGRES_DSN,
// else skip (fail with BACKLOG_REQUIRE_DBS=1), as PostgresDSN. For tests
// that isolate themselves, for example with a fresh schema per test.
func PostgresServerDSN(t testing.TB) string {
	t.Helper()
	server := os.Getenv(EnvPostgresDSN)
	if server == "" {
		Unavailable(t, "dbtest: no PostgreSQL server: "+EnvPostgresDSN+" is not set")
	}
	return server
}

// MySQLServerDSN returns the DSN of the MySQL server itself, as
// PostgresServerDSN does for PostgreSQL.
func MySQLServerDSN(t testing.TB) string {
	t.Helper()
	server := os.Getenv(EnvMySQLDSN)
	if server == "" {
		Unavailable(t, "dbtest: no MySQL server: "+EnvMySQLDSN+" is not set")
	}
	return server
}

// Unavailable ends t for want of a database server: t.Skip with msg, or
// t.Fatal when BACKLOG_REQUIRE_DBS=1. msg says which server and why none
// was found.
func Unavailable(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv(EnvRequireDBs) == "1" {
		t.Fatal(msg + " (" + EnvRequireDBs + "=1 makes this a failure)")
	}
	t.Skip(msg)
}

// dbName returns a new database name, unique enough to share a server with
// parallel test binaries.
func dbName(t testing.TB) string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	return "backlog_test_" + hex.EncodeToString(b[:])
}

// withPostgresDatabase returns server with its database replaced by name.
// It accepts URL DSNs and libpq keyword/value DSNs.
func withPostgresDatabase(server, name string) (string, error) {
	if strings.HasPrefix(server, "postgres://") || strings.HasPrefix(server, "postgresql://") {
		u, err := url.Parse(server)
		if err != nil {
			return "", fmt.Errorf("parse PostgreSQL server DSN: %w", err)
		}
		u.Path = "/" + name
		return u.String(), nil
	}
	return server + " dbname=" + name, nil // a later keyword overrides an earlier one
}
