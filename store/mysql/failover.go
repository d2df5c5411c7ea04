package mysql

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
)

// DefaultHostTimeout bounds one host's attempt at a new connection when
// Open has several hosts (WithHosts, or a URL naming several) and the DSN
// sets no timeout parameter: the dial, the handshake, the login and the
// readiness check together. A refusing host fails at once; a host that
// does not answer (a black hole, a hung server) costs at most this long
// before the next host is tried.
const DefaultHostTimeout = 3 * time.Second

// WithHosts makes Open connect to a list of servers instead of the DSN's
// one address: hosts are "host:port" addresses (an IPv6 host in brackets,
// "[::1]:3306", as net.JoinHostPort writes it), each a node of one
// database (a Galera cluster's nodes, or a primary and the replica a
// failover promotes). Every new connection of the pool tries them in
// turn, starting from the host that last answered and going on in list
// order (wrapping around): the first that completes the login and, on a
// Galera node, reports wsrep_ready ON serves the connection. Each host
// gets the DSN's timeout parameter, or DefaultHostTimeout, for the whole
// attempt, so a dead host delays a new connection by at most that once;
// later connections start from the host that answered. The DSN keeps
// every other setting (user, database, TLS, parameters); with TLS, each
// host's name is checked against its own certificate.
//
// A connection that breaks is dropped by the pool as usual, and the next
// one goes through the list again: the store follows the live hosts
// without a restart. So is a connection to a Galera node that answers
// error 1047 (cut off from the cluster's primary component): the store
// retries the statement, which took no effect, on a new connection. A
// statement in flight when its server dies fails with the driver's
// connection error, which the store does not retry (the statement may
// have committed); the engine's callers retry.
//
// Open fails with an error for an empty list, an empty host or a port
// that is not a number from 1 to 65535, and for a DSN that is not TCP. New
// refuses it (the caller's *sql.DB dials for itself). One host behaves as
// the DSN's own address does.
func WithHosts(hosts ...string) Option {
	return func(c *config) { c.hosts = append(make([]string, 0, len(hosts)), hosts...) } // never nil: set
}

// checkNet refuses WithHosts on a DSN that is not TCP.
func checkNet(cfg *mysql.Config) error {
	switch cfg.Net {
	case "tcp", "tcp4", "tcp6":
		return nil
	}
	return fmt.Errorf("mysql: WithHosts needs a TCP DSN, not %q", cfg.Net)
}

// checkHosts validates WithHosts' addresses.
func checkHosts(hosts []string) error {
	if len(hosts) == 0 {
		return errors.New("mysql: WithHosts names no host")
	}
	for i, h := range hosts {
		host, port, err := net.SplitHostPort(h)
		if err != nil {
			return fmt.Errorf("mysql: host %d of %d (%q): want host:port: %w", i+1, len(hosts), h, err)
		}
		if host == "" {
			return fmt.Errorf("mysql: host %d of %d (%q) has no host name", i+1, len(hosts), h)
		}
		if err := checkPort(port); err != nil {
			return fmt.Errorf("mysql: host %d of %d: %w", i+1, len(hosts), err)
		}
	}
	return nil
}

// checkPort reports an error unless port is a TCP port number, 1 to 65535.
func checkPort(port string) error {
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return fmt.Errorf("port %q is not a number from 1 to 65535", port)
	}
	return nil
}

// splitHostList splits the authority of a URL naming several servers
// ("h1:3306,h2,[::1]:3307", user info removed) into "host:port" addresses,
// with port 3306 where an entry names none. It returns an error naming
// the entry for an empty entry, a bad port or an unclosed bracket.
func splitHostList(list string) ([]string, error) {
	parts := strings.Split(list, ",")
	out := make([]string, 0, len(parts))
	for i, p := range parts {
		host, port := p, ""
		switch {
		case p == "":
			return nil, fmt.Errorf("mysql: URL host list %d of %d is empty: separate hosts with ',' as in mysql://user@h1:3306,h2:3306/dbname", i+1, len(parts))
		case strings.HasPrefix(p, "["):
			end := strings.IndexByte(p, ']')
			if end < 0 {
				return nil, fmt.Errorf("mysql: URL host %d of %d: an IPv6 address without its closing ']'", i+1, len(parts))
			}
			host, port = p[1:end], p[end+1:]
			if port != "" {
				if port[0] != ':' {
					return nil, fmt.Errorf("mysql: URL host %d of %d: want [IPv6]:port", i+1, len(parts))
				}
				port = port[1:]
			}
		case strings.Contains(p, ":"):
			host, port, _ = strings.Cut(p, ":")
		}
		if host == "" {
			return nil, fmt.Errorf("mysql: URL host %d of %d has no host name", i+1, len(parts))
		}
		if port == "" {
			port = "3306"
		} else if err := checkPort(port); err != nil {
			return nil, fmt.Errorf("mysql: URL host %d of %d: %w", i+1, len(parts), err)
		}
		out = append(out, net.JoinHostPort(host, port))
	}
	return out, nil
}

