package mysql

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/storetest/dbtest"
)

// tableCount returns how many tables named like pattern the store's
// database holds.
func tableCount(t *testing.T, s *Store, pattern string) int {
	t.Helper()
	var n int
	if err := s.DB().QueryRow("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name LIKE ?", pattern).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestOpenTakesURLs: Open reads a mysql:// URL as store.Open and the
// CLI's --db do, and backlog's parameters in a DSN as in a URL; it used
// to refuse the URL as a malformed DSN and to send prefix=… in a DSN to
// the server as a session variable.
func TestOpenTakesURLs(t *testing.T) {
	ctx := context.Background()
	dsn := dbtest.MySQLDSN(t)
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u := "mysql://" + cfg.User + ":" + cfg.Passwd + "@" + cfg.Addr + "/" + cfg.DBName + "?prefix=url_&strategy=optimistic&notify_interval=off&max_conns=3"
	s, err := Open(ctx, u)
	if err != nil {
		t.Fatalf("Open(mysql:// URL): %v", err)
	}
	defer s.Close()
	if s.Prefix() != "url_" || s.Strategy() != contract.StrategyOptimistic || s.notifyEvery != 0 || s.DB().Stats().MaxOpenConnections != 3 {
		t.Errorf("prefix %q strategy %s notify every %s max conns %d; want url_, optimistic, 0, 3",
			s.Prefix(), s.Strategy(), s.notifyEvery, s.DB().Stats().MaxOpenConnections)
	}
	if n := tableCount(t, s, "url\\_jobs"); n != 1 {
		t.Errorf("url_jobs: %d tables; want 1", n)
	}

	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	d, err := Open(ctx, dsn+sep+"prefix=dsn_&notify_interval=25ms")
	if err != nil {
		t.Fatalf("Open(DSN with prefix=…): %v", err)
	}
	defer d.Close()
	if d.Prefix() != "dsn_" || d.notifyEvery != 25*time.Millisecond {
		t.Errorf("prefix %q notify every %s; want dsn_, 25ms", d.Prefix(), d.notifyEvery)
	}
}

// TestOpenOptionsWinOverURL: an option passed to Open overrides the URL's
// or DSN's parameter of the same meaning.
func TestOpenOptionsWinOverURL(t *testing.T) {
	ctx := context.Background()
	dsn := dbtest.MySQLDSN(t)
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u := "mysql://" + cfg.User + ":" + cfg.Passwd + "@" + cfg.Addr + "/" + cfg.DBName + "?prefix=url_&strategy=optimistic&migrate=false"
	s, err := Open(ctx, u, WithPrefix("opt_"), WithStrategy(contract.StrategySkipLocked), WithMigrate(true))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Prefix() != "opt_" || s.Strategy() != contract.StrategySkipLocked {
		t.Errorf("prefix %q strategy %s; want the options' opt_, skip-locked", s.Prefix(), s.Strategy())
	}
	if n := tableCount(t, s, "opt\\_jobs"); n != 1 {
		t.Errorf("opt_jobs: %d tables; want 1 (WithMigrate(true) over migrate=false)", n)
	}
	if n := tableCount(t, s, "url\\_%"); n != 0 {
		t.Errorf("%d url_ tables; want none", n)
	}
}

// TestOpenURLErrors: a bad backlog parameter in a URL or DSN is refused
// before any connection, with an error naming it.
func TestOpenURLErrors(t *testing.T) {
	ctx := context.Background()
	for conn, want := range map[string]string{
		"mysql://u@127.0.0.1:1/db?prefix=bad-prefix": `"bad-prefix"`,
		"mysql://u@127.0.0.1:1/db?migrate=maybe":     `migrate="maybe"`,
		"mysql://u@127.0.0.1:1/db?prefix=a&prefix=b": "prefix is given 2 times",
		"mysql://u@127.0.0.1:1/":                     "URL names no database",
		"u@tcp(127.0.0.1:1)/db?max_conns=0":          `max_conns="0"`,
		"u@tcp(127.0.0.1:1)/db?strategy=fifo":        `"fifo"`,
		"not a dsn":                                  "malformed DSN",
	} {
		s, err := Open(ctx, conn)
		if err == nil {
			s.Close()
			t.Errorf("%s: opened; want an error", conn)
			continue
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want it to say %s", conn, err, want)
		}
	}
}
