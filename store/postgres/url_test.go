package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store"
)

// TestParseURLRejectsSemicolons: a ';' between parameters is an error
// naming the parameter (never its value), not a parameter dropped.
func TestParseURLRejectsSemicolons(t *testing.T) {
	for raw, want := range map[string]string{
		"postgres://u@h/db?schema=jobs;notify=false":   `';' follows parameter "schema"`,
		"postgres://u@h/db?sslmode=disable;password=x": `';' follows parameter "sslmode"`,
		"postgres://u@h/db?schema=a&schema=b":          "schema is given 2 times",
	} {
		_, _, err := ParseURL(raw)
		if err == nil || !errors.Is(err, store.ErrBadQuery) || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseURL(%s) = %v; want ErrBadQuery saying %q", raw, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "password=x") {
			t.Errorf("the error shows a parameter value: %v", err)
		}
	}
	if _, opts, err := ParseURL("postgres://u@h/db?schema=jobs&notify=false"); err != nil || len(opts) != 2 {
		t.Fatalf("a good URL: %d options, %v", len(opts), err)
	}
}

// TestParseURLPooler: pooler and listen_host become options and leave the
// URL; listen_host keeps the user, database and pgx's parameters on the
// other hosts; bad values are errors.
func TestParseURLPooler(t *testing.T) {
	conn, opts, err := ParseURL("postgres://app@pgb:6432,pgb2:6432/app?sslmode=disable&pooler=transaction&listen_host=db1:5432,db2:5432&schema=jobs")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(conn, "pooler") || strings.Contains(conn, "listen_host") || !strings.Contains(conn, "pgb:6432,pgb2:6432") {
		t.Errorf("connection string %q", conn)
	}
	c, err := newConfig(opts)
	if err != nil {
		t.Fatal(err)
	}
	if c.pooler != PoolerTransaction || c.schema != "jobs" {
		t.Errorf("pooler %q, schema %q", c.pooler, c.schema)
	}
	if c.listen != "postgres://app@db1:5432,db2:5432/app?sslmode=disable" {
		t.Errorf("listen connection string %q", c.listen)
	}
	if _, opts, err := ParseURL("postgres://h/db?pooler=statement"); err == nil {
		if _, err := newConfig(opts); err == nil || !strings.Contains(err.Error(), "unknown pooler") {
			t.Errorf("pooler=statement: %v", err)
		}
	}
	if _, _, err := ParseURL("postgres://h/db?listen_host=db:notaport"); err == nil {
		t.Error("listen_host with a bad port was accepted")
	}
}

// TestNewRefusesStatementCacheBehindPooler: a caller's pool that caches
// prepared statements (pgx's default) is refused behind a transaction
// pooler, before anything runs on it.
func TestNewRefusesStatementCacheBehindPooler(t *testing.T) {
	_, err := New(context.Background(), testPool(t), WithPooler(PoolerTransaction), WithSchema(freshSchema(t)))
	if !errors.Is(err, contract.ErrUnsupported) || !strings.Contains(err.Error(), "default_query_exec_mode") {
		t.Errorf("New behind a transaction pooler with a statement cache: %v; want core.ErrUnsupported naming default_query_exec_mode", err)
	}
}