// failover is a driver.Connector over several servers: one go-sql-driver
// connector per host, tried in turn from the one that last answered; its
// connections are nodeConns.
type failover struct {
	hosts   []string
	conns   []driver.Connector
	timeout time.Duration // per host
	last    atomic.Int64  // index of the host that last answered
}

// newConnector returns the connector Open's pool uses: go-sql-driver's own
// for one address, or a failover connector over hosts when there are
// several, whose first connection starts from hosts[first].
func newConnector(cfg *mysql.Config, hosts []string, first int) (driver.Connector, error) {
	if len(hosts) == 0 {
		c, err := mysql.NewConnector(cfg)
		if err != nil {
			return nil, fmt.Errorf("mysql: %w", err)
		}
		return c, nil
	}
	f := &failover{hosts: hosts, timeout: cfg.Timeout}
	f.last.Store(int64(first % len(hosts)))
	if f.timeout <= 0 {
		f.timeout = DefaultHostTimeout
	}
	for _, h := range hosts {
		c, err := mysql.NewConnector(hostConfig(cfg, h))
		if err != nil {
			return nil, fmt.Errorf("mysql: host %s: %w", h, err)
		}
		f.conns = append(f.conns, c)
	}
	return f, nil
}

// hostConfig returns a copy of cfg for the server at addr: with TLS, the
// name checked against the server's certificate is addr's host, unless
// the TLS configuration named a server of its own (go-sql-driver sets the
// name from the DSN's address when the configuration names none).
func hostConfig(cfg *mysql.Config, addr string) *mysql.Config {
	hc := cfg.Clone()
	hc.Addr = addr
	if hc.TLS != nil && !hc.TLS.InsecureSkipVerify {
		if h, _, err := net.SplitHostPort(cfg.Addr); err == nil && hc.TLS.ServerName == h {
			hc.TLS.ServerName = ""
			if h, _, err := net.SplitHostPort(addr); err == nil {
				hc.TLS.ServerName = h
			}
		}
	}
	return hc
}

