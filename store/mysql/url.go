package mysql

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/backlogq/backlog/core/contract"

	"github.com/go-sql-driver/mysql"

	"github.com/backlogq/backlog/store"
)

func init() {
	store.Register("mysql", openURL)
}

// openURL opens a store from a "mysql://" URL.
func openURL(ctx context.Context, u *url.URL) (contract.Store, error) {
	dsn, opts, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	return Open(ctx, dsn, opts...)
}

// ParseURL turns a store URL,
//
//	mysql://user:password@host:port/dbname?prefix=backlog_&strategy=skip-locked&…
//	mysql://user:password@host1:port1,host2:port2,host3:port3/dbname?…
//
// into a go-sql-driver DSN ("user:password@tcp(host:port)/dbname?…") and the
// options named by backlog's own query parameters, which it removes:
//
//	prefix=backlog_       table prefix
//	strategy=skip-locked  claim strategy: skip-locked (default) or optimistic
//	migrate=false         do not migrate on open
//	max_conns=16          connection pool size
//	notify_interval=10ms  how often Listen reads new jobs and notifications
//	                      (a Go duration; 0 or off: no notifications)
//
// Every other parameter is left for the driver (tls, timeout, readTimeout,
// …). The port defaults to 3306; the database name is required. A query
// that does not parse (a ';' between parameters, a bad %-escape) and one
// of backlog's parameters given twice are errors.
//
// A URL naming several hosts, separated by ',', is for the nodes of one
// database (a Galera cluster, a primary and its failover replica): the
// DSN names the first, and the options include WithHosts with all of
// them, so that Open connects to the first that answers (see WithHosts
// for the order and the per-host timeout, the driver's timeout parameter
// or DefaultHostTimeout). An empty entry ("h1,,h2") and a port that is not
// a number from 1 to 65535 are errors, and so is a list whose last host
// has no port while another has one ("h1:3306,h2": URL parsing takes
// ":3306,h2" for the port): give every host its port, or none. A bracketed IPv6 address works
// alone ("mysql://u@[::1]:3306/db") but not in a list, which URL parsing
// refuses: name such hosts by a host name, or call Open with WithHosts.
func ParseURL(raw string) (string, []Option, error) {
	u, err := store.ParseURL(raw)
	if err != nil {
		if auth := authority(raw); strings.Contains(auth, ",") {
			if strings.Contains(auth, "[") {
				return "", nil, fmt.Errorf("mysql: %w (a bracketed IPv6 address cannot be part of a host list: use host names, or Open with WithHosts)", err)
			}
			return "", nil, fmt.Errorf("mysql: %w (in a host list, give every host its port, as in h1:3306,h2:3306)", err)
		}
		return "", nil, fmt.Errorf("mysql: %w", err)
	}
	return parseURL(u)
}

// authority returns the host part of a raw URL (between "//" and the next
// '/', '?' or '#', after any user info), or "".
func authority(raw string) string {
	_, rest, ok := strings.Cut(raw, "//")
	if !ok {
		return ""
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		rest = rest[i+1:]
	}
	return rest
}

