// Package dbtest provides real PostgreSQL and MySQL databases to tests.
//
// Each call returns the DSN of a fresh, empty database created for the
// calling test and dropped when it ends, on a server found in this order:
//
//  1. the server named by an environment variable
//     (BACKLOG_TEST_POSTGRES_DSN, BACKLOG_TEST_MYSQL_DSN): the DSN must let
//     its user create and drop databases;
//  2. a container started with testcontainers-go when a Docker engine
//     answers — one container per database kind per test binary, started
//     on first use and shared by every test of the binary (each still gets
//     its own database); testcontainers' reaper removes it when the binary
//     exits;
//  3. otherwise the test is skipped — unless BACKLOG_REQUIRE_DBS=1, when it
//     fails instead, so a CI job can never pass by skipping.
//
// The package lives apart from storetest so that an adapter author who
// brings their own database does not pull in Docker libraries.
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
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx", to create databases
	"github.com/testcontainers/testcontainers-go"
	tcmysql "github.com/testcontainers/testcontainers-go/modules/mysql"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
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

// Container images started when no DSN is configured.
const (
	PostgresImage = "postgres:17-alpine"
	MySQLImage    = "mysql:8.4"
)

// startTimeout bounds the start of a container, image pull included.
const startTimeout = 5 * time.Minute

// PostgresDSN returns a DSN (URL form) for a fresh, empty PostgreSQL
// database created for t and dropped when t ends: on the server named by
// BACKLOG_TEST_POSTGRES_DSN, else in a testcontainers-go postgres container
// when Docker answers, else t.Skip — but when BACKLOG_REQUIRE_DBS=1, t.Fatal
// instead of skip.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	server := PostgresServerDSN(t)
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
// database created for t and dropped when t ends: on the server named by
// BACKLOG_TEST_MYSQL_DSN, else in a testcontainers-go mysql container when
// Docker answers, else t.Skip — but when BACKLOG_REQUIRE_DBS=1, t.Fatal
// instead of skip. The DSN keeps the parameters of the configured one; the
// store adds what it needs (parseTime and the like).
func MySQLDSN(t testing.TB) string {
	t.Helper()
	server := MySQLServerDSN(t)
	cfg, err := mysql.ParseDSN(server)
	if err != nil {
		t.Fatalf("dbtest: parse %s: %v", EnvMySQLDSN, err)
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
// else a container, else skip (fail with BACKLOG_REQUIRE_DBS=1), as
// PostgresDSN. For tests that isolate themselves, for example with a fresh
// schema per test.
func PostgresServerDSN(t testing.TB) string {
	t.Helper()
	server := os.Getenv(EnvPostgresDSN)
	if server == "" {
		var err error
		server, err = postgresContainer.get(t, startPostgres)
		if err != nil {
			unavailable(t, "PostgreSQL", EnvPostgresDSN, err)
		}
	}
	return server
}

// MySQLServerDSN returns the DSN of the MySQL server itself, as
// PostgresServerDSN does for PostgreSQL.
func MySQLServerDSN(t testing.TB) string {
	t.Helper()
	server := os.Getenv(EnvMySQLDSN)
	if server == "" {
		var err error
		server, err = mysqlContainer.get(t, startMySQL)
		if err != nil {
			unavailable(t, "MySQL", EnvMySQLDSN, err)
		}
	}
	return server
}

// unavailable skips t for want of a database, or fails it when databases
// are required.
func unavailable(t testing.TB, what, env string, err error) {
	t.Helper()
	msg := fmt.Sprintf("dbtest: no %s server: %s is not set and no container could be started: %v", what, env, err)
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
			return "", fmt.Errorf("parse %s: %w", EnvPostgresDSN, err)
		}
		u.Path = "/" + name
		return u.String(), nil
	}
	return server + " dbname=" + name, nil // a later keyword overrides an earlier one
}

// containerCache starts one container per test binary on first use and
// remembers its DSN, or the error that kept it from starting, for every
// later caller. It is the package's only shared state.
type containerCache struct {
	once sync.Once
	dsn  string
	err  error
}

var (
	postgresContainer containerCache
	mysqlContainer    containerCache
)

// get returns the cached server DSN, starting the container on first use.
func (c *containerCache) get(t testing.TB, start func(context.Context) (string, error)) (string, error) {
	t.Helper()
	c.once.Do(func() {
		if err := dockerHealthy(); err != nil {
			c.err = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		defer cancel()
		c.dsn, c.err = start(ctx)
	})
	return c.dsn, c.err
}

// dockerHealthy reports whether a Docker engine answers. It does what
// testcontainers.SkipIfProviderIsNotHealthy does — including recovering
// from the panic the library can raise when no Docker host exists — but
// returns an error, so the caller can fail instead of skip when databases
// are required.
func dockerHealthy() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("docker is not available: %v", r)
		}
	}()
	provider, err := testcontainers.ProviderDocker.GetProvider()
	if err != nil {
		return fmt.Errorf("docker is not available: %w", err)
	}
	defer provider.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := provider.Health(ctx); err != nil {
		return fmt.Errorf("docker is not healthy: %w", err)
	}
	return nil
}

// startPostgres starts the shared PostgreSQL container and returns a DSN
// for its maintenance database.
func startPostgres(ctx context.Context) (string, error) {
	c, err := tcpostgres.Run(ctx, PostgresImage,
		tcpostgres.WithDatabase("postgres"),
		tcpostgres.WithUsername("backlog"),
		tcpostgres.WithPassword("backlog"),
		tcpostgres.BasicWaitStrategies(),
	)
	if err != nil {
		return "", fmt.Errorf("start %s: %w", PostgresImage, err)
	}
	return c.ConnectionString(ctx, "sslmode=disable")
}

// startMySQL starts the shared MySQL container and returns a DSN for its
// root user.
func startMySQL(ctx context.Context) (string, error) {
	c, err := tcmysql.Run(ctx, MySQLImage,
		tcmysql.WithDatabase("backlog"),
		tcmysql.WithUsername("root"),
		tcmysql.WithPassword("backlog"),
	)
	if err != nil {
		return "", fmt.Errorf("start %s: %w", MySQLImage, err)
	}
	return c.ConnectionString(ctx)
}