// Connect returns a connection to the first host that answers, starting
// from the one that last did. Each host gets f.timeout for the login and
// the readiness check; the error, when none answers, names every host's.
func (f *failover) Connect(ctx context.Context) (driver.Conn, error) {
	start := int(f.last.Load())
	var errs []error
	for i := range f.conns {
		k := (start + i) % len(f.conns)
		c, err := f.connectHost(ctx, k)
		if err == nil {
			f.last.Store(int64(k))
			return c, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", f.hosts[k], err))
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("mysql: no host answered (%d tried): %w", len(errs), errors.Join(errs...))
}

// connectHost connects to host k within f.timeout and checks that a
// Galera node is ready for clients (wsrep_ready ON): a node that left the
// cluster's primary component, or is still joining, refuses every
// statement that reads a table with error 1047.
func (f *failover) connectHost(ctx context.Context, k int) (driver.Conn, error) {
	hctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	c, err := f.conns[k].Connect(hctx)
	if err != nil {
		return nil, err
	}
	if err := wsrepReady(hctx, c); err != nil {
		c.Close()
		return nil, err
	}
	return wrapNode(c), nil
}

// Driver returns go-sql-driver's driver.
func (f *failover) Driver() driver.Driver { return mysql.MySQLDriver{} }

// errNotReady is wsrepReady's error for a Galera node that is not ready.
var errNotReady = errors.New("Galera node not ready for clients (wsrep_ready is not ON)")

// wsrepReady checks on the new connection c that the server is not a
// Galera node, or is one ready for clients. A server with the wsrep
// provider loaded (wsrep_provider_name set) is a Galera node; MariaDB
// without it reports wsrep_ready OFF too, which means nothing there. SHOW
// STATUS is answered even by a node that refuses other statements.
func wsrepReady(ctx context.Context, c driver.Conn) error {
	q, ok := c.(driver.QueryerContext)
	if !ok {
		return nil
	}
	rows, err := q.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_provider_name', 'wsrep_ready')", nil)
	if err != nil {
		return err
	}
	defer rows.Close()
	vals := make([]driver.Value, len(rows.Columns()))
	if len(vals) != 2 {
		return fmt.Errorf("SHOW STATUS returned %d columns", len(vals))
	}
	status := map[string]string{}
	for {
		err := rows.Next(vals)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		status[strings.ToLower(asString(vals[0]))] = asString(vals[1])
	}
	if status["wsrep_provider_name"] != "" && !strings.EqualFold(status["wsrep_ready"], "ON") {
		return errNotReady
	}
	return nil
}

// asString returns a text column's value as a string.
func asString(v driver.Value) string {
	switch v := v.(type) {
	case []byte:
		return string(v)
	case string:
		return v
	}
	return fmt.Sprint(v)
}

// nodeConn is a connection of a failover connector. It forwards every
// call to the driver's connection and watches the errors: once a
// statement or commit failed with 1047 (the node is no longer part of the
// cluster's primary component, or not yet), the connection reports itself
// invalid, so that the pool closes it instead of reusing it, and the retry
// runs on a new connection, to a node that is ready. Without it a pool
// would keep its connections to a node cut off from the others, which
// stay open and refuse every statement.
type nodeConn struct {
	c   driver.Conn
	bad atomic.Bool
}

// interfaces every connection of go-sql-driver implements.
type fullConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
	driver.NamedValueChecker
}

var _ fullConn = (*nodeConn)(nil)

// wrapNode wraps c, or returns it as it is when it lacks an interface
// nodeConn forwards.
func wrapNode(c driver.Conn) driver.Conn {
	if _, ok := c.(fullConn); !ok {
		return c
	}
	return &nodeConn{c: c}
}

// seen records err and returns it.
func (n *nodeConn) seen(err error) error {
	if err != nil && wsrepNotReady(err) {
		n.bad.Store(true)
	}
	return err
}

func (n *nodeConn) full() fullConn { return n.c.(fullConn) }

// Prepare implements driver.Conn.
func (n *nodeConn) Prepare(query string) (driver.Stmt, error) {
	s, err := n.c.Prepare(query)
	return s, n.seen(err)
}

// Close implements driver.Conn.
func (n *nodeConn) Close() error { return n.c.Close() }

// Begin implements driver.Conn.
func (n *nodeConn) Begin() (driver.Tx, error) {
	return n.BeginTx(context.Background(), driver.TxOptions{})
}

// BeginTx implements driver.ConnBeginTx.
func (n *nodeConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := n.full().BeginTx(ctx, opts)
	if err != nil {
		return nil, n.seen(err)
	}
	return nodeTx{tx, n}, nil
}

// PrepareContext implements driver.ConnPrepareContext.
func (n *nodeConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	s, err := n.full().PrepareContext(ctx, query)
	return s, n.seen(err)
}

// ExecContext implements driver.ExecerContext.
func (n *nodeConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	r, err := n.full().ExecContext(ctx, query, args)
	return r, n.seen(err)
}

// QueryContext implements driver.QueryerContext.
func (n *nodeConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	r, err := n.full().QueryContext(ctx, query, args)
	return r, n.seen(err)
}

// Ping implements driver.Pinger.
func (n *nodeConn) Ping(ctx context.Context) error { return n.seen(n.full().Ping(ctx)) }

// ResetSession implements driver.SessionResetter: a connection that met
// 1047 is bad.
func (n *nodeConn) ResetSession(ctx context.Context) error {
	if n.bad.Load() {
		return driver.ErrBadConn
	}
	return n.full().ResetSession(ctx)
}

// IsValid implements driver.Validator.
func (n *nodeConn) IsValid() bool { return !n.bad.Load() && n.full().IsValid() }

// CheckNamedValue implements driver.NamedValueChecker.
func (n *nodeConn) CheckNamedValue(v *driver.NamedValue) error { return n.full().CheckNamedValue(v) }

// nodeTx is a transaction of a nodeConn, whose commit error it watches.
type nodeTx struct {
	tx driver.Tx
	n  *nodeConn
}

func (t nodeTx) Commit() error   { return t.n.seen(t.tx.Commit()) }
func (t nodeTx) Rollback() error { return t.tx.Rollback() }