func parseURL(u *url.URL) (string, []Option, error) {
	if u.Scheme != "mysql" {
		return "", nil, fmt.Errorf("mysql: URL scheme %q: want mysql://user:password@host:3306/dbname", u.Scheme)
	}
	if u.Opaque != "" || u.Host == "" {
		return "", nil, errors.New("mysql: URL names no server: want mysql://user:password@host:3306/dbname")
	}
	name, err := url.PathUnescape(trimSlash(u.Path))
	if err != nil || name == "" {
		return "", nil, errors.New("mysql: URL names no database: want mysql://user:password@host:3306/dbname")
	}
	cfg := mysql.NewConfig()
	cfg.Net = "tcp"
	var hosts []string
	if strings.Contains(u.Host, ",") {
		if hosts, err = splitHostList(u.Host); err != nil {
			return "", nil, err
		}
		cfg.Addr = hosts[0]
	} else {
		host, port := u.Hostname(), u.Port()
		if port == "" {
			port = "3306"
		} else if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			return "", nil, fmt.Errorf("mysql: URL port %q is not a number", port)
		}
		cfg.Addr = net.JoinHostPort(host, port)
	}
	cfg.DBName = name
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	q, err := store.Query(u, params...)
	if err != nil {
		return "", nil, fmt.Errorf("mysql: %w", err)
	}
	var opts []Option
	if hosts != nil {
		opts = append(opts, WithHosts(hosts...))
	}
	rest := url.Values{}
	for k, vs := range q {
		o, ours, err := paramOption(k, vs[0])
		if err != nil {
			return "", nil, err
		}
		if ours {
			opts = append(opts, o)
		} else {
			rest[k] = vs
		}
	}
	dsn := cfg.FormatDSN()
	if len(rest) > 0 {
		// Let the driver parse its own parameters, so unknown ones and bad
		// values are reported as it would.
		full := dsn + "?" + rest.Encode()
		if _, err := mysql.ParseDSN(full); err != nil {
			return "", nil, fmt.Errorf("mysql: URL parameters: %w", err)
		}
		dsn = full
	}
	return dsn, opts, nil
}

// params are backlog's own parameters of a URL or DSN (paramOption).
var params = []string{"prefix", "strategy", "migrate", "max_conns", "notify_interval"}

// paramOption returns the option that backlog's parameter k=v names, and
// whether k is one of backlog's parameters; an error for a bad value.
func paramOption(k, v string) (Option, bool, error) {
	switch k {
	case "prefix":
		return WithPrefix(v), true, nil
	case "strategy":
		return WithStrategy(contract.ClaimStrategy(v)), true, nil
	case "migrate":
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, true, fmt.Errorf("mysql: migrate=%q: want true or false", v)
		}
		return WithMigrate(b), true, nil
	case "max_conns":
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, true, fmt.Errorf("mysql: max_conns=%q: want a positive integer", v)
		}
		return WithMaxOpenConns(n), true, nil
	case "notify_interval":
		d := time.Duration(0)
		if v != "off" {
			var err error
			if d, err = time.ParseDuration(v); err != nil || d < 0 {
				return nil, true, fmt.Errorf("mysql: notify_interval=%q: want a non-negative Go duration such as 10ms, or off", v)
			}
		}
		return WithNotifyInterval(d), true, nil
	}
	return nil, false, nil
}

// withConnOptions returns the go-sql-driver DSN that conn names and opts
// led by the options of backlog's parameters in it (so that opts,
// applied later, win): a "mysql://" URL as ParseURL reads it, and a DSN
// with its parameters prefix, strategy, migrate, max_conns and
// notify_interval taken out (they are no server variables).
func withConnOptions(conn string, opts []Option) (string, []Option, error) {
	if len(conn) >= len("mysql://") && strings.EqualFold(conn[:len("mysql://")], "mysql://") {
		dsn, urlOpts, err := ParseURL(conn)
		if err != nil {
			return "", nil, err
		}
		return dsn, append(urlOpts, opts...), nil
	}
	cfg, err := mysql.ParseDSN(conn)
	if err != nil {
		return "", nil, fmt.Errorf("mysql: malformed DSN (want user:password@tcp(host:3306)/dbname or mysql://user:password@host:3306/dbname): %w", err)
	}
	var dsnOpts []Option
	for _, k := range params {
		v, ok := cfg.Params[k]
		if !ok {
			continue
		}
		o, _, err := paramOption(k, v)
		if err != nil {
			return "", nil, err
		}
		dsnOpts = append(dsnOpts, o)
		delete(cfg.Params, k)
	}
	if dsnOpts == nil {
		return conn, opts, nil
	}
	return cfg.FormatDSN(), append(dsnOpts, opts...), nil
}

func trimSlash(p string) string {
	for len(p) > 0 && p[0] == '/' {
		p = p[1:]
	}
	return p
}
