package mysql

import (
	"database/sql"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/backlogq/backlog/store"
)

// TestParseURLRejectsSemicolons: a ';' between parameters is an error
// naming the parameter, not a parameter dropped.
func TestParseURLRejectsSemicolons(t *testing.T) {
	for raw, want := range map[string]string{
		"mysql://u@h/db?prefix=app_;migrate=false": `';' follows parameter "prefix"`,
		"mysql://u@h/db?tls=true;timeout=5s":       `';' follows parameter "tls"`,
		"mysql://u@h/db?prefix=a_&prefix=b_":       "prefix is given 2 times",
	} {
		_, _, err := ParseURL(raw)
		if err == nil || !errors.Is(err, store.ErrBadQuery) || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseURL(%s) = %v; want ErrBadQuery saying %q", raw, err, want)
		}
	}
	if _, opts, err := ParseURL("mysql://u@h/db?prefix=app_&migrate=false"); err != nil || len(opts) != 2 {
		t.Fatalf("a good URL: %d options, %v", len(opts), err)
	}
}

// TestParseURLHosts: a URL naming several hosts gives the DSN of the first
// and WithHosts with all of them (3306 where no port is named); one host,
// an IPv6 literal included, gives the DSN alone, as it always did; a host
// list with an empty entry or a bad port, and an IPv6 literal in a list,
// are errors that say what is wrong.
func TestParseURLHosts(t *testing.T) {
	for raw, want := range map[string]struct {
		addr  string
		hosts []string
	}{
		"mysql://root@127.0.0.1:13306,127.0.0.1:13307/test":         {"127.0.0.1:13306", []string{"127.0.0.1:13306", "127.0.0.1:13307"}},
		"mysql://u:pw@h1,h2:3307,h3:3306/db?prefix=app_&timeout=1s": {"h1:3306", []string{"h1:3306", "h2:3307", "h3:3306"}},
		"mysql://u@db.example:3306/db":                              {"db.example:3306", nil},
		"mysql://u@h/db":                                            {"h:3306", nil},
		"mysql://u@[::1]:3307/db":                                   {"[::1]:3307", nil},
		"mysql://u@[::1]/db":                                        {"[::1]:3306", nil},
		"mysql://u@[fe80::1%25eth0]:3306/db?strategy=optimistic":    {"[fe80::1%eth0]:3306", nil},
	} {
		dsn, opts, err := ParseURL(raw)
		if err != nil {
			t.Errorf("ParseURL(%s): %v", raw, err)
			continue
		}
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			t.Errorf("ParseURL(%s) = %q, which the driver refuses: %v", raw, dsn, err)
			continue
		}
		if cfg.Addr != want.addr {
			t.Errorf("ParseURL(%s): DSN address %q, want %q", raw, cfg.Addr, want.addr)
		}
		c, err := newConfig(opts)
		if err != nil {
			t.Errorf("ParseURL(%s): options: %v", raw, err)
			continue
		}
		if !slices.Equal(c.hosts, want.hosts) {
			t.Errorf("ParseURL(%s): hosts %q, want %q", raw, c.hosts, want.hosts)
		}
	}
	for raw, want := range map[string]string{
		"mysql://u@h1,,h2/db":                "host list 2 of 3 is empty",
		"mysql://u@h1,h2,/db":                "host list 3 of 3 is empty",
		"mysql://u@,h2/db":                   "host list 1 of 2 is empty",
		"mysql://u@h1:3306,h2:99999/db":      `port "99999" is not a number from 1 to 65535`,
		"mysql://u@h1:0,h2:3306/db":          `port "0" is not a number from 1 to 65535`,
		"mysql://u@h1:3306,h2/db":            "give every host its port",
		"mysql://u@h1:x,h2/db":               "invalid port",
		"mysql://u@h1:3306,:3307/db":         "host 2 of 2 has no host name",
		"mysql://u@[::1]:3306,[::1]:3307/db": "a bracketed IPv6 address cannot be part of a host list",
		"mysql://u@h1:3306,[::1]:3307/db":    "a bracketed IPv6 address cannot be part of a host list",
		"mysql://u@h1,h2/db?timeout=forever": "URL parameters",
	} {
		_, _, err := ParseURL(raw)
		if err == nil || !strings.HasPrefix(err.Error(), "mysql: ") || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseURL(%s) = %v; want an error saying %q", raw, err, want)
		}
	}
}

// TestWithHostsChecks: Open refuses a host list it cannot dial before it
// connects anywhere, and New refuses WithHosts.
func TestWithHostsChecks(t *testing.T) {
	for _, hosts := range [][]string{{}, {"h1:3306", ""}, {"h1"}, {"h1:0"}, {":3306"}, {"[::1]:70000"}} {
		if _, err := Open(t.Context(), "u@tcp(h:3306)/db", WithHosts(hosts...)); err == nil || !strings.HasPrefix(err.Error(), "mysql: ") || !strings.Contains(err.Error(), "mysql: host ") && !strings.Contains(err.Error(), "names no host") {
			t.Errorf("Open with WithHosts(%q) = %v; want an error", hosts, err)
		}
	}
	if _, err := Open(t.Context(), "u@unix(/tmp/x.sock)/db", WithHosts("h1:3306", "h2:3306")); err == nil || !strings.Contains(err.Error(), "TCP") {
		t.Errorf("Open on a unix socket DSN with WithHosts = %v; want an error naming TCP", err)
	}
	if _, err := New(t.Context(), &sql.DB{}, WithHosts("h1:3306", "h2:3306")); err == nil || !strings.Contains(err.Error(), "WithHosts needs Open") {
		t.Errorf("New with WithHosts = %v; want an error", err)
	}
}

// TestSplitHostList: bracketed IPv6 entries, which Open's WithHosts takes
// and a URL parser may one day pass, split with their ports.
func TestSplitHostList(t *testing.T) {
	got, err := splitHostList("[::1]:3307,[fe80::2],h")
	if want := []string{"[::1]:3307", "[fe80::2]:3306", "h:3306"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("splitHostList = %q, %v; want %q", got, err, want)
	}
	for _, bad := range []string{"[::1", "[::1]x", "[]:3306", "h,,[::1]"} {
		if got, err := splitHostList(bad); err == nil {
			t.Errorf("splitHostList(%q) = %q; want an error", bad, got)
		}
	}
}
