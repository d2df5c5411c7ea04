package postgres

import (
	"context"
	"strings"
	"testing"

	"github.com/backlogq/backlog/core/contract"
)

// withParams returns the test server's URL with extra query parameters.
func withParams(t *testing.T, params string) string {
	t.Helper()
	dsn := testDSN(t)
	if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		t.Skip("BACKLOG_TEST_POSTGRES_DSN is not a URL")
	}
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + params
}

// TestOpenTakesBacklogURLParameters: Open reads a URL as the CLI's --db
// and store.Open do. It used to hand schema=… to pgx as a run-time
// parameter, so that the migration failed with "unrecognized
// configuration parameter" and an error naming the default schema.
func TestOpenTakesBacklogURLParameters(t *testing.T) {
	ctx := context.Background()
	schema := freshSchema(t)
	s, err := Open(ctx, withParams(t, "schema="+schema+"&strategy=optimistic&notify=false&vacuum=false"))
	if err != nil {
		t.Fatalf("Open with schema=%s in the URL: %v", schema, err)
	}
	defer s.Close()
	if s.Schema() != schema || s.Strategy() != contract.StrategyOptimistic || s.notify || s.vacuumMinDead >= 0 {
		t.Errorf("schema %s strategy %s notify %v vacuum min dead %d; want %s, optimistic, false, off",
			s.Schema(), s.Strategy(), s.notify, s.vacuumMinDead, schema)
	}
	var n int
	if err := s.Pool().QueryRow(ctx, "SELECT count(*) FROM information_schema.tables WHERE table_schema = $1 AND table_name = 'jobs'", schema).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%s.jobs: %d tables, %v; want the migration to have made it", schema, n, err)
	}
}

// TestOpenOptionsWinOverURL: an option passed to Open overrides the URL's
// parameter of the same meaning.
func TestOpenOptionsWinOverURL(t *testing.T) {
	ctx := context.Background()
	inURL, given := freshSchema(t), freshSchema(t)
	s, err := Open(ctx, withParams(t, "schema="+inURL+"&strategy=optimistic&notify=false"),
		WithSchema(given), WithStrategy(contract.StrategySkipLocked), WithNotify(true))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Schema() != given || s.Strategy() != contract.StrategySkipLocked || !s.notify {
		t.Errorf("schema %s strategy %s notify %v; want the options' %s, skip-locked, true", s.Schema(), s.Strategy(), s.notify, given)
	}
	// migrate=false in the URL, WithMigrate(true) given: migrated.
	s2, err := Open(ctx, withParams(t, "schema="+inURL+"&migrate=false"), WithMigrate(true))
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if _, err := s2.Stats(ctx); err != nil {
		t.Errorf("Stats on %s after WithMigrate(true) over migrate=false: %v", inURL, err)
	}
}

// TestOpenURLErrorsNameWhatWasPassed: an error about the schema names the
// one in the URL, and a bad backlog parameter is refused before any
// connection.
func TestOpenURLErrorsNameWhatWasPassed(t *testing.T) {
	ctx := context.Background()
	for params, want := range map[string]string{
		"schema=Bad_Name":          `"Bad_Name"`,
		"notify=maybe":             `notify="maybe"`,
		"schema=a_x&schema=b_x":    "schema is given 2 times",
		"strategy=fifo":            `"fifo"`,
		"schema=ok_x;migrate=true": `';' follows parameter "schema"`,
	} {
		s, err := Open(ctx, withParams(t, params))
		if err == nil {
			s.Close()
			t.Errorf("%s: opened; want an error", params)
			continue
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want it to say %s", params, err, want)
		}
	}
	// A key=value string is pgx's alone: backlog's names are not read
	// there. So is a URL that names none of them, as written: pgx takes
	// forms Go's URL parser refuses.
	for _, conn := range []string{
		"host=h dbname=d schema=x",
		"postgres://u@h1:5432,h2/db?sslmode=disable",
		"postgres://u@h/db?application_name=a;b",
		"postgres://u@h/db",
	} {
		got, opts, err := withURLOptions(conn, []Option{WithSchema("x")})
		if err != nil || got != conn || len(opts) != 1 {
			t.Errorf("withURLOptions(%s) = %q, %d options, %v; want it as it is", conn, got, len(opts), err)
		}
	}
	for conn, want := range map[string]bool{
		"postgres://u@h/db?sslmode=disable&schema=x": true,
		"postgres://u@h/db?listen%5Fhost=h2":         true,
		"postgres://u@h/db?x=1;migrate=false":        true,
		"postgres://u@h/db?schemas=x":                false,
		"postgres://u@h/db?sslmode=schema":           false,
	} {
		if got := namesParam(conn); got != want {
			t.Errorf("namesParam(%s) = %v; want %v", conn, got, want)
		}
	}
}
