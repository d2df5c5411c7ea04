// Package dbcontainer provides real PostgreSQL and MySQL databases to
// tests, as package github.com/backlogq/backlog/storetest/dbtest does, with
// one more place to find a server: a Docker container.
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
// It is a module of its own (github.com/backlogq/backlog/storetest/dbtest/dbcontainer)
// so that testcontainers-go and the Docker client libraries stay out of the
// dependencies of github.com/backlogq/backlog: only a test that imports this
// package brings them in.
package dbcontainer

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/backlogq/backlog/storetest/dbtest"
	"github.com/testcontainers/testcontainers-go"
	tcmysql "github.com/testcontainers/testcontainers-go/modules/mysql"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
)

// Container images started when no DSN is configured.
const (
	PostgresImage = "postgres:17-alpine"
	MySQLImage    = "mysql:8.4"
)

// startTimeout bounds the start of a container, image pull included.
const startTimeout = 5 * time.Minute

// PostgresDSN returns a DSN (URL form) for a fresh, empty PostgreSQL
// database created for t and dropped when t ends (dbtest.PostgresDatabase):
// on the server named by BACKLOG_TEST_POSTGRES_DSN, else in a
// testcontainers-go postgres container when Docker answers, else t.Skip —
// but when BACKLOG_REQUIRE_DBS=1, t.Fatal instead of skip.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	return dbtest.PostgresDatabase(t, PostgresServerDSN(t))
}

// MySQLDSN returns a go-sql-driver/mysql DSN for a fresh, empty MySQL
// database created for t and dropped when t ends (dbtest.MySQLDatabase): on
// the server named by BACKLOG_TEST_MYSQL_DSN, else in a testcontainers-go
// mysql container when Docker answers, else t.Skip — but when
// BACKLOG_REQUIRE_DBS=1, t.Fatal instead of skip.
func MySQLDSN(t testing.TB) string {
	t.Helper()
	return dbtest.MySQLDatabase(t, MySQLServerDSN(t))
}

// PostgresServerDSN returns the DSN of the PostgreSQL server itself (its
// maintenance database, shared by every caller): BACKLOG_TEST_POSTGRES_DSN,
// else a container, else skip (fail with BACKLOG_REQUIRE_DBS=1), as
// PostgresDSN.
func PostgresServerDSN(t testing.TB) string {
	t.Helper()
	return serverDSN(t, "PostgreSQL", dbtest.EnvPostgresDSN, &postgresContainer, startPostgres)
}

// MySQLServerDSN returns the DSN of the MySQL server itself, as
// PostgresServerDSN does for PostgreSQL.
func MySQLServerDSN(t testing.TB) string {
	t.Helper()
	return serverDSN(t, "MySQL", dbtest.EnvMySQLDSN, &mysqlContainer, startMySQL)
}

// serverDSN returns the environment's DSN, else the cached container's,
// else ends t through dbtest.Unavailable.
func serverDSN(t testing.TB, what, env string, c *containerCache, start func(context.Context) (string, error)) string {
	t.Helper()
	if server := os.Getenv(env); server != "" {
		return server
	}
	server, err := c.get(start)
	if err != nil {
		dbtest.Unavailable(t, fmt.Sprintf("dbcontainer: no %s server: %s is not set and no container could be started: %v", what, env, err))
	}
	return server
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
func (c *containerCache) get(start func(context.Context) (string, error)) (string, error) {
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
